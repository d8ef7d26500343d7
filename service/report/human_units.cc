#include "service/report/human_units.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace placement::report {

std::string FormatDurationNs(int64_t ns) {
  const double value = static_cast<double>(ns);
  const double magnitude = std::fabs(value);
  if (magnitude < 1e3) return absl::StrCat(ns, " ns");
  if (magnitude < 1e6) return absl::StrFormat("%.1f us", value / 1e3);
  if (magnitude < 1e9) return absl::StrFormat("%.3f ms", value / 1e6);
  return absl::StrFormat("%.3f s", value / 1e9);
}

std::string FormatBytes(int64_t bytes) {
  const double value = static_cast<double>(bytes);
  const double magnitude = std::fabs(value);
  if (magnitude < 1024.0) return absl::StrCat(bytes, " B");
  if (magnitude < 1024.0 * 1024) return absl::StrFormat("%.1f KiB", value / 1024);
  if (magnitude < 1024.0 * 1024 * 1024) return absl::StrFormat("%.1f MiB", value / (1024.0 * 1024));
  if (magnitude < 1024.0 * 1024 * 1024 * 1024) {
    return absl::StrFormat("%.2f GiB", value / (1024.0 * 1024 * 1024));
  }
  return absl::StrFormat("%.2f TiB", value / (1024.0 * 1024 * 1024 * 1024));
}

}  // namespace placement::report
