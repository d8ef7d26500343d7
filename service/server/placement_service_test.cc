// Unit tests of the gRPC adapter's small parts that the end-to-end tests cannot pin down
// deterministically: the decoding budget (--max_decoding_bytes) and the drain / abort signal.
#include "service/server/placement_service.h"

#include <cstdint>
#include <vector>

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

TEST(DrainSignalTest, AbortReachesOnlyAbortSubscribersOnceAndLateOnesAtOnce) {
  DrainSignal signal;
  std::vector<int> calls;
  const uint64_t drain = signal.Subscribe([&] { calls.push_back(1); });
  const uint64_t abort = signal.SubscribeAbort([&] { calls.push_back(2); });
  const uint64_t gone = signal.SubscribeAbort([&] { calls.push_back(3); });
  ASSERT_NE(drain, 0u);
  ASSERT_NE(abort, 0u);
  signal.Unsubscribe(gone);
  signal.Fire();
  EXPECT_EQ(calls, std::vector<int>({1}));
  EXPECT_FALSE(signal.aborted());
  signal.Abort();
  signal.Abort();
  EXPECT_EQ(calls, std::vector<int>({1, 2}));
  EXPECT_TRUE(signal.aborted());
  EXPECT_EQ(signal.SubscribeAbort([&] { calls.push_back(4); }), 0u);  // the caller reacts itself
}

}  // namespace
}  // namespace placement::server
