// worker_count.h — how many worker threads to start by default.
//
// std::thread::hardware_concurrency() reports the host's CPUs, not a container's CPU limit, so the
// default is the cgroup v2 CPU quota (/sys/fs/cgroup/cpu.max, "<quota> <period>", rounded up) when one is
// set, else the hardware concurrency, and at least 1.
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

// min(cgroup CPU limit read from `cpu_max_path`, hardware concurrency), at least 1.
int DefaultWorkerCount(const std::string& cpu_max_path = "/sys/fs/cgroup/cpu.max");

}  // namespace placement::jobs

#endif  // PLACEMENT_SERVICE_JOBS_WORKER_COUNT_H_
