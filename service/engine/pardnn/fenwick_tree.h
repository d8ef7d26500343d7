// fenwick_tree.h — per-device work per time slot with O(log L) point updates and range sums: how much
// of device k's work (in its own time units) falls into the time window (a, b] of the stage-1 schedule.
// ParDNN's mapping asks this for every secondary cluster and every device ("load in the cluster's span").
//
// All K trees live in one flat array, interleaved by index (entry i of tree k at i * K + k), so a query
// for all devices reads one contiguous run of K values per Fenwick index instead of K far-apart ones.
//
// Example:
//   DeviceSlotLoads loads(/*devices=*/4, /*slots=*/num_levels);
//   loads.Add(/*device=*/2, /*slot=*/level_of_op, op_time_on_device_2);
//   int64_t busy = loads.RangeSum(2, first_slot, end_slot);  // slots [first_slot, end_slot)
#ifndef PLACEMENT_SERVICE_ENGINE_PARDNN_FENWICK_TREE_H_
#define PLACEMENT_SERVICE_ENGINE_PARDNN_FENWICK_TREE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace placement::engine::pardnn {

// One Fenwick (binary indexed) tree over int64 values, slots 0..size-1.
class FenwickTree {
 public:
  explicit FenwickTree(int32_t size = 0) { Reset(size); }
  void Reset(int32_t size) { tree_.assign(static_cast<size_t>(size) + 1, 0); }
  int32_t size() const { return static_cast<int32_t>(tree_.size()) - 1; }

  void Add(int32_t slot, int64_t delta) {
    for (int32_t i = slot + 1; i < static_cast<int32_t>(tree_.size()); i += i & -i) tree_[i] += delta;
  }
  // Sum of slots [0, end).
  int64_t Prefix(int32_t end) const {
    int64_t sum = 0;
    for (int32_t i = end; i > 0; i -= i & -i) sum += tree_[i];
    return sum;
  }
  // Sum of slots [begin, end).
  int64_t RangeSum(int32_t begin, int32_t end) const {
    return end <= begin ? 0 : Prefix(end) - Prefix(begin);
  }

 private:
  std::vector<int64_t> tree_;
};

// K Fenwick trees in one allocation.
class DeviceSlotLoads {
 public:
  DeviceSlotLoads(int32_t devices = 0, int32_t slots = 0) { Reset(devices, slots); }
  void Reset(int32_t devices, int32_t slots) {
    devices_ = devices;
    size_ = slots + 1;
    tree_.assign(static_cast<size_t>(devices) * size_, 0);
  }
  int32_t devices() const { return devices_; }
  int32_t slots() const { return size_ - 1; }

  void Add(int32_t device, int32_t slot, int64_t delta) {
    for (int32_t i = slot + 1; i < size_; i += i & -i) {
      tree_[static_cast<size_t>(i) * devices_ + device] += delta;
    }
  }
  int64_t Prefix(int32_t device, int32_t end) const {
    int64_t sum = 0;
    for (int32_t i = end; i > 0; i -= i & -i) sum += tree_[static_cast<size_t>(i) * devices_ + device];
    return sum;
  }
  int64_t RangeSum(int32_t device, int32_t begin, int32_t end) const {
    return end <= begin ? 0 : Prefix(device, end) - Prefix(device, begin);
  }
  // out[k] = RangeSum(k, begin, end) for every device k.
  void RangeSums(int32_t begin, int32_t end, int64_t* out) const;

 private:
  int32_t devices_ = 0;
  int32_t size_ = 1;
  std::vector<int64_t> tree_;
};

}  // namespace placement::engine::pardnn

#endif  // PLACEMENT_SERVICE_ENGINE_PARDNN_FENWICK_TREE_H_
