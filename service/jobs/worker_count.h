// worker_count.h — how many worker threads to start by default.
//
// std::thread::hardware_concurrency() reports the host's CPUs, not a container's CPU limit, so the
// default is the cgroup CPU quota when one is set — cgroup v2's /sys/fs/cgroup/cpu.max ("<quota> <period>"),
// else cgroup v1's /sys/fs/cgroup/cpu/cpu.cfs_quota_us and cpu.cfs_period_us (quota -1 = none), rounded
// up — else the hardware concurrency, and at least 1.
//
// Example:
//   int workers = flag_workers > 0 ? flag_workers : DefaultWorkerCount();
#ifndef PLACEMENT_SERVICE_JOBS_WORKER_COUNT_H_
#define PLACEMENT_SERVICE_JOBS_WORKER_COUNT_H_

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace placement::jobs {

// The CPU limit expressed by the contents of a cgroup v2 cpu.max file: "max 100000" → nullopt (no
// limit), "150000 100000" → 2. Malformed contents → nullopt.
std::optional<int> CpuLimitFromCpuMax(absl::string_view contents);

// The CPU limit of cgroup v1's cpu.cfs_quota_us and cpu.cfs_period_us contents: "-1", "100000" →
// nullopt (no limit); "150000", "100000" → 2. Malformed contents → nullopt.
std::optional<int> CpuLimitFromCfs(absl::string_view quota_us, absl::string_view period_us);

// min(cgroup CPU limit, hardware concurrency), at least 1. The limit is read from `cpu_max_path`
// (cgroup v2); without one, from cpu.cfs_quota_us and cpu.cfs_period_us in `cgroup_v1_cpu_dir`.
int DefaultWorkerCount(const std::string& cpu_max_path = "/sys/fs/cgroup/cpu.max",
                       const std::string& cgroup_v1_cpu_dir = "/sys/fs/cgroup/cpu");

}  // namespace placement::jobs

#endif  // PLACEMENT_SERVICE_JOBS_WORKER_COUNT_H_
