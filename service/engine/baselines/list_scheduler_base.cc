#include "service/engine/baselines/list_scheduler_base.h"

#include <algorithm>

namespace placement::engine::baselines {

ListSchedulerBase::ListSchedulerBase(const Model& model, const SolveContext& context)
    : model_(model),
      context_(context),
      units_(BuildPlacementUnits(model)),
      num_ops_(model.num_ops()),
      num_devices_(model.num_devices()),
      device_(model.num_ops(), kNone),
      finish_(model.num_ops(), 0),
      unit_device_(units_.num_units(), kNone),
      used_(model.num_devices(), 0),
      copies_(model.num_ops()) {}

int64_t ListSchedulerBase::ArrivalOn(OpId v, DeviceId d) const {
  int64_t arrival = 0;
  for (EdgeId e = model_.in_begin(v); e < model_.in_end(v); ++e) {
    const OpId p = model_.in_src[e];
    arrival = std::max(arrival, finish_[p] + model_.TransferNs(device_[p], d, model_.in_bytes[e]));
  }
  return arrival;
}

bool ListSchedulerBase::BindUnit(OpId v, DeviceId d) {
  const int32_t u = units_.unit_of_op[v];
  if (unit_device_[u] != kNone) return false;
  unit_device_[u] = d;
  used_[d] = SaturatingAdd(used_[d], units_.persistent_bytes[u]);
  return true;
}

PartitionResult ListSchedulerBase::ResultOfScheduled(int32_t scheduled) const {
  PartitionResult result;
  result.assignment = device_;
  if (scheduled < num_ops_) {
    result.time_limited = true;
    CompleteAssignment(model_, units_, result.assignment);
  }
  return result;
}

}  // namespace placement::engine::baselines
