#include "service/engine/plans/plan_model.h"

#include <algorithm>

#include "service/engine/model/replica_group.h"

namespace placement::engine {

int32_t WorkingWindow(const Model& group_model) {
  return std::clamp(group_model.num_devices(), 1, std::max(1, group_model.plan.microbatches));
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
