#include "service/engine/sim/placement_score.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace placement::engine {

PlacementScore ScoreSimulation(const Model& model, const SimResult& simulated) {
  PlacementScore score;
  score.makespan_ns = simulated.makespan_ns;
  for (DeviceId d = 0; d < model.num_devices(); ++d) {
    const int64_t excess = simulated.peak_memory_bytes[d] - model.capacity_bytes[d];
    if (excess <= 0) continue;
    // Saturating: absurd capacities and peaks near the int64 range must not wrap into "fits".
    score.overflow_bytes =
        score.overflow_bytes > INT64_MAX - excess ? INT64_MAX : score.overflow_bytes + excess;
  }
  return score;
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
