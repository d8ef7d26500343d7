#include "service/engine/solve/score_assignment.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "service/engine/sim/constraints.h"
#include "service/engine/sim/placement_score.h"
#include "service/engine/sim/simulator.h"

namespace placement::engine {
namespace {

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

double MicrobatchesPerSecond(int32_t data_parallel, int32_t microbatches, int64_t makespan_ns) {
  if (makespan_ns <= 0) return 0.0;
  return static_cast<double>(std::max(1, data_parallel)) * std::max(1, microbatches) * 1e9 /
         static_cast<double>(makespan_ns);
}

v1::Placement ScoreAssignment(const Model& model, const Assignment& assignment,
                              std::vector<v1::ConstraintViolation>* problems, int32_t max_in_flight) {
  v1::Placement placement;
  auto* device = placement.mutable_device();
  device->Resize(model.num_ops(), 0);
  for (OpId v = 0; v < model.num_ops(); ++v) device->Set(model.request_index[v], assignment[v]);

  Simulator simulator(model);
  SimOptions options;
  options.max_in_flight = max_in_flight;
  const SimResult& sim = simulator.Run(assignment, options);
  const int32_t replicas = std::max(1, model.plan.data_parallel);
  v1::TrainingPlan* plan = placement.mutable_plan();
  plan->set_microbatches(sim.microbatches);
  plan->set_max_in_flight(sim.max_in_flight);
  plan->set_data_parallel(replicas);

  v1::PlacementMetrics* metrics = placement.mutable_metrics();
  metrics->set_makespan_ns(sim.makespan_ns);
  metrics->set_lower_bound_ns(LowerBoundNs(model));
  metrics->set_transfer_bytes(sim.transfer_bytes);
  metrics->set_transfer_count(sim.transfer_count);
  if (model.has_previous_placement()) {
    int64_t ops_moved = 0;
    for (OpId v = 0; v < model.num_ops(); ++v) ops_moved += model.Moves(v, assignment[v]) ? 1 : 0;
    metrics->set_ops_moved(ops_moved);
    metrics->set_bytes_moved(BytesMoved(model, assignment));  // every replica group's copy
  }
  metrics->set_microbatches_per_second(
      MicrobatchesPerSecond(replicas, sim.microbatches, sim.makespan_ns));
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
  if (!sim.MemoryFits(model)) {
    // Where no assignment at all could fit, say so first: more memory (or devices) is the only fix.
    reasons.push_back(MemoryCannotFit(model)
                          ? absl::StrCat(kNoPlacementFitsReason, ": ", OverflowReason(model, sim))
                          : OverflowReason(model, sim));
  }
  placement.set_outcome(reasons.empty() ? v1::FEASIBLE : v1::INFEASIBLE);
  placement.set_reason(absl::StrJoin(reasons, "; "));
  return placement;
}

}  // namespace placement::engine
