// `placement_offline compare --request=FILE [--algorithms=a,b,...] [--format=text|json|csv|markdown]`:
// runs several algorithms on one request, each scored by the same simulator (through Solve), and prints
// one table row per algorithm (compare_table.h). Default algorithms: every
// registered one except `auto` (which would only repeat the others). Each algorithm gets the full time
// limit (--time_limit_s, else the request's options.time_limit, else 60 s). A failing algorithm becomes an
// "error" row; the exit status is 0 as long as the table could be produced.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "service/engine/io/message_io.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/sim/simulator.h"
#include "service/engine/solve/algorithm_registry.h"
#include "service/engine/solve/solve.h"
#include "service/report/compare_table.h"
#include "service/offline/offline_commands.h"

namespace placement::offline {
namespace {

using report::CompareFormat;
using report::CompareReport;
using report::CompareRowFromError;
using report::CompareRowFromPlacement;
using report::FormatCompareReport;
using report::ParseCompareFormat;

// The algorithms named by --algorithms (validated), or the default list.
absl::StatusOr<std::vector<std::string>> AlgorithmsToRun() {
  const std::string flag = absl::GetFlag(FLAGS_algorithms);
  if (flag.empty()) {
    std::vector<std::string> names;
    for (const engine::Partitioner* algorithm : engine::AlgorithmRegistry::Default().All()) {
      if (algorithm->name() != "auto") names.emplace_back(algorithm->name());
    }
    return names;
  }
  absl::StatusOr<std::vector<std::string>> names = ParseAlgorithmNames("--algorithms", flag);
  if (names.ok() && names->empty()) return absl::InvalidArgumentError("--algorithms: no algorithm named");
  return names;
}

}  // namespace

int RunCompare(const std::vector<std::string>& args) {
  const std::string path = absl::GetFlag(FLAGS_request);
  if (path.empty()) return UsageError("compare: --request=FILE is required");
  absl::StatusOr<CompareFormat> format = ParseCompareFormat(absl::GetFlag(FLAGS_format));
  if (!format.ok()) return UsageError(std::string(format.status().message()));
  absl::StatusOr<std::vector<std::string>> algorithms = AlgorithmsToRun();
  if (!algorithms.ok()) return UsageError(std::string(algorithms.status().message()));

  absl::StatusOr<v1::PlaceRequest> request = engine::ReadMessageFile<v1::PlaceRequest>(path);
  if (!request.ok()) return Fail(request.status());
  ApplyPlanFlags(request->mutable_options());
  absl::StatusOr<engine::Model> model = engine::BuildModel(*request);
  if (!model.ok()) return Fail(model.status());

  v1::PlacementOptions options = request->options();
  if (absl::GetFlag(FLAGS_seed) != 0) options.set_seed(absl::GetFlag(FLAGS_seed));
  const absl::Duration limit = SolveTimeLimit(options);

  CompareReport report;
  report.request = path;
  report.num_ops = model->num_ops();
  report.num_edges = model->num_edges();
  report.device_names = model->device_name;
  report.lower_bound_ns = engine::LowerBoundNs(*model);
  for (const std::string& name : *algorithms) {
    options.set_algorithm(name);
    absl::StatusOr<v1::Placement> placement = SolveWithin(*model, options, limit);
    if (placement.ok()) {
      report.rows.push_back(CompareRowFromPlacement(name, *placement));
    } else {
      report.rows.push_back(CompareRowFromError(
          name, absl::StatusCodeToString(placement.status().code()) + ": " +
                    std::string(placement.status().message())));
    }
  }

  const std::string table = FormatCompareReport(report, *format);
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
