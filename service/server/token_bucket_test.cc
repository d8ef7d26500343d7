#include "service/server/token_bucket.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/status_payloads/status_payloads.h"
#include "service/clock/clock.h"

namespace placement::server {
namespace {

using ::testing::HasSubstr;

TEST(TokenBucketTest, StartsFullAndRefusesWhenEmpty) {
  FakeClock clock;
  TokenBucket bucket(/*rate_per_second=*/2, /*burst=*/3, clock.Now());
  EXPECT_TRUE(bucket.TryTake(clock.Now()));
  EXPECT_TRUE(bucket.TryTake(clock.Now()));
  EXPECT_TRUE(bucket.TryTake(clock.Now()));
  absl::Duration wait;
  EXPECT_FALSE(bucket.TryTake(clock.Now(), &wait));
  // Two tokens a second: the next one is half a second away.
  EXPECT_EQ(wait, absl::Milliseconds(500));
}

TEST(TokenBucketTest, RefillsAtTheRateUpToTheBurst) {
  FakeClock clock;
  TokenBucket bucket(/*rate_per_second=*/4, /*burst=*/2, clock.Now());
  ASSERT_TRUE(bucket.TryTake(clock.Now()));
  ASSERT_TRUE(bucket.TryTake(clock.Now()));
  ASSERT_FALSE(bucket.TryTake(clock.Now()));

  clock.Advance(absl::Milliseconds(250));  // one token
  EXPECT_TRUE(bucket.TryTake(clock.Now()));
  EXPECT_FALSE(bucket.TryTake(clock.Now()));

  clock.Advance(absl::Hours(1));  // capped by the burst
  EXPECT_DOUBLE_EQ(bucket.tokens(clock.Now()), 2.0);
}

TEST(TokenBucketTest, WaitIsWhatRemainsOfThePartialToken) {
  FakeClock clock;
  TokenBucket bucket(/*rate_per_second=*/1, /*burst=*/1, clock.Now());
  ASSERT_TRUE(bucket.TryTake(clock.Now()));
  clock.Advance(absl::Milliseconds(300));
  absl::Duration wait;
  ASSERT_FALSE(bucket.TryTake(clock.Now(), &wait));
  EXPECT_EQ(wait, absl::Milliseconds(700));
  clock.Advance(wait);
  EXPECT_TRUE(bucket.TryTake(clock.Now()));
}

TEST(TokenBucketTest, ClockGoingBackwardsEarnsNothing) {
  FakeClock clock;
  TokenBucket bucket(/*rate_per_second=*/1, /*burst=*/1, clock.Now());
  ASSERT_TRUE(bucket.TryTake(clock.Now()));
  clock.Advance(-absl::Seconds(10));
  EXPECT_FALSE(bucket.TryTake(clock.Now()));
}

TEST(TokenBucketTest, ReconfigureKeepsEarnedTokensWithinTheNewBurst) {
  FakeClock clock;
  TokenBucket bucket(/*rate_per_second=*/1, /*burst=*/10, clock.Now());
  bucket.Reconfigure(/*rate_per_second=*/1, /*burst=*/2, clock.Now());
  EXPECT_DOUBLE_EQ(bucket.tokens(clock.Now()), 2.0);
}

TEST(TenantRateLimiterTest, UnlimitedWithoutARate) {
  FakeClock clock;
  TenantRateLimiter limiter(&clock);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(limiter.Admit("a", TenantLimits{}).ok());
}

TEST(TenantRateLimiterTest, EachTenantHasItsOwnBucket) {
  FakeClock clock;
  TenantRateLimiter limiter(&clock);
  const TenantLimits limits{.jobs = {}, .rate_qps = 1, .burst = 2};
  EXPECT_TRUE(limiter.Admit("a", limits).ok());
  EXPECT_TRUE(limiter.Admit("a", limits).ok());
  absl::Status refused = limiter.Admit("a", limits);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("tenant \"a\" exceeded its request rate"));
  EXPECT_EQ(status_payloads::RetryDelayOf(refused), absl::Seconds(1));
  // Tenant b is not affected by a's calls.
  EXPECT_TRUE(limiter.Admit("b", limits).ok());

  clock.Advance(absl::Seconds(1));
  EXPECT_TRUE(limiter.Admit("a", limits).ok());
}

TEST(TenantRateLimiterTest, BurstDefaultsToTheRateButAtLeastOne) {
  EXPECT_DOUBLE_EQ(EffectiveBurst({.jobs = {}, .rate_qps = 0.1}), 1.0);
  EXPECT_DOUBLE_EQ(EffectiveBurst({.jobs = {}, .rate_qps = 5}), 5.0);
  EXPECT_DOUBLE_EQ(EffectiveBurst({.jobs = {}, .rate_qps = 5, .burst = 20}), 20.0);

  FakeClock clock;
  TenantRateLimiter limiter(&clock);
  const TenantLimits limits{.jobs = {}, .rate_qps = 0.1};
  EXPECT_TRUE(limiter.Admit("a", limits).ok());
  EXPECT_FALSE(limiter.Admit("a", limits).ok());
}

TEST(TenantRateLimiterTest, NewLimitsApplyFromTheNextCall) {
  FakeClock clock;
  TenantRateLimiter limiter(&clock);
  ASSERT_TRUE(limiter.Admit("a", {.jobs = {}, .rate_qps = 1, .burst = 1}).ok());
  ASSERT_FALSE(limiter.Admit("a", {.jobs = {}, .rate_qps = 1, .burst = 1}).ok());
  // Raised to unlimited: admitted at once.
  EXPECT_TRUE(limiter.Admit("a", TenantLimits{}).ok());
}

}  // namespace
}  // namespace placement::server
