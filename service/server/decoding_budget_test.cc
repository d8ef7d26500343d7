#include "service/server/decoding_budget.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace placement::server {
namespace {

TEST(DecodingBudgetTest, ACallAloneAlwaysFitsAndTheBoundHoldsForTheRest) {
  DecodingBudget budget(/*max_bytes=*/100);
  EXPECT_TRUE(budget.TryReserve(500));  // alone: admitted, or the largest message could never pass
  EXPECT_FALSE(budget.TryReserve(1));   // nothing else while it holds more than the bound
  budget.Release(500);
  EXPECT_EQ(budget.in_use(), 0);
  EXPECT_TRUE(budget.TryReserve(60));
  EXPECT_TRUE(budget.TryReserve(40));
  EXPECT_FALSE(budget.TryReserve(1));
  budget.Release(40);
  EXPECT_TRUE(budget.TryReserve(30));
  EXPECT_EQ(budget.in_use(), 90);
}

TEST(DecodingBudgetTest, ZeroIsUnbounded) {
  DecodingBudget budget(/*max_bytes=*/0);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(budget.TryReserve(int64_t{1} << 40));
}

}  // namespace
}  // namespace placement::server
