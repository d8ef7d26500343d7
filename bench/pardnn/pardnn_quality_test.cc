// Quality on real workloads (quality_cases.h): pardnn must be FEASIBLE on every case that is not
// provably impossible (MemoryProvablyInfeasible), and its makespan / lower bound must stay under the
// bounds below, per case and as a geometric mean over the cases; the table goes to stdout (and to
// $PARDNN_QUALITY_TABLE when set). Skips cleanly without ../shared/workloads. Label "quality"
// (ctest -L quality; under a minute). Runs without a deadline, so the figures are deterministic.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/pardnn/pardnn_partitioner.h"
#include "bench/pardnn/quality_cases.h"
#include "service/engine/sim/constraints.h"
#include "service/engine/sim/simulator.h"

namespace placement::engine::pardnn {
namespace {

// Today (50 cases, 2026-12-02): geometric mean 1.153, worst case 3.220 (msr inceptionv3_training, whose
// lower bound ignores its transfers). The bounds leave about 4 % and 9 % of room: a change that loses
// more than that on these graphs fails here instead of passing with a worse printed table.
constexpr double kMaxGeometricMeanRatio = 1.20;
constexpr double kMaxCaseRatio = 3.5;

TEST(PardnnQualityTest, RealWorkloadsAreFeasibleAndNearTheLowerBound) {
  const std::string shared = FindSharedDir();
  if (shared.empty()) GTEST_SKIP() << "../shared/workloads not found";
  absl::StatusOr<std::vector<QualityCase>> cases = LoadQualityCases(shared);
  ASSERT_TRUE(cases.ok()) << cases.status();
  ASSERT_FALSE(cases->empty());
  std::unique_ptr<Partitioner> pardnn = MakePardnnPartitioner();
  std::string table =
      "| case | ops | K | feasible | makespan ms | lower bound ms | ratio | solve ms |\n"
      "|---|---:|---:|:---|---:|---:|---:|---:|\n";
  double log_sum = 0.0;
  int feasible_count = 0, possible_count = 0;
  for (const QualityCase& c : *cases) {
    absl::StatusOr<Model> model = BuildModel(c.request);
    ASSERT_TRUE(model.ok()) << c.name << ": " << model.status();
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<PartitionResult> result = pardnn->Partition(*model, SolveContext());
    const double solve_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    ASSERT_TRUE(result.ok()) << c.name << ": " << result.status();
    EXPECT_TRUE(CheckConstraints(*model, result->assignment).empty()) << c.name;
    Simulator sim(*model);
    const SimResult& r = sim.Run(result->assignment);
    const bool feasible = r.MemoryFits(*model);
    int64_t needed = 0;
    const OpId impossible = MemoryProvablyInfeasible(*model, &needed);
    if (impossible == kNone) {
      EXPECT_TRUE(feasible) << c.name;
      ++possible_count;
    }
    feasible_count += feasible;
    const int64_t lower = LowerBoundNs(*model);
    const double ratio = lower > 0 ? static_cast<double>(r.makespan_ns) / lower : 1.0;
    log_sum += std::log(ratio);
    EXPECT_LE(ratio, kMaxCaseRatio) << c.name << ": makespan " << r.makespan_ns << " ns, lower bound "
                                    << lower << " ns";
    const std::string verdict =
        feasible ? "yes"
                 : impossible != kNone
                       ? absl::StrFormat("no (impossible: an op needs %.2f GB)", needed / 1e9)
                       : "**no**";
    absl::StrAppendFormat(&table, "| %s | %d | %d | %s | %.3f | %.3f | %.3f | %.0f |\n", c.name,
                          model->num_ops(), model->num_devices(), verdict, r.makespan_ns / 1e6,
                          lower / 1e6, ratio, solve_ms);
  }
  const double geometric_mean = std::exp(log_sum / cases->size());
  absl::StrAppendFormat(&table,
                        "\n%d of %d feasible (%d not provably impossible); geometric mean makespan / "
                        "lower bound %.3f\n",
                        feasible_count, static_cast<int>(cases->size()), possible_count, geometric_mean);
  std::printf("%s", table.c_str());
  if (const char* out = std::getenv("PARDNN_QUALITY_TABLE")) {
    if (FILE* f = std::fopen(out, "w")) {
      std::fputs(table.c_str(), f);
      std::fclose(f);
    }
  }
  EXPECT_LE(geometric_mean, kMaxGeometricMeanRatio) << table;
}

}  // namespace
}  // namespace placement::engine::pardnn
