// constraints.cc — pins, allowed kinds, colocation groups and the device range (see constraints.h).
#include "service/engine/sim/constraints.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace placement::engine {
namespace {

// "{gpu, tpu}": the kinds of `mask` (bit k = kind id k) in kind id order.
std::string KindList(const Model& model, uint64_t mask) {
  std::string out = "{";
  bool first = true;
  for (int32_t k = 0; k < 64 && k < static_cast<int32_t>(model.kind_name.size()); ++k) {
    if (((mask >> k) & 1) == 0) continue;
    absl::StrAppend(&out, first ? "" : ", ", model.kind_name[k]);
    first = false;
  }
  out += "}";
  return out;
}

}  // namespace

std::vector<ConstraintProblem> CheckConstraints(const Model& model, const Assignment& assignment) {
  std::vector<ConstraintProblem> problems;
  const int32_t num_ops = model.num_ops();
  const int32_t num_devices = model.num_devices();
  if (static_cast<int64_t>(assignment.size()) != num_ops) {
    problems.push_back(ConstraintProblem{
        kNone, absl::StrCat("the assignment has ", assignment.size(), " entries but the graph has ",
                            num_ops, " ops")});
    return problems;
  }
  auto in_range = [&](OpId v) { return assignment[v] >= 0 && assignment[v] < num_devices; };
  // Problems come op by op (ascending canonical id = name order), so the list is stable for a given
  // model and assignment whatever the request's op order.
  for (OpId v = 0; v < num_ops; ++v) {
    const std::string& name = model.op_name[v];
    if (!in_range(v)) {
      problems.push_back(ConstraintProblem{
          v, absl::StrCat("op \"", name, "\" is placed on device ", assignment[v],
                          " but the cluster has ", num_devices, " devices")});
      continue;
    }
    const DeviceId d = assignment[v];
    const std::string& device = model.device_name[d];
    const DeviceId pin = model.pinned_device[v];
    if (pin != kNone && pin != d) {
      problems.push_back(ConstraintProblem{
          v, absl::StrCat("op \"", name, "\" is pinned to \"", model.device_name[pin],
                          "\" but placed on \"", device, "\"")});
    }
    const uint64_t mask = model.allowed_kind_mask[v];
    if (mask != 0 && ((mask >> model.device_kind[d]) & 1) == 0) {
      problems.push_back(ConstraintProblem{
          v, absl::StrCat("op \"", name, "\" may run on kinds ", KindList(model, mask),
                          " but is placed on \"", device, "\" of kind \"",
                          model.kind_name[model.device_kind[d]], "\"")});
    }
    const int32_t group = model.colocation_group[v];
    if (group == kNone) continue;
    const OpId leader = model.group_member[model.group_offset[group]];
    if (leader == v || !in_range(leader) || assignment[leader] == d) continue;
    problems.push_back(ConstraintProblem{
        v, absl::StrCat("op \"", name, "\" is in colocation group \"", model.group_name[group],
                        "\" with op \"", model.op_name[leader], "\" on \"",
                        model.device_name[assignment[leader]], "\" but is placed on \"", device,
                        "\"")});
  }
  return problems;
}

}  // namespace placement::engine
