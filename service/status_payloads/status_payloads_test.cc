#include "service/status_payloads/status_payloads.h"

#include "absl/strings/cord.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace placement::status_payloads {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

TEST(StatusPayloadsTest, RetryDelayRoundTripsToTheNanosecond) {
  const absl::Duration delay = absl::Seconds(3) + absl::Nanoseconds(250);
  const absl::Status status = WithRetryDelay(absl::UnavailableError("queue full"), delay);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(status.message(), "queue full");
  EXPECT_EQ(RetryDelayOf(status), delay);
  std::optional<v1::RetryInfo> info = RetryInfoOf(status);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->retry_delay().seconds(), 3);
  EXPECT_EQ(info->retry_delay().nanos(), 250);
}

TEST(StatusPayloadsTest, FieldViolationsRoundTripInOrder) {
  const absl::Status status = WithFieldViolations(
      absl::InvalidArgumentError("2 problems"),
      {{"graph.edges[3].dst", "out of range"}, {"cluster.devices", "is empty"}});
  EXPECT_THAT(FieldViolationsOf(status), ElementsAre(Pair("graph.edges[3].dst", "out of range"),
                                                    Pair("cluster.devices", "is empty")));
  std::optional<v1::BadRequest> bad_request = BadRequestOf(status);
  ASSERT_TRUE(bad_request.has_value());
  EXPECT_EQ(bad_request->field_violations_size(), 2);
}

TEST(StatusPayloadsTest, StatusWithoutPayloadsHasNone) {
  const absl::Status plain = absl::UnavailableError("down");
  EXPECT_FALSE(RetryInfoOf(plain).has_value());
  EXPECT_FALSE(RetryDelayOf(plain).has_value());
  EXPECT_FALSE(BadRequestOf(plain).has_value());
  EXPECT_TRUE(FieldViolationsOf(plain).empty());
}

// A payload that does not parse (e.g. from a peer speaking another version) is no payload, not a crash.
TEST(StatusPayloadsTest, GarbagePayloadsAreIgnored) {
  absl::Status status = absl::InvalidArgumentError("bad");
  status.SetPayload(kRetryInfoTypeUrl, absl::Cord("\xff\xff\xff"));
  status.SetPayload(kBadRequestTypeUrl, absl::Cord("\xff\xff\xff"));
  EXPECT_FALSE(RetryDelayOf(status).has_value());
  EXPECT_FALSE(BadRequestOf(status).has_value());
  EXPECT_TRUE(FieldViolationsOf(status).empty());
}

}  // namespace
}  // namespace placement::status_payloads
