// free_slots.h — the idle periods of one device in an insertion-based list schedule (HEFT): answers
// "earliest start >= t of a w-long run" and marks runs busy, both in O(log n) expected time, so insertion
// scheduling stays fast on million-op graphs where scanning every gap would be quadratic.
//
// Idle periods are half-open intervals [from, until) kept in a treap ordered by `from`, each node carrying
// the longest interval of its subtree so that the first long-enough gap after t is found by descending.
// The device starts idle over [0, +inf).
//
// Example:
//   FreeSlots slots;
//   int64_t start = slots.EarliestStart(/*t=*/100, /*w=*/50);  // 100
//   slots.Occupy(start, 50);                                     // busy over [100, 150)
//   slots.EarliestStart(0, 100);                                 // 0: [0, 100) is still idle
#ifndef PLACEMENT_SERVICE_ENGINE_BASELINES_FREE_SLOTS_H_
#define PLACEMENT_SERVICE_ENGINE_BASELINES_FREE_SLOTS_H_

#include <cstdint>
#include <vector>

namespace placement::engine::baselines {

class FreeSlots {
 public:
  FreeSlots();

  // The earliest s >= t such that [s, s + w) is idle (w >= 0; a zero-length run needs s inside an idle
  // period).
  int64_t EarliestStart(int64_t t, int64_t w) const;

  // Marks [start, start + w) busy. Precondition: it is idle (e.g. start came from EarliestStart(., w)).
  void Occupy(int64_t start, int64_t w);

  // Number of idle periods (for tests).
  int32_t size() const { return size_; }

 private:
  struct Node {
    int64_t from;
    int64_t until;
    int64_t max_length;  // longest idle period in this subtree
    uint32_t priority;
    int32_t left;
    int32_t right;
  };

  int64_t Length(int32_t n) const { return nodes_[n].until - nodes_[n].from; }
  int64_t MaxLength(int32_t n) const { return n == -1 ? -1 : nodes_[n].max_length; }
  void Update(int32_t n);
  // (keys < key, keys >= key)
  void Split(int32_t n, int64_t key, int32_t& less, int32_t& rest);
  int32_t Merge(int32_t a, int32_t b);
  int32_t NewNode(int64_t from, int64_t until);
  void Insert(int64_t from, int64_t until);
  void Erase(int64_t from);
  // The node with the largest from <= t, or -1.
  int32_t Floor(int64_t t) const;
  // The first node (by from) with from > t and length >= w, or -1.
  int32_t FirstAfter(int32_t n, int64_t t, int64_t w) const;
  int32_t FirstAny(int32_t n, int64_t w) const;

  std::vector<Node> nodes_;
  std::vector<int32_t> free_nodes_;
  int32_t root_ = -1;
  int32_t size_ = 0;
  uint32_t random_state_ = 2463534242u;
};

}  // namespace placement::engine::baselines

#endif  // PLACEMENT_SERVICE_ENGINE_BASELINES_FREE_SLOTS_H_
