#include "service/engine/pardnn/fenwick_tree.h"

namespace placement::engine::pardnn {

void DeviceSlotLoads::RangeSums(int32_t begin, int32_t end, int64_t* out) const {
  for (int32_t k = 0; k < devices_; ++k) out[k] = 0;
  if (end <= begin) return;
  // The two prefix index sequences share their tail (the common ancestors cancel); walk each once.
  for (int32_t i = end; i > 0; i -= i & -i) {
    const int64_t* t = tree_.data() + static_cast<size_t>(i) * devices_;
    for (int32_t k = 0; k < devices_; ++k) out[k] += t[k];
  }
  for (int32_t i = begin; i > 0; i -= i & -i) {
    const int64_t* t = tree_.data() + static_cast<size_t>(i) * devices_;
    for (int32_t k = 0; k < devices_; ++k) out[k] -= t[k];
  }
}

}  // namespace placement::engine::pardnn
