// Inception-v3's training layer graph in the NeurIPS'20 DP's cost model: 36,596 ideals, about a minute
// (label "quality"). The published DP cannot run it on this machine (see msr_stage_problem_test.cc), so
// the checks are the split's independently recomputed max-load, its feasibility and the chain bound.
#include "bench/stages/msr_test_cases.h"
#include "gtest/gtest.h"

namespace placement::bench {
namespace {

TEST(MsrStageProblemQualityTest, InceptionV3SplitIsConsistentAndFeasible) { testing::Check(testing::kInception); }

}  // namespace
}  // namespace placement::bench
