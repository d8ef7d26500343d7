// `placement_offline place` and `placement_offline evaluate`.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "placement/v1/placement_service.pb.h"
#include "service/engine/io/message_io.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/solve/solve.h"
#include "service/offline/offline_commands.h"
#include "service/report/text_summary.h"

namespace placement::offline {
namespace {

using engine::MessageToJson;
using engine::ReadMessageFile;

// Writes `message` as JSON to --out (or stdout).
int Emit(const google::protobuf::Message& message) {
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) {
    std::cout << MessageToJson(message) << "\n";
    return 0;
  }
  absl::Status written = engine::WriteMessageFile(message, out);
  return written.ok() ? 0 : Fail(written);
}

// --out names a file (not "-", standard output).
bool WritesAFile() {
  const std::string out = absl::GetFlag(FLAGS_out);
  return !out.empty() && out != "-";
}

// The answer of place or evaluate (`message` is the Placement or the EvaluateResponse holding
// `placement`): JSON to --out or stdout exactly as always, or the summary on stdout when --format asks
// for it or stdout is a terminal (with --out the file still gets the JSON).
int EmitAnswer(const google::protobuf::Message& message, const v1::Placement& placement,
               const v1::PlaceRequest& request,
               const google::protobuf::RepeatedPtrField<v1::ConstraintViolation>* violations) {
  absl::StatusOr<report::OutputFormat> format =
      report::ResolveOutputFormat(absl::GetFlag(FLAGS_format), report::StdoutIsTerminal());
  if (!format.ok()) return UsageError(std::string(format.status().message()));
  if (*format == report::OutputFormat::kJson || WritesAFile()) {
    const int emitted = Emit(message);
    if (emitted != 0 || *format == report::OutputFormat::kJson) return emitted;
  }
  report::SummaryContext context;
  context.graph = &request.graph();
  context.cluster = &request.cluster();
  context.options = &request.options();
  context.violations = violations;
  std::cout << report::FormatSummary(placement, context);
  return std::cout.good() ? 0 : 1;
}

// A bad --format is a usage error before any work is done.
bool FormatFlagIsValid() {
  absl::StatusOr<report::OutputFormat> format =
      report::ResolveOutputFormat(absl::GetFlag(FLAGS_format), false);
  if (format.ok()) return true;
  UsageError(std::string(format.status().message()));
  return false;
}

}  // namespace

int RunPlace(const std::vector<std::string>& args) {
  const std::string path = absl::GetFlag(FLAGS_request);
  if (path.empty()) return UsageError("place: --request=FILE is required");
  if (!FormatFlagIsValid()) return 2;
  absl::StatusOr<v1::PlaceRequest> request = ReadMessageFile<v1::PlaceRequest>(path);
  if (!request.ok()) return Fail(request.status());
  ApplyPlanFlags(request->mutable_options());
  if (absl::Status applied = ApplyReplacementFlags(&*request); !applied.ok()) {
    return Fail(applied);
  }
  v1::PlacementOptions options = request->options();
  if (!absl::GetFlag(FLAGS_algorithm).empty()) options.set_algorithm(absl::GetFlag(FLAGS_algorithm));
  if (absl::GetFlag(FLAGS_seed) != 0) options.set_seed(absl::GetFlag(FLAGS_seed));

  absl::StatusOr<engine::Model> model = engine::BuildModel(*request);
  if (!model.ok()) return Fail(model.status());

  absl::StatusOr<v1::Placement> placement = SolveWithin(*model, options, SolveTimeLimit(options));
  if (!placement.ok()) return Fail(placement.status());
  return EmitAnswer(*placement, *placement, *request, nullptr);
}

int RunEvaluate(const std::vector<std::string>& args) {
  const std::string request_path = absl::GetFlag(FLAGS_request);
  const std::string placement_path = absl::GetFlag(FLAGS_placement);
  if (request_path.empty() || placement_path.empty()) {
    return UsageError("evaluate: --request=FILE and --placement=FILE are required");
  }
  if (!FormatFlagIsValid()) return 2;
  absl::StatusOr<v1::PlaceRequest> request = ReadMessageFile<v1::PlaceRequest>(request_path);
  if (!request.ok()) return Fail(request.status());
  ApplyPlanFlags(request->mutable_options());
  if (absl::Status applied = ApplyReplacementFlags(&*request); !applied.ok()) {
    return Fail(applied);
  }
  absl::StatusOr<v1::Placement> placement = ReadPlacementFile(placement_path);
  if (!placement.ok()) return Fail(placement.status());

  v1::EvaluateRequest evaluate;
  // Copies, not moves: the summary needs the graph and cluster afterwards.
  *evaluate.mutable_graph() = request->graph();
  *evaluate.mutable_cluster() = request->cluster();
  *evaluate.mutable_options() = request->options();
  *evaluate.mutable_device() = placement->device();
  absl::StatusOr<v1::EvaluateResponse> response = engine::Evaluate(evaluate);
  if (!response.ok()) return Fail(response.status());
  return EmitAnswer(*response, response->placement(), *request, &response->violations());
}

}  // namespace placement::offline
