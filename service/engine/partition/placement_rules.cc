#include "service/engine/partition/placement_rules.h"

namespace placement::engine {

PlacementRules::PlacementRules(const Model& model)
    : model_(model),
      group_pinned_(model.num_groups(), kNone),
      group_kind_mask_(model.num_groups(), 0) {
  for (int32_t g = 0; g < model.num_groups(); ++g) {
    uint64_t mask = 0;
    for (int32_t i = model.group_offset[g]; i < model.group_offset[g + 1]; ++i) {
      const OpId v = model.group_member[i];
      if (model.pinned_device[v] != kNone) group_pinned_[g] = model.pinned_device[v];
      const uint64_t op_mask = model.allowed_kind_mask[v];
      if (op_mask != 0) mask = mask == 0 ? op_mask : (mask & op_mask);
    }
    group_kind_mask_[g] = mask;
  }
}

DeviceId PlacementRules::FirstAllowedFrom(OpId v, DeviceId start) const {
  const int32_t n = model_.num_devices();
  for (int32_t i = 0; i < n; ++i) {
    const DeviceId d = (start + i) % n;
    if (Allowed(v, d)) return d;
  }
  return kNone;
}

void PlacementRules::Enforce(Assignment& assignment) const {
  for (int32_t g = 0; g < model_.num_groups(); ++g) {
    const OpId first = model_.group_member[model_.group_offset[g]];
    const DeviceId d = FirstAllowedFrom(first, assignment[first]);
    for (int32_t i = model_.group_offset[g]; i < model_.group_offset[g + 1]; ++i) {
      assignment[model_.group_member[i]] = d;
    }
  }
  for (OpId v = 0; v < model_.num_ops(); ++v) {
    if (model_.colocation_group[v] == kNone && !model_.Allowed(v, assignment[v])) {
      assignment[v] = FirstAllowedFrom(v, assignment[v]);
    }
  }
}

}  // namespace placement::engine
