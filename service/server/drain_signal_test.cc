#include "service/server/drain_signal.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace placement::server {
namespace {

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

TEST(DrainSignalTest, DrainReachesOnlyDrainSubscribersAndIdsNeverCollide) {
  DrainSignal signal;
  std::vector<int> calls;
  const uint64_t drain = signal.Subscribe([&] { calls.push_back(1); });
  const uint64_t abort = signal.SubscribeAbort([&] { calls.push_back(2); });
  EXPECT_NE(drain, abort);
  signal.Unsubscribe(abort);  // removes the abort subscriber, not the drain one
  signal.Fire();
  signal.Fire();
  EXPECT_EQ(calls, std::vector<int>({1}));
  EXPECT_TRUE(signal.fired());
  EXPECT_EQ(signal.Subscribe([&] { calls.push_back(3); }), 0u);
  signal.Abort();
  EXPECT_EQ(calls, std::vector<int>({1}));
}

}  // namespace
}  // namespace placement::server
