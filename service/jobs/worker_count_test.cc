#include "service/jobs/worker_count.h"

#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <limits>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace placement::jobs {
namespace {

TEST(WorkerCountTest, ParsesCpuMax) {
  EXPECT_EQ(CpuLimitFromCpuMax("max 100000\n"), std::nullopt);
  EXPECT_EQ(CpuLimitFromCpuMax("200000 100000\n"), 2);
  EXPECT_EQ(CpuLimitFromCpuMax("150000 100000"), 2);
  // Found by text_inputs_fuzzer: huge quotas used to overflow int (and quota + period - 1, int64).
  EXPECT_EQ(CpuLimitFromCpuMax("8888888888888880 1"), std::numeric_limits<int>::max());
  EXPECT_EQ(CpuLimitFromCpuMax("9223372036854775807 9223372036854775807"), 1);
  EXPECT_EQ(CpuLimitFromCpuMax("9223372036854775807 2"), std::numeric_limits<int>::max());
  EXPECT_EQ(CpuLimitFromCpuMax("50000 100000"), 1);
  EXPECT_EQ(CpuLimitFromCpuMax(""), std::nullopt);
  EXPECT_EQ(CpuLimitFromCpuMax("garbage"), std::nullopt);
  EXPECT_EQ(CpuLimitFromCpuMax("-5 100000"), std::nullopt);
}

TEST(WorkerCountTest, QuotaCapsHardwareConcurrency) {
  const std::string path = ::testing::TempDir() + "/cpu.max";
  {
    std::ofstream file(path);
    file << "100000 100000\n";
  }
  EXPECT_EQ(DefaultWorkerCount(path), 1);
  std::remove(path.c_str());
}

TEST(WorkerCountTest, ParsesCgroupV1Cfs) {
  EXPECT_EQ(CpuLimitFromCfs("-1\n", "100000\n"), std::nullopt);
  EXPECT_EQ(CpuLimitFromCfs("150000\n", "100000\n"), 2);
  EXPECT_EQ(CpuLimitFromCfs("100000", "100000"), 1);
  EXPECT_EQ(CpuLimitFromCfs("", "100000"), std::nullopt);
}

// Issue 14: --workers=0 read only cgroup v2; under cgroup v1 a CPU-limited container got one worker
// per host CPU.
TEST(WorkerCountTest, CgroupV1QuotaCapsHardwareConcurrencyWithoutCpuMax) {
  const std::string dir = ::testing::TempDir() + "/cgroup_v1_cpu";
  std::remove((dir + "/cpu.cfs_quota_us").c_str());
  ::mkdir(dir.c_str(), 0700);
  {
    std::ofstream(dir + "/cpu.cfs_quota_us") << "100000\n";
    std::ofstream(dir + "/cpu.cfs_period_us") << "100000\n";
  }
  EXPECT_EQ(DefaultWorkerCount("/nonexistent/cpu.max", dir), 1);
  {
    std::ofstream(dir + "/cpu.cfs_quota_us") << "-1\n";
  }
  const int hardware = static_cast<int>(std::thread::hardware_concurrency());
  EXPECT_EQ(DefaultWorkerCount("/nonexistent/cpu.max", dir), hardware > 0 ? hardware : 1);
}

TEST(WorkerCountTest, MissingFileFallsBackToHardware) {
  const int hardware = static_cast<int>(std::thread::hardware_concurrency());
  EXPECT_EQ(DefaultWorkerCount("/nonexistent/cpu.max", "/nonexistent"), hardware > 0 ? hardware : 1);
}

}  // namespace
}  // namespace placement::jobs
