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
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "placement/v1/placement.pb.h"
#include "placement/v1/placement_service.pb.h"
#include "service/engine/model/model.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/partition/partitioner.h"
#include "service/engine/sim/simulator.h"
#include "service/engine/solve/algorithm_registry.h"
#include "service/engine/solve/score_assignment.h"  // ScoreAssignment, for Solve's callers

namespace placement::engine {

// Runs `algorithm` with options.seed() under `context` and scores the result. The algorithm's own
// errors are passed through. Fills provenance.algorithm (the winner for "auto"), requested_algorithm,
// algorithm_version, graph_digest, request_digest (RequestDigestFor), solve_ns, ccr, dop,
// time_limited.
absl::StatusOr<v1::Placement> Solve(const Model& model, const Partitioner& algorithm,
                                    const v1::PlacementOptions& options,
                                    const SolveContext& context);
// The same for options.algorithm() ("" = auto) found in `registry`: INVALID_ARGUMENT for an unknown
// algorithm.
absl::StatusOr<v1::Placement> Solve(const Model& model, const v1::PlacementOptions& options,
                                    const SolveContext& context,
                                    const AlgorithmRegistry& registry = AlgorithmRegistry::Default());

// Evaluate RPC / `placement_offline evaluate`: validates the request (graph, cluster, one device index per
// op in range, within `limits`) and scores the assignment. INVALID_ARGUMENT with every violation as
// data (ViolationsError) for malformed input.
absl::StatusOr<v1::EvaluateResponse> Evaluate(const v1::EvaluateRequest& request,
                                              const ModelLimits& limits = ModelLimits());

// The request digest, the cache key of `algorithm`'s answer for (model, options): the one route every
// key takes (the service's cache and single-flight, Solve's provenance), over model/digest.h's
// RequestDigestHex with whatever of `options` changes the answer. `graph_digest_hex` =
// GraphDigestHex(model) when the caller has it already (empty: computed here).
std::string RequestDigestFor(const Model& model, const Partitioner& algorithm,
                             const v1::PlacementOptions& options,
                             std::string_view graph_digest_hex = {});

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_SOLVE_SOLVE_H_
