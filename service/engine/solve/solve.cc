#include "service/engine/solve/solve.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "service/engine/model/digest.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/sim/constraints.h"
#include "service/engine/sim/placement_score.h"
#include "service/engine/solve/algorithm_registry.h"

namespace placement::engine {
namespace {

absl::StatusOr<const Partitioner*> LookUp(std::string_view name) {
  const Partitioner* partitioner = FindAlgorithm(name);
  if (partitioner == nullptr) {
    std::vector<std::string> known;
    for (const Partitioner* p : AllAlgorithms()) known.emplace_back(p->name());
    return absl::InvalidArgumentError(absl::StrCat("options.algorithm: unknown algorithm \"",
                                                   std::string(name),
                                                   "\" (known: ", absl::StrJoin(known, ", "), ")"));
  }
  return partitioner;
}

std::string OverflowReason(const Model& model, const SimResult& sim) {
  std::vector<std::string> parts;
  for (DeviceId d = 0; d < model.num_devices(); ++d) {
    const int64_t peak = sim.peak_memory_bytes[d];
    const int64_t capacity = model.capacity_bytes[d];
    if (peak <= capacity) continue;
    parts.push_back(absl::StrCat("device \"", model.device_name[d], "\" needs ", peak,
                                 " bytes at t=", sim.peak_time_ns[d], " ns but may use ", capacity,
                                 " (", peak - capacity, " bytes short)"));
  }
  return absl::StrJoin(parts, "; ");
}

}  // namespace

v1::Placement ScoreAssignment(const Model& model, const Assignment& assignment,
                              std::vector<v1::ConstraintViolation>* problems) {
  v1::Placement placement;
  auto* device = placement.mutable_device();
  device->Resize(model.num_ops(), 0);
  for (OpId v = 0; v < model.num_ops(); ++v) device->Set(model.request_index[v], assignment[v]);

  Simulator simulator(model);
  const SimResult& sim = simulator.Run(assignment);

  v1::PlacementMetrics* metrics = placement.mutable_metrics();
  metrics->set_makespan_ns(sim.makespan_ns);
  metrics->set_lower_bound_ns(LowerBoundNs(model));
  metrics->set_transfer_bytes(sim.transfer_bytes);
  metrics->set_transfer_count(sim.transfer_count);
  for (DeviceId d = 0; d < model.num_devices(); ++d) {
    v1::DeviceMetrics* m = metrics->add_devices();
    m->set_peak_memory_bytes(sim.peak_memory_bytes[d]);
    m->set_busy_ns(sim.busy_ns[d]);
    m->set_op_count(sim.op_count[d]);
    m->set_capacity_bytes(model.capacity_bytes[d]);
    m->set_peak_time_ns(sim.peak_time_ns[d]);
  }

  std::vector<std::string> reasons;
  const std::vector<ConstraintProblem> broken = CheckConstraints(model, assignment);
  for (const ConstraintProblem& problem : broken) {
    if (problems != nullptr) {
      v1::ConstraintViolation violation;
      violation.set_field(absl::StrCat("device[", model.request_index[problem.op], "]"));
      violation.set_description(problem.description);
      problems->push_back(std::move(violation));
    }
  }
  if (!broken.empty()) {
    reasons.push_back(absl::StrCat(broken.size(), " constraint violation(s), first: ",
                                   broken.front().description));
  }
  if (!sim.MemoryFits(model)) reasons.push_back(OverflowReason(model, sim));
  placement.set_outcome(reasons.empty() ? v1::FEASIBLE : v1::INFEASIBLE);
  placement.set_reason(absl::StrJoin(reasons, "; "));
  return placement;
}

absl::StatusOr<std::string> RequestDigestFor(const Model& model,
                                             const v1::PlacementOptions& options) {
  absl::StatusOr<const Partitioner*> partitioner = LookUp(options.algorithm());
  if (!partitioner.ok()) return partitioner.status();
  return RequestDigestHex(model, (*partitioner)->name(), (*partitioner)->version(), options.seed());
}

absl::StatusOr<v1::Placement> Solve(const Model& model, const v1::PlacementOptions& options,
                                    const SolveContext& context) {
  absl::StatusOr<const Partitioner*> found = LookUp(options.algorithm());
  if (!found.ok()) return found.status();
  const Partitioner& partitioner = **found;

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
  provenance->set_request_digest(RequestDigestHex(model, partitioner.name(), partitioner.version(),
                                                  options.seed(), graph_digest));
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
  if (!violations.empty()) return absl::InvalidArgumentError(FormatViolations(violations));
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
