#include "service/engine/repair/range_max_tree.h"

#include <algorithm>

namespace placement::engine {

void RangeAddMaxTree::Build(const std::vector<int64_t>& values) {
  size_ = static_cast<int32_t>(values.size());
  if (size_ == 0) return;
  max_.assign(4 * static_cast<size_t>(size_), 0);
  add_.assign(4 * static_cast<size_t>(size_), 0);
  BuildNode(1, 0, size_, values);
}

void RangeAddMaxTree::BuildNode(int32_t node, int32_t lo, int32_t hi,
                                const std::vector<int64_t>& values) {
  if (hi - lo == 1) {
    max_[node] = values[lo];
    return;
  }
  const int32_t mid = lo + (hi - lo) / 2;
  BuildNode(2 * node, lo, mid, values);
  BuildNode(2 * node + 1, mid, hi, values);
  max_[node] = std::max(max_[2 * node], max_[2 * node + 1]);
}

void RangeAddMaxTree::Add(int32_t l, int32_t r, int64_t delta) {
  l = std::max(l, 0);
  r = std::min(r, size_);
  if (l >= r || delta == 0) return;
  AddNode(1, 0, size_, l, r, delta);
}

void RangeAddMaxTree::AddNode(int32_t node, int32_t lo, int32_t hi, int32_t l, int32_t r,
                              int64_t delta) {
  if (l <= lo && hi <= r) {
    max_[node] += delta;
    add_[node] += delta;
    return;
  }
  const int32_t mid = lo + (hi - lo) / 2;
  if (l < mid) AddNode(2 * node, lo, mid, l, r, delta);
  if (r > mid) AddNode(2 * node + 1, mid, hi, l, r, delta);
  max_[node] = std::max(max_[2 * node], max_[2 * node + 1]) + add_[node];
}

int64_t RangeAddMaxTree::RangeMax(int32_t l, int32_t r) const {
  l = std::max(l, 0);
  r = std::min(r, size_);
  if (l >= r) return kEmptyMax;
  return MaxNode(1, 0, size_, l, r);
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
  int32_t node = 1, lo = 0, hi = size_;
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
