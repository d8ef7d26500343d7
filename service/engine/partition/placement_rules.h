// placement_rules.h — the hard constraints of a model (pins, allowed kinds, colocation groups) in a form
// algorithms can query in O(1): may op v (with its whole colocation group) go to device d?
//
// A *unit* is what must move together: a colocation group, or a single op outside any group.
//
// Example:
//   PlacementRules rules(model);
//   DeviceId d = rules.FirstAllowedFrom(v, preferred);  // preferred if allowed, else the next allowed one
#ifndef PLACEMENT_SERVICE_ENGINE_PARTITION_PLACEMENT_RULES_H_
#define PLACEMENT_SERVICE_ENGINE_PARTITION_PLACEMENT_RULES_H_

#include <cstdint>
#include <vector>

#include "service/engine/model/model.h"

namespace placement::engine {

class PlacementRules {
 public:
  explicit PlacementRules(const Model& model);

  // True when op v and every member of its colocation group may run on device d.
  bool Allowed(OpId v, DeviceId d) const {
    const int32_t g = model_.colocation_group[v];
    if (g == kNone) return model_.Allowed(v, d);
    return (group_pinned_[g] == kNone || group_pinned_[g] == d) &&
           (group_kind_mask_[g] == 0 || ((group_kind_mask_[g] >> model_.device_kind[d]) & 1) != 0);
  }
  // `start` if allowed, else the next allowed device in cyclic id order. kNone only when no device is
  // allowed (validation rules that out for valid models).
  DeviceId FirstAllowedFrom(OpId v, DeviceId start) const;

  // Every op whose group (or itself) is pinned is fixed to that device; kNone otherwise.
  DeviceId FixedDevice(OpId v) const {
    const int32_t g = model_.colocation_group[v];
    return g == kNone ? model_.pinned_device[v] : group_pinned_[g];
  }

  // Makes `assignment` satisfy every constraint with as few changes as possible: each colocation group
  // goes where its first member (by OpId) is, if allowed there, else to the first allowed device after
  // it; each other op not allowed where it is moves to the next allowed device.
  void Enforce(Assignment& assignment) const;

 private:
  const Model& model_;
  std::vector<DeviceId> group_pinned_;    // by group id
  std::vector<uint64_t> group_kind_mask_;  // AND of the members' non-zero masks; 0 = any
};

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_PARTITION_PLACEMENT_RULES_H_
