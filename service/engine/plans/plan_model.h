// plan_model.h — the model an algorithm places on and the simulator judges, for one replica count of a
// training plan (api.md §2.1).
//
// BuildModel gives the model of the whole cluster with the plan as requested (0 = "the solver chooses"
// for W and D). Placing needs a concrete D (the devices of replica group 0, ring links for the
// all-reduces) and, while W is still open, a working window for the algorithms' own simulations.
// `PlanModel` holds that model: the request's own model when nothing has to change (no copy), else a
// copy made by ReplicaGroupModel with the working window set.
//
// Example:
//   for (int32_t replicas : ReplicaCountsToTry(full)) {
//     const PlanModel plan_model(full, replicas);
//     partitioner.Partition(plan_model.model(), context);
//   }
#ifndef PLACEMENT_SERVICE_ENGINE_PLANS_PLAN_MODEL_H_
#define PLACEMENT_SERVICE_ENGINE_PLANS_PLAN_MODEL_H_

#include <cstdint>
#include <optional>

#include "service/engine/model/model.h"

namespace placement::engine {

// The window algorithms simulate with while the request leaves W to the solver: the number of devices
// of the group (at most M) — with as many microbatches in flight as there can be stages, a pipeline's
// bubble is what it is with no window at all, while memory stays that of 1F1B — unless memory binds:
// then the largest W whose worst case fits kWorkingWindowFill of the group's capacity (persistent bytes
// and accumulation buffers once, every per-microbatch output and scratch buffer W times), at least 1. An
// algorithm's memory stage then aims at a window that can fit; the final W is chosen afterwards for the
// finished assignment (ChooseWindow).
inline constexpr double kWorkingWindowFill = 0.9;
int32_t WorkingWindow(const Model& group_model);

class PlanModel {
 public:
  // `full`: a model as BuildModel returns it (all devices, plan as requested). `replicas`: D >= 1,
  // dividing the device count, with every op placeable in group 0 (ReplicaCountsToTry's answers).
  PlanModel(const Model& full, int32_t replicas);
  PlanModel(const PlanModel&) = delete;
  PlanModel& operator=(const PlanModel&) = delete;

  const Model& model() const { return owned_ ? *owned_ : *borrowed_; }
  int32_t replicas() const { return replicas_; }
  // True when the request fixed W (else model().plan.max_in_flight is the working window).
  bool window_fixed() const { return window_fixed_; }

 private:
  const Model* borrowed_ = nullptr;
  std::optional<Model> owned_;
  int32_t replicas_ = 1;
  bool window_fixed_ = true;
};

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_PLANS_PLAN_MODEL_H_
