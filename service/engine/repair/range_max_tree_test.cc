#include "service/engine/repair/range_max_tree.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace placement::engine {
namespace {

TEST(RangeAddMaxTreeTest, SmallByHand) {
  RangeAddMaxTree tree;
  tree.Build({1, 5, 2, 0});
  EXPECT_EQ(tree.Max(), 5);
  EXPECT_EQ(tree.ArgMax(), 1);
  tree.Add(2, 4, 10);  // {1, 5, 12, 10}
  EXPECT_EQ(tree.Max(), 12);
  EXPECT_EQ(tree.ArgMax(), 2);
  EXPECT_EQ(tree.RangeMax(0, 2), 5);
  EXPECT_EQ(tree.RangeMax(3, 4), 10);
  EXPECT_EQ(tree.At(3), 10);
  tree.Add(0, 4, -3);  // {-2, 2, 9, 7}
  EXPECT_EQ(tree.Max(), 9);
  EXPECT_EQ(tree.RangeMax(0, 1), -2);
  EXPECT_EQ(tree.RangeMax(2, 2), RangeAddMaxTree::kEmptyMax);
}

TEST(RangeAddMaxTreeTest, ArgMaxReturnsFirstOfTies) {
  RangeAddMaxTree tree;
  tree.Build({0, 0, 0, 0, 0});
  tree.Add(1, 5, 3);
  tree.Add(3, 4, 0);
  EXPECT_EQ(tree.ArgMax(), 1);
  tree.Add(0, 1, 3);
  EXPECT_EQ(tree.ArgMax(), 0);
}

TEST(RangeAddMaxTreeTest, MatchesBruteForceOnRandomOperations) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 200);
    std::vector<int64_t> values(n);
    for (int64_t& v : values) v = static_cast<int64_t>(rng() % 1000) - 500;
    RangeAddMaxTree tree;
    tree.Build(values);
    for (int step = 0; step < 500; ++step) {
      int l = static_cast<int>(rng() % (n + 1)), r = static_cast<int>(rng() % (n + 1));
      if (l > r) std::swap(l, r);
      if (rng() % 2 == 0) {
        const int64_t delta = static_cast<int64_t>(rng() % 200) - 100;
        tree.Add(l, r, delta);
        for (int i = l; i < r; ++i) values[i] += delta;
      } else {
        const int64_t expected =
            l < r ? *std::max_element(values.begin() + l, values.begin() + r)
                  : RangeAddMaxTree::kEmptyMax;
        ASSERT_EQ(tree.RangeMax(l, r), expected);
      }
      const auto it = std::max_element(values.begin(), values.end());
      ASSERT_EQ(tree.Max(), *it);
      ASSERT_EQ(tree.ArgMax(), it - values.begin());
    }
  }
}

}  // namespace
}  // namespace placement::engine
