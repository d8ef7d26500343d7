// place_request_fuzzer — libFuzzer target: bytes → PlaceRequest (binary protobuf, as the server receives
// it) → BuildModel → digests → simulation of a simple assignment, and the same graph through Evaluate.
//
// What must hold for any input: no crash, no sanitizer report; BuildModel either fails with
// INVALID_ARGUMENT listing at least one violation, or yields a model whose digests are stable (computed
// twice, equal) and whose simulated makespan is non-negative and at least the lower bound.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "placement/v1/placement.pb.h"
#include "placement/v1/placement_service.pb.h"
#include "service/engine/model/digest.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/plans/plan_model.h"
#include "service/engine/solve/solve.h"

namespace {

// Stops the fuzzer with a readable message (abort → libFuzzer saves the input).
void Check(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "place_request_fuzzer: violated: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace placement;
  v1::PlaceRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;

  // Smaller limits than the server's keep each run fast; the checks are the same code.
  engine::ModelLimits limits;
  limits.max_ops = 20'000;
  limits.max_edges = 80'000;
  limits.max_unrolled_ops = 200'000;
  std::vector<engine::FieldViolation> violations;
  absl::StatusOr<engine::Model> model = engine::BuildModel(request.graph(), request.cluster(),
                                                           request.options(), &violations, limits);
  if (!model.ok()) {
    Check(model.status().code() == absl::StatusCode::kInvalidArgument, "BuildModel: not INVALID_ARGUMENT");
    Check(!violations.empty(), "BuildModel failed without a violation");
    return 0;
  }
  Check(violations.empty(), "BuildModel succeeded with violations");

  const std::string graph_digest = engine::GraphDigestHex(*model);
  Check(graph_digest == engine::GraphDigestHex(*model), "graph digest not stable");
  Check(graph_digest.size() == 64, "graph digest is not 64 hex digits");
  const engine::DigestOptions digest_options{"round_robin", "1", request.options().seed()};
  Check(engine::RequestDigestHex(*model, digest_options) ==
            engine::RequestDigestHex(*model, graph_digest, digest_options),
        "request digest differs with a reused graph digest");

  // Simulate op v on device v mod N of replica group 0 (constraints may make it INFEASIBLE; that is
  // data, not an error), with the request's training plan (an open D as 1).
  const int32_t replicas = std::max(1, model->plan.data_parallel);
  const engine::PlanModel plan_model(*model, replicas);
  const engine::Model& group = plan_model.model();
  engine::Assignment assignment(group.num_ops());
  for (engine::OpId v = 0; v < group.num_ops(); ++v) assignment[v] = v % group.num_devices();
  const v1::Placement placement = engine::ScoreAssignment(group, assignment);
  Check(placement.device_size() == model->num_ops(), "placement has the wrong number of ops");
  Check(placement.metrics().makespan_ns() >= 0, "negative makespan");
  Check(placement.metrics().makespan_ns() >= placement.metrics().lower_bound_ns(),
        "makespan below the lower bound");

  // The Evaluate path validates the same graph plus a caller-given assignment.
  v1::EvaluateRequest evaluate;
  *evaluate.mutable_graph() = request.graph();
  *evaluate.mutable_cluster() = request.cluster();
  *evaluate.mutable_options() = request.options();
  *evaluate.mutable_device() = placement.device();
  // Evaluate chooses an open W or D for the assignment: compare only what was fixed.
  if (model->plan.data_parallel == 0) evaluate.mutable_options()->set_data_parallel(replicas);
  evaluate.mutable_options()->set_max_in_flight(placement.plan().max_in_flight());
  absl::StatusOr<v1::EvaluateResponse> scored = engine::Evaluate(evaluate, limits);
  if (scored.ok()) {
    Check(scored->placement().metrics().makespan_ns() == placement.metrics().makespan_ns(),
          "Evaluate disagrees with ScoreAssignment");
  }
  return 0;
}
