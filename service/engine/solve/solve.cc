#include "service/engine/solve/solve.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "service/engine/model/digest.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/sim/constraints.h"
#include "service/engine/sim/placement_score.h"

namespace placement::engine {

std::string RequestDigestFor(const Model& model, const Partitioner& algorithm,
                             const v1::PlacementOptions& options,
                             std::string_view graph_digest_hex) {
  return RequestDigestHex(model, algorithm.name(), algorithm.version(), options.seed(),
                          graph_digest_hex);
}

absl::StatusOr<v1::Placement> Solve(const Model& model, const v1::PlacementOptions& options,
                                    const SolveContext& context,
                                    const AlgorithmRegistry& registry) {
  absl::StatusOr<const Partitioner*> found = registry.Find(options.algorithm());
  if (!found.ok()) return found.status();
  return Solve(model, **found, options, context);
}

absl::StatusOr<v1::Placement> Solve(const Model& model, const Partitioner& partitioner,
                                    const v1::PlacementOptions& options,
                                    const SolveContext& context) {
  SolveContext local = context;
  local.seed = options.seed();
  // The context's clock, like the deadline: a test's fake clock sees the same time as the algorithm.
  const absl::Time start = context.Now();
  absl::StatusOr<PartitionResult> result = partitioner.Partition(model, local);
  if (!result.ok()) return result.status();
  const absl::Duration solve_time = context.Now() - start;

  // A partitioner handing back a malformed assignment is a bug, not bad input.
  const absl::Status complete = CheckAssignmentComplete(model, result->assignment, partitioner.name());
  if (!complete.ok()) return complete;

  v1::Placement placement = ScoreAssignment(model, result->assignment);
  v1::Provenance* provenance = placement.mutable_provenance();
  provenance->set_algorithm(std::string(partitioner.name()));
  provenance->set_winner(result->winner);
  provenance->set_winner_makespan_ns(result->winner.empty() ? 0 : result->winner_makespan_ns);
  provenance->set_requested_algorithm(std::string(partitioner.name()));
  provenance->set_algorithm_version(std::string(partitioner.version()));
  const std::string graph_digest = GraphDigestHex(model);
  provenance->set_graph_digest(graph_digest);
  provenance->set_request_digest(RequestDigestFor(model, partitioner, options, graph_digest));
  provenance->set_cache(v1::MISS);
  provenance->set_solve_ns(absl::ToInt64Nanoseconds(solve_time));
  provenance->set_ccr(result->ccr);
  provenance->set_dop(result->dop);
  provenance->set_time_limited(result->time_limited);
  return placement;
}

absl::StatusOr<v1::EvaluateResponse> Evaluate(const v1::EvaluateRequest& request,
                                              const ModelLimits& limits) {
  std::vector<FieldViolation> violations;
  absl::StatusOr<Model> model = BuildModel(request.graph(), request.cluster(),
                                           request.options().memory_headroom(), &violations,
                                           limits);
  const int32_t num_ops = request.graph().ops_size();
  const int32_t num_devices = request.cluster().devices_size();
  if (request.device_size() != num_ops) {
    violations.push_back({"device", absl::StrCat("has ", request.device_size(),
                                                 " entries but graph has ", num_ops, " ops")});
  } else {
    for (int32_t i = 0; i < num_ops && violations.size() < 100; ++i) {
      const int32_t d = request.device(i);
      if (d < 0 || d >= num_devices) {
        violations.push_back({absl::StrCat("device[", i, "]"),
                              absl::StrCat("index ", d, " out of range (cluster has ",
                                           num_devices, " devices)")});
      }
    }
  }
  if (!violations.empty()) return ViolationsError(violations);
  if (!model.ok()) return model.status();

  Assignment assignment(model->num_ops());
  for (OpId v = 0; v < model->num_ops(); ++v) {
    assignment[v] = request.device(model->request_index[v]);
  }
  v1::EvaluateResponse response;
  std::vector<v1::ConstraintViolation> problems;
  *response.mutable_placement() = ScoreAssignment(*model, assignment, &problems);
  for (v1::ConstraintViolation& problem : problems) {
    *response.add_violations() = std::move(problem);
  }
  v1::Provenance* provenance = response.mutable_placement()->mutable_provenance();
  provenance->set_algorithm("evaluate");
  provenance->set_graph_digest(GraphDigestHex(*model));
  return response;
}

}  // namespace placement::engine
