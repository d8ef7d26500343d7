#include "service/server/access_control.h"

#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/status_payloads/status_payloads.h"
#include "service/clock/clock.h"
#include "service/server/service_metrics.h"

namespace placement::server {
namespace {

using ::testing::HasSubstr;

constexpr char kTokenA[] = "aaaaaaaaaaaaaaaaaaaa-token-a";
constexpr char kTokenB[] = "bbbbbbbbbbbbbbbbbbbb-token-b";

class AccessControlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char path[] = "/tmp/access_control_test.XXXXXX";
    const int fd = mkstemp(path);
    close(fd);
    path_ = path;
    std::ofstream(path_) << kTokenA << " team-a\n" << kTokenB << " team-b rate_qps=0\n";
    absl::StatusOr<std::unique_ptr<TokenAuthenticator>> auth =
        TokenAuthenticator::Create({.path = path_, .clock = &clock_});
    ASSERT_TRUE(auth.ok()) << auth.status();
    auth_ = *std::move(auth);
  }
  void TearDown() override { unlink(path_.c_str()); }

  FakeClock clock_;
  std::string path_;
  std::unique_ptr<TokenAuthenticator> auth_;
  ServiceMetrics metrics_;
};

TEST_F(AccessControlTest, WithoutAuthenticationEveryoneIsTheEmptyTenant) {
  AccessControl access(nullptr, {}, &clock_, &metrics_);
  EXPECT_EQ(*access.Admit(""), "");
  EXPECT_EQ(*access.Admit("Bearer whatever-is-ignored"), "");
  EXPECT_FALSE(access.authenticating());
}

TEST_F(AccessControlTest, CountsMissingAndInvalidCredentials) {
  AccessControl access(auth_.get(), {}, &clock_, &metrics_);
  EXPECT_EQ(*access.Admit(std::string("Bearer ") + kTokenA), "team-a");
  EXPECT_EQ(access.Admit("").status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(access.Admit("Bearer not-a-known-token-at-all").status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(access.Admit("Basic xyz").status().code(), absl::StatusCode::kUnauthenticated);
  const std::string scrape = metrics_.Serialize();
  EXPECT_THAT(scrape, HasSubstr("placement_auth_failures_total{reason=\"missing\"} 1"));
  EXPECT_THAT(scrape, HasSubstr("placement_auth_failures_total{reason=\"invalid\"} 2"));
}

TEST_F(AccessControlTest, RateLimitIsPerTenantWithTheFileOverridingTheDefault) {
  AccessControl access(auth_.get(), {.jobs = {}, .rate_qps = 1, .burst = 2}, &clock_, &metrics_);
  const std::string a = std::string("Bearer ") + kTokenA;
  const std::string b = std::string("Bearer ") + kTokenB;
  ASSERT_TRUE(access.Admit(a).ok());
  ASSERT_TRUE(access.Admit(a).ok());
  absl::StatusOr<std::string> refused = access.Admit(a);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(status_payloads::RetryDelayOf(refused.status()), absl::Seconds(1));
  // team-b's line says rate_qps=0: unlimited.
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(access.Admit(b).ok());
  EXPECT_THAT(metrics_.Serialize(),
              HasSubstr("placement_tenant_rejections_total{reason=\"rate\",tenant=\"team-a\"} 1"));
  clock_.Advance(absl::Seconds(1));
  EXPECT_TRUE(access.Admit(a).ok());
}

}  // namespace
}  // namespace placement::server
