// `placement_offline compare --request=FILE [--algorithms=a,b,...] [--format=text|json|csv|markdown]`:
// runs several algorithms on one request, each scored by the same simulator (through Solve), and prints
// one table row per algorithm (service/engine/baselines/compare_table.h). Default algorithms: every
// registered one except `auto` (which would only repeat the others). Each algorithm gets the full time
// limit (--time_limit_s, else the request's options.time_limit, else 60 s). A failing algorithm becomes an
// "error" row; the exit status is 0 as long as the table could be produced.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "service/engine/baselines/compare_table.h"
#include "service/engine/io/message_io.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/sim/simulator.h"
#include "service/engine/solve/algorithm_registry.h"
#include "service/engine/solve/solve.h"
#include "service/offline/offline_commands.h"

namespace placement::offline {
namespace {

int Usage(const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  return 2;
}

// The algorithms named by --algorithms (validated), or the default list.
absl::StatusOr<std::vector<std::string>> AlgorithmsToRun() {
  std::vector<std::string> names;
  const std::string flag = absl::GetFlag(FLAGS_algorithms);
  if (flag.empty()) {
    for (const engine::Partitioner* algorithm : engine::AllAlgorithms()) {
      if (algorithm->name() != "auto") names.emplace_back(algorithm->name());
    }
    return names;
  }
  for (absl::string_view part : absl::StrSplit(flag, ',', absl::SkipWhitespace())) {
    const std::string name(absl::StripAsciiWhitespace(part));
    if (engine::FindAlgorithm(name) == nullptr) {
      std::string known;
      for (const engine::Partitioner* algorithm : engine::AllAlgorithms()) {
        known += (known.empty() ? "" : ", ") + std::string(algorithm->name());
      }
      return absl::InvalidArgumentError("--algorithms: unknown algorithm \"" + name + "\" (known: " +
                                        known + ")");
    }
    names.push_back(name);
  }
  if (names.empty()) return absl::InvalidArgumentError("--algorithms: no algorithm named");
  return names;
}

}  // namespace

int RunCompare(const std::vector<std::string>& args) {
  const std::string path = absl::GetFlag(FLAGS_request);
  if (path.empty()) return Usage("compare: --request=FILE is required");
  absl::StatusOr<engine::CompareFormat> format = engine::ParseCompareFormat(absl::GetFlag(FLAGS_format));
  if (!format.ok()) return Usage(std::string(format.status().message()));
  absl::StatusOr<std::vector<std::string>> algorithms = AlgorithmsToRun();
  if (!algorithms.ok()) return Usage(std::string(algorithms.status().message()));

  absl::StatusOr<v1::PlaceRequest> request = engine::ReadMessageFile<v1::PlaceRequest>(path);
  if (!request.ok()) return Fail(request.status());
  absl::StatusOr<engine::Model> model = engine::BuildModel(*request);
  if (!model.ok()) return Fail(model.status());

  v1::PlacementOptions options = request->options();
  if (absl::GetFlag(FLAGS_seed) != 0) options.set_seed(absl::GetFlag(FLAGS_seed));
  absl::Duration limit = kDefaultTimeLimit;
  if (absl::GetFlag(FLAGS_time_limit_s) > 0) {
    limit = absl::Seconds(absl::GetFlag(FLAGS_time_limit_s));
  } else if (options.has_time_limit()) {
    limit = absl::Seconds(options.time_limit().seconds()) + absl::Nanoseconds(options.time_limit().nanos());
  }

  engine::CompareReport report;
  report.request = path;
  report.num_ops = model->num_ops();
  report.num_edges = model->num_edges();
  report.device_names = model->device_name;
  report.lower_bound_ns = engine::LowerBoundNs(*model);
  for (const std::string& name : *algorithms) {
    options.set_algorithm(name);
    engine::SolveContext context;
    context.deadline = absl::Now() + limit;
    context.seed = options.seed();
    absl::StatusOr<v1::Placement> placement = engine::Solve(*model, options, context);
    if (placement.ok()) {
      report.rows.push_back(engine::CompareRowFromPlacement(name, *placement));
    } else {
      report.rows.push_back(engine::CompareRowFromError(
          name, absl::StatusCodeToString(placement.status().code()) + ": " +
                    std::string(placement.status().message())));
    }
  }

  const std::string table = engine::FormatCompareReport(report, *format);
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) {
    std::cout << table;
    std::cout.flush();
    return 0;
  }
  absl::Status written = engine::WriteFileBytes(out, table);
  return written.ok() ? 0 : Fail(written);
}

}  // namespace placement::offline
