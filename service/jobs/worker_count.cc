#include "service/jobs/worker_count.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace placement::jobs {

std::optional<int> CpuLimitFromCpuMax(absl::string_view contents) {
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::StripAsciiWhitespace(contents), ' ', absl::SkipEmpty());
  if (fields.size() != 2 || fields[0] == "max") return std::nullopt;
  int64_t quota = 0;
  int64_t period = 0;
  if (!absl::SimpleAtoi(fields[0], &quota) || !absl::SimpleAtoi(fields[1], &period) ||
      quota <= 0 || period <= 0) {
    return std::nullopt;
  }
  // Rounded up without overflow (quota + period - 1 may exceed int64), then clamped to int: a quota
  // of thousands of CPUs is as good as none here (the caller takes the minimum with the hardware).
  const int64_t cpus = quota / period + (quota % period != 0 ? 1 : 0);
  return static_cast<int>(std::clamp<int64_t>(cpus, 1, std::numeric_limits<int>::max()));
}

std::optional<int> CpuLimitFromCfs(absl::string_view quota_us, absl::string_view period_us) {
  return CpuLimitFromCpuMax(absl::StrCat(absl::StripAsciiWhitespace(quota_us), " ",
                                         absl::StripAsciiWhitespace(period_us)));
}

namespace {

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream file(path);
  if (!file) return std::nullopt;
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

}  // namespace

int DefaultWorkerCount(const std::string& cpu_max_path, const std::string& cgroup_v1_cpu_dir) {
  int count = static_cast<int>(std::thread::hardware_concurrency());
  if (count <= 0) count = 1;
  std::optional<int> limit;
  if (std::optional<std::string> cpu_max = ReadFile(cpu_max_path)) {
    limit = CpuLimitFromCpuMax(*cpu_max);
  } else {
    // cgroup v1 (older hosts and runtimes): the CFS quota and period of the cpu controller.
    std::optional<std::string> quota = ReadFile(cgroup_v1_cpu_dir + "/cpu.cfs_quota_us");
    std::optional<std::string> period = ReadFile(cgroup_v1_cpu_dir + "/cpu.cfs_period_us");
    if (quota.has_value() && period.has_value()) limit = CpuLimitFromCfs(*quota, *period);
  }
  if (limit.has_value()) count = std::min(count, *limit);
  return std::max(1, count);
}

}  // namespace placement::jobs
