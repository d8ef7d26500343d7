// solve.h — the engine's front door: run an algorithm on a model and score the answer with the simulator;
// score a caller's assignment (Evaluate). Results are v1::Placement messages with `device` in the
// request's op order; outcome, reason and metrics filled; provenance filled except cache/queue fields,
// which belong to the service.
//
// Example:
//   absl::StatusOr<Model> model = BuildModel(request);
//   SolveContext context;  // deadline, cancellation, progress
//   absl::StatusOr<v1::Placement> placement = Solve(*model, request.options(), context);
#ifndef PLACEMENT_SERVICE_ENGINE_SOLVE_SOLVE_H_
#define PLACEMENT_SERVICE_ENGINE_SOLVE_SOLVE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "placement/v1/placement.pb.h"
#include "placement/v1/placement_service.pb.h"
#include "service/engine/model/model.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/partition/partitioner.h"
#include "service/engine/sim/simulator.h"
#include "service/engine/solve/score_assignment.h"  // ScoreAssignment, for Solve's callers

namespace placement::engine {

// Runs options.algorithm() ("" = pardnn) with options.seed() under `context` and scores the result.
// INVALID_ARGUMENT for an unknown algorithm; the algorithm's own errors are passed through.
// Fills provenance.algorithm (the winner for "auto"), requested_algorithm, algorithm_version,
// graph_digest, request_digest, solve_ns, ccr, dop, time_limited.
absl::StatusOr<v1::Placement> Solve(const Model& model, const v1::PlacementOptions& options,
                                    const SolveContext& context);

// Evaluate RPC / `placement_offline evaluate`: validates the request (graph, cluster, one device index per
// op in range, within `limits`) and scores the assignment. INVALID_ARGUMENT with field paths for
// malformed input.
absl::StatusOr<v1::EvaluateResponse> Evaluate(const v1::EvaluateRequest& request,
                                              const ModelLimits& limits = ModelLimits());

// The digest of the request the result of Solve would be cached under (algorithm name canonicalised,
// algorithm version included). INVALID_ARGUMENT for an unknown algorithm.
absl::StatusOr<std::string> RequestDigestFor(const Model& model, const v1::PlacementOptions& options);

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_SOLVE_SOLVE_H_
