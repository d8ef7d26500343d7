#include "service/shared_ops/rate_limited_log.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace placement::shared_ops {
namespace {

TEST(RateLimitedLogTest, EachKindIsWrittenOncePerIntervalWithACountOfTheRest) {
  FakeClock clock;
  std::vector<std::string> lines;
  RateLimitedLog log([&](absl::string_view line) { lines.emplace_back(line); }, absl::Minutes(1),
                     &clock);
  EXPECT_TRUE(log.Log("oom", "out of memory"));
  EXPECT_FALSE(log.Log("oom", "out of memory"));
  EXPECT_FALSE(log.Log("oom", "out of memory"));
  EXPECT_TRUE(log.Log("takeover", "took over a job"));  // another kind is not held back
  clock.Advance(absl::Seconds(59));
  EXPECT_FALSE(log.Log("oom", "out of memory"));
  clock.Advance(absl::Seconds(1));
  EXPECT_TRUE(log.Log("oom", "out of memory again"));
  EXPECT_TRUE(log.Log("takeover", "took over a job"));
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], "out of memory");
  EXPECT_EQ(lines[1], "took over a job");
  EXPECT_EQ(lines[2], "out of memory again (3 more like it since the last such line)");
  EXPECT_EQ(lines[3], "took over a job");
}

TEST(RateLimitedLogTest, WithoutASinkNothingIsWrittenButTheLimitHolds) {
  FakeClock clock;
  RateLimitedLog log(nullptr, absl::Seconds(10), &clock);
  EXPECT_TRUE(log.Log("k", "line"));
  EXPECT_FALSE(log.Log("k", "line"));
}

}  // namespace
}  // namespace placement::shared_ops
