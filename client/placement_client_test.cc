#include "client/placement_client.h"

#include <stdlib.h>
#include <unistd.h>

#include <string>

#include "client/progress_bar.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/v1/operation.pb.h"

namespace placement::client {
namespace {

using ::testing::HasSubstr;

TEST(PlacementClientTest, BackoffGrowsAndIsCapped) {
  RetryOptions options;
  options.initial_backoff = absl::Milliseconds(100);
  options.multiplier = 2.0;
  options.max_backoff = absl::Seconds(1);
  EXPECT_EQ(BackoffDelay(options, 0), absl::Milliseconds(100));
  EXPECT_EQ(BackoffDelay(options, 1), absl::Milliseconds(200));
  EXPECT_EQ(BackoffDelay(options, 3), absl::Milliseconds(800));
  EXPECT_EQ(BackoffDelay(options, 4), absl::Seconds(1));
  EXPECT_EQ(BackoffDelay(options, 40), absl::Seconds(1));
}

TEST(PlacementClientTest, KeepsTheServersDetails) {
  v1::Status details;
  details.set_code(3);
  details.set_message("graph.edges[0].dst: index 9 out of range");
  v1::BadRequest bad_request;
  v1::FieldViolation* violation = bad_request.add_field_violations();
  violation->set_field("graph.edges[0].dst");
  violation->set_description("index 9 out of range");
  details.add_details()->PackFrom(bad_request);
  v1::RetryInfo retry;
  retry.mutable_retry_delay()->set_seconds(2);
  details.add_details()->PackFrom(retry);

  absl::Status status = FromGrpcStatus(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                                    details.message(),
                                                    details.SerializeAsString()));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StatusLine(status), "INVALID_ARGUMENT: graph.edges[0].dst: index 9 out of range");
  auto violations = FieldViolationsOf(status);
  ASSERT_EQ(violations.size(), 1u);
  EXPECT_EQ(violations[0].first, "graph.edges[0].dst");
  EXPECT_EQ(RetryDelayOf(status), absl::Seconds(2));

  EXPECT_EQ(FromStatusProto(details).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(FromStatusProto(v1::Status()).ok());
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
}

TEST(PlacementClientTest, UnreachableServersAreUnavailable) {
  PlacementClient client({.target = "127.0.0.1:1",
                          .default_timeout = absl::Seconds(2),
                          .retry = {.max_attempts = 2, .initial_backoff = absl::Milliseconds(10)}});
  EXPECT_EQ(client.WaitForConnected(absl::Milliseconds(200)).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(client.ListAlgorithms().status().code(), absl::StatusCode::kUnavailable);
}

TEST(ProgressBarTest, RendersFractionStageAndBestMakespan) {
  v1::OperationProgress progress;
  progress.set_stage("mapping");
  progress.set_fraction(0.5);
  EXPECT_EQ(ProgressBar::Render(progress, 10), "[#####-----]  50% mapping");
  progress.set_best_makespan_ns(12'345'000);
  EXPECT_THAT(ProgressBar::Render(progress, 10), HasSubstr("best 12.345 ms"));
  EXPECT_EQ(ProgressBar::Render(v1::OperationProgress(), 4), "[----]   0% queued");
}

TEST(ProgressBarTest, DrawsNothingWhenDisabled) {
  std::FILE* sink = std::tmpfile();
  ASSERT_NE(sink, nullptr);
  {
    ProgressBar bar(sink, ProgressBar::Enabled(sink, "auto"));  // a file is not a terminal
    v1::OperationProgress progress;
    progress.set_fraction(0.3);
    bar.Update(progress);
  }
  EXPECT_EQ(std::ftell(sink), 0);
  std::fclose(sink);
}

std::string WriteTemp(const std::string& text) {
  char path[] = "/tmp/placement_client_test.XXXXXX";
  const int fd = mkstemp(path);
  if (fd >= 0) {
    const ssize_t written = write(fd, text.data(), text.size());
    (void)written;
    close(fd);
  }
  return path;
}

TEST(PlacementClientTest, ReadTokenFileTakesTheFirstLineTrimmed) {
  const std::string path = WriteTemp("  secret-token-value \nignored\n");
  absl::StatusOr<std::string> token = ReadTokenFile(path);
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "secret-token-value");
  unlink(path.c_str());

  const std::string empty = WriteTemp("\n");
  EXPECT_EQ(ReadTokenFile(empty).status().code(), absl::StatusCode::kInvalidArgument);
  unlink(empty.c_str());
  EXPECT_EQ(ReadTokenFile("/nonexistent/token").status().code(), absl::StatusCode::kNotFound);
}

TEST(PlacementClientTest, LoadTlsFilesEnablesTlsAndChecksPairs) {
  TlsOptions none;
  ASSERT_TRUE(LoadTlsFiles("", "", "", &none).ok());
  EXPECT_FALSE(none.enabled);

  const std::string ca = WriteTemp("-----BEGIN CERTIFICATE-----\n");
  TlsOptions tls;
  ASSERT_TRUE(LoadTlsFiles(ca, "", "", &tls).ok());
  EXPECT_TRUE(tls.enabled);
  EXPECT_THAT(tls.ca_pem, HasSubstr("BEGIN CERTIFICATE"));

  TlsOptions half;
  EXPECT_EQ(LoadTlsFiles("", ca, "", &half).code(), absl::StatusCode::kInvalidArgument);
  TlsOptions missing;
  EXPECT_EQ(LoadTlsFiles("/nonexistent/ca.pem", "", "", &missing).code(),
            absl::StatusCode::kNotFound);
  unlink(ca.c_str());
}

}  // namespace
}  // namespace placement::client
