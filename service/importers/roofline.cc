#include "service/importers/roofline.h"

#include <algorithm>
#include <cmath>

namespace placement::importers {

int64_t RooflineNs(double flops, double bytes, const RooflineModel& model) {
  const double compute_s = model.peak_flops_per_second > 0 ? flops / model.peak_flops_per_second : 0;
  const double memory_s = model.memory_bytes_per_second > 0 ? bytes / model.memory_bytes_per_second : 0;
  const double seconds = std::max({compute_s, memory_s, 0.0});
  // Clamp absurd inputs instead of overflowing: 1e15 ns is the model's own limit on any time.
  const double ns = std::min(seconds * 1e9, 1e14);
  return model.launch_overhead_ns + static_cast<int64_t>(std::llround(ns));
}

}  // namespace placement::importers
