#include "service/engine/sim/placement_score.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace placement::engine {

int64_t BytesAboveCapacity(const std::vector<int64_t>& peak_bytes,
                           const std::vector<int64_t>& capacity_bytes) {
  int64_t above = 0;
  for (size_t d = 0; d < peak_bytes.size() && d < capacity_bytes.size(); ++d) {
    const int64_t excess = peak_bytes[d] - capacity_bytes[d];
    if (excess <= 0) continue;
    // Saturating: absurd capacities and peaks near the int64 range must not wrap into "fits".
    above = above > INT64_MAX - excess ? INT64_MAX : above + excess;
  }
  return above;
}

PlacementScore ScoreSimulation(const Model& model, const SimResult& simulated) {
  PlacementScore score;
  score.makespan_ns = simulated.makespan_ns;
  score.overflow_bytes = BytesAboveCapacity(simulated.peak_memory_bytes, model.capacity_bytes);
  return score;
}

SimOptions ScoringSimOptions(const Model& model) {
  SimOptions options;
  options.compute_memory = MemoryCanBind(model);
  return options;
}

SimOptions StopUnlessBetter(const SimOptions& options, const PlacementScore& best, int64_t added_ns) {
  SimOptions stopping = options;
  if (best.Fits()) stopping.stop_at_ns = std::max<int64_t>(1, best.makespan_ns - added_ns);
  return stopping;
}

bool MemoryCannotFit(const Model& model) {
  if (model.num_devices() == 0 || model.num_ops() == 0) return false;
  // In long double: sums of int64 byte counts may exceed the int64 range.
  long double capacity = 0, largest = 0;
  for (DeviceId d = 0; d < model.num_devices(); ++d) {
    capacity += model.capacity_bytes[d];
    largest = std::max<long double>(largest, model.capacity_bytes[d]);
  }
  long double persistent = 0;
  for (OpId v = 0; v < model.num_ops(); ++v) {
    persistent += model.persistent_bytes[v];
    const long double own = static_cast<long double>(model.persistent_bytes[v]) + model.temp_bytes[v] +
                            model.output_bytes[v];
    // An op that takes no time holds nothing (its intervals are empty), so it never overflows.
    if (own > largest && model.compute_ns[v] > 0) return true;
  }
  return persistent > capacity;
}

int64_t PersistentBytesAboveCapacity(const Model& model, const Assignment& assignment) {
  // In long double: sums of int64 byte counts may exceed the int64 range.
  std::vector<long double> held(static_cast<size_t>(model.num_devices()), 0.0L);
  for (OpId v = 0; v < model.num_ops(); ++v) held[assignment[v]] += model.persistent_bytes[v];
  long double above = 0;
  for (DeviceId d = 0; d < model.num_devices(); ++d) {
    above += std::max<long double>(0, held[d] - model.capacity_bytes[d]);
  }
  return above >= static_cast<long double>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(above);
}

bool MemoryCanBind(const Model& model) {
  if (model.num_devices() == 0) return false;
  // In double: sums of int64 byte counts may exceed the int64 range; only the comparison matters.
  double persistent = 0.0, per_copy = 0.0;
  for (OpId v = 0; v < model.num_ops(); ++v) {
    persistent += static_cast<double>(model.persistent_bytes[v]);
    // Its output twice: the output itself and, under a plan, an accumulation buffer of its size.
    per_copy += static_cast<double>(model.temp_bytes[v]) + 2.0 * static_cast<double>(model.output_bytes[v]);
  }
  for (EdgeId e = 0; e < model.num_edges(); ++e) per_copy += static_cast<double>(model.out_bytes[e]);
  const double total = persistent + per_copy * std::max(1, model.plan.microbatches);
  int64_t smallest = model.capacity_bytes[0];
  for (DeviceId d = 1; d < model.num_devices(); ++d) smallest = std::min(smallest, model.capacity_bytes[d]);
  return total > static_cast<double>(smallest);
}

absl::Status CheckAssignmentComplete(const Model& model, const Assignment& assignment,
                                     std::string_view algorithm) {
  if (static_cast<int32_t>(assignment.size()) != model.num_ops()) {
    return absl::InternalError(absl::StrCat("algorithm \"", std::string(algorithm), "\" returned ",
                                            assignment.size(), " devices for ", model.num_ops(), " ops"));
  }
  for (OpId v = 0; v < model.num_ops(); ++v) {
    const DeviceId d = assignment[v];
    if (d < 0 || d >= model.num_devices()) {
      return absl::InternalError(absl::StrCat("algorithm \"", std::string(algorithm), "\" returned device ",
                                              d, " for op \"", model.op_name[v], "\" (the cluster has ",
                                              model.num_devices(), " devices)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace placement::engine
