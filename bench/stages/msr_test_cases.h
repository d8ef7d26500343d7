// msr_test_cases.h — (tests only) the NeurIPS'20 training inputs, the published DP's figures on them,
// and the checks the msr tests share (msr_stage_problem_test.cc says what they are).
#ifndef PLACEMENT_BENCH_STAGES_MSR_TEST_CASES_H_
#define PLACEMENT_BENCH_STAGES_MSR_TEST_CASES_H_

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "bench/stages/msr_stage_problem.h"
#include "gtest/gtest.h"

namespace placement::bench::testing {

struct Case {
  const char* file;
  int64_t ideals;         // the published DP's count ("N ideals" on stderr)
  double published;       // its maxLoad (stdout JSON), 0 = not available
};

inline constexpr Case kCases[] = {
    {"LayerGraphs/bert24_training.json", 30, 41.7458125},
    {"LayerGraphs/gnmt_training.json", 17914, 107.0044140625},
    {"LayerGraphs/resnet50_training.json", 242, 78.63181250000001},
    {"OperatorGraphs/bert_l-3_training.json", 2774, 65.30314912208605},
    {"OperatorGraphs/bert_l-6_training.json", 3776, 72.86496632241122},
    {"OperatorGraphs/bert_L-12_training.json", 2938, 437.9976378578455},
    {"OperatorGraphs/resnet50_training.json", 258, 255.19441645217384},
};
inline constexpr Case kInception = {"LayerGraphs/inceptionv3_training.json", 36596, 0.0};

inline std::string InputPath(const char* file) {
  const char* source = std::getenv("PLACEMENT_SOURCE_DIR");
  return std::string(source != nullptr ? source : ".") +
         "/../shared/workloads/msr_dnn_partitioning/throughput-inputs/" + file;
}

inline bool Exists(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0;
}

// Times were rounded to 1e-9 of the file's unit per node; sums of a few thousand such terms.
inline double Tolerance(double value) { return 1e-9 * std::max(1.0, std::abs(value)) + 5e-7; }

inline void Check(const Case& c) {
  const std::string path = InputPath(c.file);
  if (!Exists(path)) GTEST_SKIP() << "shared workloads not present: " << path;
  absl::StatusOr<MsrInput> input = ReadMsrInput(path);
  ASSERT_TRUE(input.ok()) << input.status();
  const MsrStagePlan plan = SolveMsr(*input, MsrSolveOptions());
  ASSERT_TRUE(std::isfinite(plan.max_load)) << c.file;
  EXPECT_EQ(plan.ideals, c.ideals) << c.file;
  EXPECT_NEAR(MsrMaxLoad(*input, plan.device_of_node), plan.max_load, Tolerance(plan.max_load)) << c.file;
  EXPECT_TRUE(MsrFeasible(*input, plan.device_of_node)) << c.file;
  int32_t accelerators = 0;
  for (const int32_t d : plan.device_of_node) accelerators = std::max(accelerators, d);
  EXPECT_LE(accelerators, input->max_fpgas);
  MsrSolveOptions chain;
  chain.chain_only = true;
  EXPECT_LE(plan.max_load, SolveMsr(*input, chain).max_load + Tolerance(plan.max_load)) << c.file;
  if (c.published > 0) {
    EXPECT_NEAR(plan.max_load, c.published, Tolerance(c.published)) << c.file;
  }
}

}  // namespace placement::bench::testing

#endif  // PLACEMENT_BENCH_STAGES_MSR_TEST_CASES_H_
