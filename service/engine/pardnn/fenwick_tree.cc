#include "service/engine/pardnn/fenwick_tree.h"

namespace placement::engine::pardnn {

void DeviceSlotLoads::RangeSums(int32_t begin, int32_t end, int64_t* out) const {
  for (int32_t k = 0; k < devices_; ++k) out[k] = 0;
  if (end <= begin) return;
  // Walk the two prefix index sequences once; the tree of device k is at offset k * stride_.
  for (int32_t i = end; i > 0; i -= i & -i) {
    const int64_t* t = tree_.data() + i;
    for (int32_t k = 0; k < devices_; ++k) out[k] += t[static_cast<size_t>(k) * stride_];
  }
  for (int32_t i = begin; i > 0; i -= i & -i) {
    const int64_t* t = tree_.data() + i;
    for (int32_t k = 0; k < devices_; ++k) out[k] -= t[static_cast<size_t>(k) * stride_];
  }
}

}  // namespace placement::engine::pardnn
