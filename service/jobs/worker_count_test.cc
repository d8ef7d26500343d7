#include "service/jobs/worker_count.h"

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

TEST(WorkerCountTest, MissingFileFallsBackToHardware) {
  const int hardware = static_cast<int>(std::thread::hardware_concurrency());
  EXPECT_EQ(DefaultWorkerCount("/nonexistent/cpu.max"), hardware > 0 ? hardware : 1);
}

}  // namespace
}  // namespace placement::jobs
