#include "service/engine/plans/plan_model.h"

#include <algorithm>

#include "service/engine/model/replica_group.h"

namespace placement::engine {

int32_t WorkingWindow(const Model& group_model) {
  const Model& m = group_model;
  const int32_t most = std::clamp(m.num_devices(), 1, std::max(1, m.plan.microbatches));
  // What W microbatches in flight hold across the group, at most: the persistent bytes and the
  // accumulation buffers once, and per microbatch every per-microbatch output and scratch buffer.
  long double base = 0, per_microbatch = 0, capacity = 0;
  for (OpId v = 0; v < m.num_ops(); ++v) {
    base += m.persistent_bytes[v];
    if (m.is_once(v)) continue;
    per_microbatch += static_cast<long double>(m.output_bytes[v]) + m.temp_bytes[v];
    for (EdgeId e = m.out_begin(v); e < m.out_end(v); ++e) {
      if (m.is_once(m.out_dst[e])) {
        base += m.output_bytes[v];  // a gradient producer's accumulation buffer
        break;
      }
    }
  }
  for (DeviceId d = 0; d < m.num_devices(); ++d) capacity += m.capacity_bytes[d];
  if (per_microbatch <= 0) return most;
  const long double room = kWorkingWindowFill * capacity - base;
  if (room <= per_microbatch) return 1;
  return static_cast<int32_t>(std::clamp<long double>(std::floor(room / per_microbatch), 1, most));
}

PlanModel::PlanModel(const Model& full, int32_t replicas) : replicas_(replicas) {
  window_fixed_ = full.plan.max_in_flight > 0 || full.plan.microbatches <= 1;
  if (replicas == 1 && window_fixed_ && full.plan.data_parallel <= 1) {
    borrowed_ = &full;
    return;
  }
  owned_ = ReplicaGroupModel(full, replicas);
  if (!window_fixed_) {
    owned_->plan.max_in_flight = WorkingWindow(*owned_);
    owned_->solver_chooses_window = true;
  }
}

}  // namespace placement::engine
