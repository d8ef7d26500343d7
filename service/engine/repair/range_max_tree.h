// range_max_tree.h — a segment tree over a fixed number of time slots supporting "add `delta` to every
// slot in [l, r)" and "maximum (and where) over [l, r)" in O(log n) each. Memory repair keeps one per
// device as its memory timeline, so a tentative move (a few interval adds) and the peak check that
// follows cost O(log T) instead of a sweep over the whole timeline.
//
// The tree never pushes pending adds down: node x stores max(children) + add(x), so an update touches
// O(log n) nodes (bottom-up, without recursion: the repair's hottest loop) and a query accumulates the
// adds on its path. Slots are 0-based.
//
// Example:
//   RangeAddMaxTree tree;
//   tree.Build(initial_bytes_per_slot);   // std::vector<int64_t>
//   tree.Add(3, 7, +4096);                // an output buffer alive over slots 3..6
//   if (tree.Max() > capacity) tree.Add(3, 7, -4096);  // roll back
//   int32_t peak_slot = tree.ArgMax();
#ifndef PLACEMENT_SERVICE_ENGINE_REPAIR_RANGE_MAX_TREE_H_
#define PLACEMENT_SERVICE_ENGINE_REPAIR_RANGE_MAX_TREE_H_

#include <cstdint>
#include <vector>

namespace placement::engine {

class RangeAddMaxTree {
 public:
  // Sets the number of slots to values.size() and their initial values. Reuses storage.
  void Build(const std::vector<int64_t>& values);

  int32_t size() const { return size_; }

  // Adds `delta` to slots [l, r) (clamped to [0, size)); no-op when empty.
  void Add(int32_t l, int32_t r, int64_t delta);

  // Maximum over all slots (kEmptyMax when there are none). O(1).
  int64_t Max() const { return size_ == 0 ? kEmptyMax : max_[1]; }
  // Maximum over [l, r) (kEmptyMax when empty).
  int64_t RangeMax(int32_t l, int32_t r) const;
  // The first slot holding Max() (-1 when there are no slots).
  int32_t ArgMax() const;
  // Current value of one slot.
  int64_t At(int32_t slot) const { return RangeMax(slot, slot + 1); }

  static constexpr int64_t kEmptyMax = INT64_MIN / 4;

 private:
  // Recomputes the nodes above the leaves `first` and `last` (first <= last), those above both once.
  void PullUp(int32_t first, int32_t last);
  int64_t MaxNode(int32_t node, int32_t lo, int32_t hi, int32_t l, int32_t r) const;

  int32_t size_ = 0;
  int32_t leaves_ = 1;        // size_ rounded up to a power of two; slot i is node leaves_ + i
  std::vector<int64_t> max_;  // 1-based heap layout, 2 * leaves_ entries
  std::vector<int64_t> add_;
};

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_REPAIR_RANGE_MAX_TREE_H_
