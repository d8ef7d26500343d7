// Flags and helpers shared by the verbs of placement_offline (declared in offline_commands.h).
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "service/engine/io/placement_file.h"
#include "service/engine/solve/algorithm_registry.h"
#include "service/engine/solve/solve.h"
#include "service/offline/offline_commands.h"

ABSL_FLAG(std::string, request, "", "PlaceRequest file (.json, .json.gz or .pb)");
ABSL_FLAG(std::string, placement, "",
          "Placement file (.json/.pb; a PlaceResponse or EvaluateResponse is accepted too)");
ABSL_FLAG(std::string, algorithm, "",
          "Algorithm to run (overrides the request's options.algorithm; default: the request's, else auto)");
ABSL_FLAG(std::string, algorithms, "", "Comma-separated algorithms for compare (default: all)");
ABSL_FLAG(std::string, out, "", "Output file (default: standard output)");
ABSL_FLAG(std::string, format, "",
          "compare: the table's format, text (default), json, csv or markdown. place and evaluate: auto "
          "(default: a short summary when standard output is a terminal, else JSON), json or summary");
ABSL_FLAG(std::string, from, "",
          "Input format for convert: msr, pipedream, onnx, chakra, wfcommons, pardnn");
ABSL_FLAG(std::string, in, "", "Input path for convert (file or folder)");
ABSL_FLAG(std::string, cluster, "", "Cluster file (JSON Cluster) for convert");
ABSL_FLAG(std::string, to, "", "Export format: dot, csv or pardnn");
ABSL_FLAG(double, time_limit_s, 0,
          "Time limit in seconds (0 = the request's options.time_limit, else 60 s)");
ABSL_FLAG(uint64_t, seed, 0, "Seed (0 = the request's options.seed)");
ABSL_FLAG(int32_t, microbatches, -1,
          "Training plan: microbatches per step (api.md §2.1; -1 = the request's options.microbatches)");
ABSL_FLAG(int32_t, max_in_flight, -1,
          "Training plan: microbatches in flight at most, 0 = the solver chooses (-1 = the request's)");
ABSL_FLAG(int32_t, data_parallel, -1,
          "Training plan: data-parallel replicas, 0 = the solver chooses (-1 = the request's)");

ABSL_FLAG(std::string, previous, "",
          "Re-placement: the previous placement (a Placement, PlaceResponse or EvaluateResponse file); "
          "needs --previous_request");
ABSL_FLAG(std::string, previous_request, "",
          "Re-placement: the request the --previous placement answered (names its ops and devices; its "
          "devices missing from --request's cluster are sent as departed)");
ABSL_FLAG(double, move_weight, -1,
          "Re-placement: ns of step traded for one byte moved (-1 = the request's "
          "options.move_weight_ns_per_byte)");

namespace placement::offline {

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "%s: %s\n", absl::StatusCodeToString(status.code()).c_str(),
               std::string(status.message()).c_str());
  return 1;
}

absl::Duration SolveTimeLimit(const v1::PlacementOptions& options) {
  if (absl::GetFlag(FLAGS_time_limit_s) > 0) return absl::Seconds(absl::GetFlag(FLAGS_time_limit_s));
  if (options.has_time_limit()) {
    return absl::Seconds(options.time_limit().seconds()) + absl::Nanoseconds(options.time_limit().nanos());
  }
  return kDefaultTimeLimit;
}

absl::StatusOr<v1::Placement> SolveWithin(const engine::Model& model, const v1::PlacementOptions& options,
                                          absl::Duration limit) {
  engine::SolveContext context;
  context.deadline = absl::Now() + limit;
  return engine::Solve(model, options, context);
}

void ApplyPlanFlags(v1::PlacementOptions* options) {
  if (absl::GetFlag(FLAGS_microbatches) >= 0) options->set_microbatches(absl::GetFlag(FLAGS_microbatches));
  if (absl::GetFlag(FLAGS_max_in_flight) >= 0) {
    options->set_max_in_flight(absl::GetFlag(FLAGS_max_in_flight));
  }
  if (absl::GetFlag(FLAGS_data_parallel) >= 0) {
    options->set_data_parallel(absl::GetFlag(FLAGS_data_parallel));
  }
}

absl::Status ApplyReplacementFlags(v1::PlaceRequest* request) {
  const std::string previous = absl::GetFlag(FLAGS_previous);
  const std::string previous_request = absl::GetFlag(FLAGS_previous_request);
  if (previous.empty() != previous_request.empty()) {
    return absl::InvalidArgumentError("--previous and --previous_request go together");
  }
  if (!previous.empty()) {
    absl::Status set = engine::ReadPreviousPlacement(previous, previous_request, request->cluster(),
                                                     request->mutable_options());
    if (!set.ok()) return set;
  }
  if (absl::GetFlag(FLAGS_move_weight) != -1) {
    request->mutable_options()->set_move_weight_ns_per_byte(absl::GetFlag(FLAGS_move_weight));
  }
  return absl::OkStatus();
}

int UsageError(const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  return 2;
}

absl::StatusOr<std::vector<std::string>> ParseAlgorithmNames(const std::string& flag,
                                                             const std::string& list) {
  std::vector<std::string> names;
  for (absl::string_view part : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    const std::string name(absl::StripAsciiWhitespace(part));
    absl::StatusOr<const engine::Partitioner*> found =
        engine::AlgorithmRegistry::Default().Find(name, flag);
    if (!found.ok()) return found.status();
    names.push_back(name);
  }
  return names;
}

}  // namespace placement::offline
