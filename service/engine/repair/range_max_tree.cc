#include "service/engine/repair/range_max_tree.h"

#include <algorithm>

namespace placement::engine {

void RangeAddMaxTree::Build(const std::vector<int64_t>& values) {
  size_ = static_cast<int32_t>(values.size());
  if (size_ == 0) return;
  leaves_ = 1;
  while (leaves_ < size_) leaves_ *= 2;
  // Slots past size_ pad the leaves to a power of two; no add reaches them (Add clamps to size_, and
  // every node it changes lies inside the clamped range), so they never carry the maximum.
  max_.assign(2 * static_cast<size_t>(leaves_), kEmptyMax);
  add_.assign(2 * static_cast<size_t>(leaves_), 0);
  std::copy(values.begin(), values.end(), max_.begin() + leaves_);
  for (int32_t node = leaves_ - 1; node >= 1; --node) {
    max_[node] = std::max(max_[2 * node], max_[2 * node + 1]);
  }
}

// Bottom-up, without recursion: the range's O(log n) covering nodes take the add, then the nodes above
// the range's two end leaves are recomputed (every node above a covering node is above one of them).
void RangeAddMaxTree::Add(int32_t l, int32_t r, int64_t delta) {
  l = std::max(l, 0);
  r = std::min(r, size_);
  if (l >= r || delta == 0) return;
  const int32_t first = l + leaves_, last = r - 1 + leaves_;
  for (int32_t lo = first, hi = last + 1; lo < hi; lo /= 2, hi /= 2) {
    if (lo & 1) {
      max_[lo] += delta;
      add_[lo] += delta;
      ++lo;
    }
    if (hi & 1) {
      --hi;
      max_[hi] += delta;
      add_[hi] += delta;
    }
  }
  PullUp(first, last);
}

void RangeAddMaxTree::PullUp(int32_t first, int32_t last) {
  int32_t a = first / 2, b = last / 2;
  for (; a != b; a /= 2, b /= 2) {  // both paths, up to where they meet
    max_[a] = std::max(max_[2 * a], max_[2 * a + 1]) + add_[a];
    max_[b] = std::max(max_[2 * b], max_[2 * b + 1]) + add_[b];
  }
  for (; a >= 1; a /= 2) max_[a] = std::max(max_[2 * a], max_[2 * a + 1]) + add_[a];
}

int64_t RangeAddMaxTree::RangeMax(int32_t l, int32_t r) const {
  l = std::max(l, 0);
  r = std::min(r, size_);
  if (l >= r) return kEmptyMax;
  return MaxNode(1, 0, leaves_, l, r);
}

int64_t RangeAddMaxTree::MaxNode(int32_t node, int32_t lo, int32_t hi, int32_t l,
                                 int32_t r) const {
  if (l <= lo && hi <= r) return max_[node];
  const int32_t mid = lo + (hi - lo) / 2;
  int64_t best = kEmptyMax;
  if (l < mid) best = std::max(best, MaxNode(2 * node, lo, mid, l, r));
  if (r > mid) best = std::max(best, MaxNode(2 * node + 1, mid, hi, l, r));
  return best + add_[node];
}

int32_t RangeAddMaxTree::ArgMax() const {
  if (size_ == 0) return -1;
  // Walk down towards the child that carries the maximum, left first; `target` is what the child's
  // own max_ must equal once the adds above it are removed.
  int32_t node = 1, lo = 0, hi = leaves_;
  int64_t target = max_[1];
  while (hi - lo > 1) {
    target -= add_[node];
    const int32_t mid = lo + (hi - lo) / 2;
    if (max_[2 * node] == target) {
      node = 2 * node;
      hi = mid;
    } else {
      node = 2 * node + 1;
      lo = mid;
    }
  }
  return lo;
}

}  // namespace placement::engine
