#include "service/server/status_mapping.h"

#include <string>

#include "gtest/gtest.h"
#include "placement/v1/operation.pb.h"
#include "service/status_payloads/status_payloads.h"
#include "service/core/status_proto.h"

namespace placement::server {
namespace {

v1::Status DetailsOf(const grpc::Status& status) {
  v1::Status proto;
  EXPECT_TRUE(proto.ParseFromString(status.error_details()));
  return proto;
}

TEST(StatusMappingTest, OkIsOk) { EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok()); }

TEST(StatusMappingTest, CodesAndMessagesCarryOver) {
  for (absl::StatusCode code :
       {absl::StatusCode::kInvalidArgument, absl::StatusCode::kNotFound,
        absl::StatusCode::kDeadlineExceeded, absl::StatusCode::kUnavailable,
        absl::StatusCode::kResourceExhausted, absl::StatusCode::kAlreadyExists,
        absl::StatusCode::kInternal, absl::StatusCode::kCancelled}) {
    grpc::Status mapped = ToGrpcStatus(absl::Status(code, "why"));
    EXPECT_EQ(static_cast<int>(mapped.error_code()), static_cast<int>(code));
    EXPECT_EQ(mapped.error_message(), "why");
    EXPECT_TRUE(mapped.error_details().empty());
  }
}

TEST(StatusMappingTest, FieldViolationsBecomeABadRequestDetail) {
  absl::Status status = status_payloads::WithFieldViolations(
      absl::InvalidArgumentError("graph.edges[17].dst: index 912 out of range"),
      {{"graph.edges[17].dst", "index 912 out of range"}, {"options.algorithm", "unknown"}});
  grpc::Status mapped = ToGrpcStatus(status);
  EXPECT_EQ(mapped.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::Status details = DetailsOf(mapped);
  EXPECT_EQ(details.code(), 3);
  EXPECT_EQ(details.message(), mapped.error_message());
  ASSERT_EQ(details.details_size(), 1);
  v1::BadRequest bad_request;
  ASSERT_TRUE(details.details(0).UnpackTo(&bad_request));
  ASSERT_EQ(bad_request.field_violations_size(), 2);
  EXPECT_EQ(bad_request.field_violations(0).field(), "graph.edges[17].dst");
  EXPECT_EQ(bad_request.field_violations(1).field(), "options.algorithm");
}

TEST(StatusMappingTest, RetryDelayBecomesARetryInfoDetail) {
  grpc::Status mapped = ToGrpcStatus(
      status_payloads::WithRetryDelay(absl::UnavailableError("queue full"), absl::Milliseconds(1500)));
  EXPECT_EQ(mapped.error_code(), grpc::StatusCode::UNAVAILABLE);
  v1::Status details = DetailsOf(mapped);
  ASSERT_EQ(details.details_size(), 1);
  v1::RetryInfo retry;
  ASSERT_TRUE(details.details(0).UnpackTo(&retry));
  EXPECT_EQ(retry.retry_delay().seconds(), 1);
  EXPECT_EQ(retry.retry_delay().nanos(), 500'000'000);
}

TEST(StatusMappingTest, LongMessagesAreTruncated) {
  const std::string huge(100'000, 'x');
  grpc::Status mapped = ToGrpcStatus(absl::InvalidArgumentError(huge));
  EXPECT_LT(mapped.error_message().size(), core::kMaxStatusMessageBytes + 100);
  EXPECT_NE(mapped.error_message().find("(truncated)"), std::string::npos);
}

}  // namespace
}  // namespace placement::server
