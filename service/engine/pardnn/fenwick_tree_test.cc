#include "service/engine/pardnn/fenwick_tree.h"

#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace placement::engine::pardnn {
namespace {

TEST(FenwickTreeTest, PrefixAndRangeSums) {
  FenwickTree tree(5);
  tree.Add(0, 3);
  tree.Add(2, 5);
  tree.Add(4, 7);
  EXPECT_EQ(tree.Prefix(0), 0);
  EXPECT_EQ(tree.Prefix(1), 3);
  EXPECT_EQ(tree.Prefix(5), 15);
  EXPECT_EQ(tree.RangeSum(1, 4), 5);
  EXPECT_EQ(tree.RangeSum(3, 3), 0);
  EXPECT_EQ(tree.RangeSum(4, 2), 0);
  tree.Add(2, -5);
  EXPECT_EQ(tree.RangeSum(0, 5), 10);
}

TEST(DeviceSlotLoadsTest, MatchesBruteForce) {
  std::mt19937_64 rng(3);
  const int devices = 5, slots = 37;
  DeviceSlotLoads loads(devices, slots);
  std::vector<std::vector<int64_t>> plain(devices, std::vector<int64_t>(slots, 0));
  std::vector<int64_t> out(devices);
  for (int step = 0; step < 2000; ++step) {
    const int d = static_cast<int>(rng() % devices), s = static_cast<int>(rng() % slots);
    const int64_t delta = static_cast<int64_t>(rng() % 100) - 30;
    loads.Add(d, s, delta);
    plain[d][s] += delta;
    int a = static_cast<int>(rng() % (slots + 1)), b = static_cast<int>(rng() % (slots + 1));
    if (a > b) std::swap(a, b);
    loads.RangeSums(a, b, out.data());
    for (int k = 0; k < devices; ++k) {
      int64_t expected = 0;
      for (int i = a; i < b; ++i) expected += plain[k][i];
      ASSERT_EQ(out[k], expected);
      ASSERT_EQ(loads.RangeSum(k, a, b), expected);
    }
  }
}

}  // namespace
}  // namespace placement::engine::pardnn
