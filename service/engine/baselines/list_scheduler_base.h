// list_scheduler_base.h — the state and steps the two list schedulers (HEFT, m-ETF) share.
//
// Both place one op at a time, in an order and onto a device each chooses its own way; both then need
// the same bookkeeping: where each placed op runs and when it finishes, the device each colocation unit
// is bound to (its first placed member's), the bytes in use on each device, the input copies a device
// received, and at the end the answer (completed cheaply when the deadline stopped them early). That
// bookkeeping lives here once, so the two differ only in what the papers make them differ in.
//
// Example:
//   class MyScheduler : private ListSchedulerBase {
//    public:
//     using ListSchedulerBase::ListSchedulerBase;
//     PartitionResult Run() {
//       ... for each op v, in my order, on my device d:
//       BindUnit(v, d);
//       ... device_[v] = d; finish_[v] = ...;
//       return ResultOfScheduled(placed);
//     }
//   };
#ifndef PLACEMENT_SERVICE_ENGINE_BASELINES_LIST_SCHEDULER_BASE_H_
#define PLACEMENT_SERVICE_ENGINE_BASELINES_LIST_SCHEDULER_BASE_H_

#include <cstdint>
#include <vector>

#include "service/engine/baselines/placement_units.h"
#include "service/engine/model/model.h"
#include "service/engine/partition/partitioner.h"

namespace placement::engine::baselines {

class ListSchedulerBase {
 public:
  // Nothing placed yet: every op and unit without a device, every device empty. (Public so that the
  // constructor a scheduler inherits with `using` can be called.)
  ListSchedulerBase(const Model& model, const SolveContext& context);

 protected:

  // Bytes that placing v on d adds to d right now (its unit's persistent bytes when the unit is not
  // bound yet, the inputs d does not hold yet, v's own temporary and output bytes).
  int64_t Need(OpId v, DeviceId d) const {
    return BytesAddedByPlacing(model_, units_, unit_device_, device_, copies_, v, d);
  }

  // When the last input of v (all of whose producers are placed) would be on d.
  int64_t ArrivalOn(OpId v, DeviceId d) const;

  // When v is the first member of its unit to be placed, binds the unit to d, adds the unit's persistent
  // bytes to d and returns true; otherwise (the unit is bound already, to d) returns false.
  bool BindUnit(OpId v, DeviceId d);

  // The answer after `scheduled` ops were placed: when that is fewer than all (the deadline or a
  // cancellation stopped the scheduler), the rest are completed cheaply and the result is time-limited.
  PartitionResult ResultOfScheduled(int32_t scheduled) const;

  const Model& model_;
  const SolveContext& context_;
  const PlacementUnits units_;
  const OpId num_ops_;
  const DeviceId num_devices_;

  std::vector<DeviceId> device_;       // by op; kNone until placed
  std::vector<int64_t> finish_;        // by op; when it finishes where it was placed
  std::vector<DeviceId> unit_device_;  // by unit; kNone until its first member is placed
  std::vector<int64_t> used_;          // by device: bytes in use now
  ReceivedCopies copies_;              // inputs copied to devices other than their producer's
};

}  // namespace placement::engine::baselines

#endif  // PLACEMENT_SERVICE_ENGINE_BASELINES_LIST_SCHEDULER_BASE_H_
