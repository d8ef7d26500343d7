#include "service/clock/clock.h"

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace placement {
namespace {

TEST(ClockTest, TheRealClockIsAbslNow) {
  const absl::Time before = absl::Now();
  const absl::Time now = Clock::Real()->Now();
  EXPECT_GE(now, before);
  EXPECT_LE(now, absl::Now());
  EXPECT_EQ(Clock::Real(), Clock::Real());
}

TEST(ClockTest, AFakeClockMovesOnlyWhenTold) {
  FakeClock clock(absl::FromUnixSeconds(100));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(100));
  clock.Advance(absl::Seconds(5));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(105));
  clock.Set(absl::FromUnixSeconds(7));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(7));
}

}  // namespace
}  // namespace placement
