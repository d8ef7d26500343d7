// `placement_offline report --request=FILE [--placement=FILE | --algorithm=NAME[,NAME...]] --out=FILE`:
// a self-contained HTML report (service/report/report.h) of one placement read from a file, or of the
// placements of one or more algorithms (default: the request's algorithm, else pardnn). With two or more
// algorithms the report starts with the table of `compare`. Time limits as for `compare`.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "service/engine/io/message_io.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/solve/algorithm_registry.h"
#include "service/engine/solve/solve.h"
#include "service/offline/offline_commands.h"
#include "service/report/report.h"

ABSL_FLAG(
    int32_t, max_drawn_ops, 5000,
    "report: above this many ops the Gantt lanes show aggregated activity instead of one bar per op");
ABSL_FLAG(int32_t, max_drawn_transfers, 1000, "report: draw at most this many (the largest) transfers");

namespace placement::offline {
namespace {

// Algorithms from --algorithm (or --algorithms), comma-separated; empty when neither is given.
absl::StatusOr<std::vector<std::string>> RequestedAlgorithms() {
  std::string flag = absl::GetFlag(FLAGS_algorithm);
  if (flag.empty()) flag = absl::GetFlag(FLAGS_algorithms);
  return ParseAlgorithmNames("--algorithm", flag);
}

}  // namespace

int RunReport(const std::vector<std::string>& args) {
  const std::string path = absl::GetFlag(FLAGS_request);
  if (path.empty()) return UsageError("report: --request=FILE is required");
  absl::StatusOr<std::vector<std::string>> algorithms = RequestedAlgorithms();
  if (!algorithms.ok()) return UsageError(std::string(algorithms.status().message()));
  const std::string placement_path = absl::GetFlag(FLAGS_placement);
  if (!placement_path.empty() && !algorithms->empty()) {
    return UsageError("report: give either --placement or --algorithm, not both");
  }

  absl::StatusOr<v1::PlaceRequest> request = engine::ReadMessageFile<v1::PlaceRequest>(path);
  if (!request.ok()) return Fail(request.status());
  ApplyPlanFlags(request->mutable_options());
  absl::StatusOr<engine::Model> model = engine::BuildModel(*request);
  if (!model.ok()) return Fail(model.status());

  std::vector<report::ReportRun> runs;
  if (!placement_path.empty()) {
    absl::StatusOr<v1::Placement> placement = ReadPlacementFile(placement_path);
    if (!placement.ok()) return Fail(placement.status());
    runs.push_back({placement_path, *placement, ""});
  } else {
    v1::PlacementOptions options = request->options();
    if (algorithms->empty()) {
      algorithms->push_back(options.algorithm().empty() ? "pardnn" : options.algorithm());
    }
    if (absl::GetFlag(FLAGS_seed) != 0) options.set_seed(absl::GetFlag(FLAGS_seed));
    const absl::Duration limit = SolveTimeLimit(options);
    for (const std::string& name : *algorithms) {
      options.set_algorithm(name);
      absl::StatusOr<v1::Placement> placement = SolveWithin(*model, options, limit);
      if (placement.ok()) {
        runs.push_back({name, *std::move(placement), ""});
      } else {
        runs.push_back({name, v1::Placement(),
                        absl::StrCat(absl::StatusCodeToString(placement.status().code()), ": ",
                                     placement.status().message())});
      }
    }
  }

  report::ReportOptions options;
  options.subtitle = path;
  options.max_drawn_ops = absl::GetFlag(FLAGS_max_drawn_ops);
  options.max_drawn_transfers = absl::GetFlag(FLAGS_max_drawn_transfers);
  absl::StatusOr<std::string> html = report::RenderHtmlReport(*model, runs, options);
  if (!html.ok()) return Fail(html.status());
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty() || out == "-") {
    std::cout << *html;
    std::cout.flush();
    return 0;
  }
  absl::Status written = engine::WriteFileBytes(out, *html);
  return written.ok() ? 0 : Fail(written);
}

}  // namespace placement::offline
