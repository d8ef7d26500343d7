#include "service/server/auth_tokens.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/clock/clock.h"

namespace placement::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kTokenA[] = "aaaaaaaaaaaaaaaaaaaa-token-a";
constexpr char kTokenB[] = "bbbbbbbbbbbbbbbbbbbb-token-b";

TEST(ParseTokenFileTest, ReadsTokensTenantsCommentsAndOverrides) {
  absl::StatusOr<TokenTable> table = ParseTokenFile(
      "# a comment line\n"
      "\n"
      "aaaaaaaaaaaaaaaaaaaa-token-a  team-a   # trailing comment\n"
      "   \t\n"
      "bbbbbbbbbbbbbbbbbbbb-token-b\tteam-b max_running=2 max_queued=8 rate_qps=5.5 burst=20\r\n"
      "cccccccccccccccccccc-token-c  team-a\n");
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->tenant_by_token_sha256.size(), 3u);
  EXPECT_EQ(table->tenants, 2);
  EXPECT_EQ(table->tenant_by_token_sha256.at(TokenSha256(kTokenA)), "team-a");
  EXPECT_EQ(table->tenant_by_token_sha256.at(TokenSha256(kTokenB)), "team-b");
  ASSERT_TRUE(table->overrides.contains("team-b"));
  EXPECT_FALSE(table->overrides.contains("team-a"));
  const TenantLimits limits =
      table->overrides.at("team-b").ApplyTo({.jobs = {.max_running = 1, .max_queued = 1}, .rate_qps = 1});
  EXPECT_EQ(limits.jobs.max_running, 2);
  EXPECT_EQ(limits.jobs.max_queued, 8);
  EXPECT_DOUBLE_EQ(limits.rate_qps, 5.5);
  EXPECT_DOUBLE_EQ(limits.burst, 20);
}

TEST(ParseTokenFileTest, KeepsOnlyHashesOfTokens) {
  absl::StatusOr<TokenTable> table = ParseTokenFile("aaaaaaaaaaaaaaaaaaaa-token-a team-a\n");
  ASSERT_TRUE(table.ok());
  for (const auto& [hash, tenant] : table->tenant_by_token_sha256) {
    EXPECT_EQ(hash.size(), 64u);
    EXPECT_THAT(hash, Not(HasSubstr("token")));
  }
}

TEST(ParseTokenFileTest, EmptyFileHasNoTokens) {
  absl::StatusOr<TokenTable> table = ParseTokenFile("# nobody yet\n");
  ASSERT_TRUE(table.ok());
  EXPECT_TRUE(table->tenant_by_token_sha256.empty());
}

struct BadFile {
  std::string text;
  std::string error;
};

class ParseTokenFileErrorTest : public ::testing::TestWithParam<BadFile> {};

TEST_P(ParseTokenFileErrorTest, NamesTheLineNeverTheToken) {
  absl::StatusOr<TokenTable> table = ParseTokenFile(GetParam().text);
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(table.status().message()), HasSubstr(GetParam().error));
  EXPECT_THAT(std::string(table.status().message()), Not(HasSubstr("secret")));
}

INSTANTIATE_TEST_SUITE_P(
    Errors, ParseTokenFileErrorTest,
    ::testing::Values(
        BadFile{"# ok\nsecret-but-no-tenant-here\n", "line 2: expected `TOKEN TENANT"},
        BadFile{"secret-short team\n", "line 1: the token must have 16 to 512"},
        BadFile{"secret-aaaaaaaaaaaaaaaa team/a\n", "line 1: the tenant may only use"},
        BadFile{"secret-aaaaaaaaaaaaaaaa t\nsecret-aaaaaaaaaaaaaaaa u\n",
                "line 2: this token appears on an earlier line too"},
        BadFile{"secret-aaaaaaaaaaaaaaaa t max_running=-1\n", "max_running must be a count"},
        BadFile{"secret-aaaaaaaaaaaaaaaa t rate_qps=fast\n", "rate_qps must be a number"},
        BadFile{"secret-aaaaaaaaaaaaaaaa t colour=blue\n", "unknown field \"colour\""},
        BadFile{"secret-aaaaaaaaaaaaaaaa " + std::string(65, 't') + "\n",
                "the tenant must have 1 to 64"}));

TEST(BearerTokenTest, AcceptsTheBearerSchemeInAnyCase) {
  EXPECT_EQ(*BearerToken("Bearer abc"), "abc");
  EXPECT_EQ(*BearerToken("bearer abc "), "abc");
  EXPECT_EQ(*BearerToken("BEARER abc"), "abc");
}

TEST(BearerTokenTest, MissingOrOtherSchemesAreUnauthenticated) {
  EXPECT_EQ(BearerToken("").status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(BearerToken("").status().message()), HasSubstr("missing"));
  EXPECT_EQ(BearerToken("Basic abc").status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(BearerToken("Bearer").status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(BearerToken("abc").status().code(), absl::StatusCode::kUnauthenticated);
}

// A tokens file in a fresh temporary directory, replaced atomically (write + rename), as a secret
// volume or a careful operator would.
class TokensFile {
 public:
  TokensFile() {
    char dir[] = "/tmp/auth_tokens_test.XXXXXX";
    dir_ = mkdtemp(dir);
    path_ = dir_ + "/tokens";
  }
  ~TokensFile() {
    unlink(path_.c_str());
    unlink((path_ + ".new").c_str());
    rmdir(dir_.c_str());
  }
  void Write(const std::string& text) {
    {
      std::ofstream out(path_ + ".new", std::ios::trunc);
      out << text;
    }
    rename((path_ + ".new").c_str(), path_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string dir_;
  std::string path_;
};

TEST(TokenAuthenticatorTest, AuthenticatesKnownTokensOnly) {
  TokensFile file;
  file.Write(std::string(kTokenA) + " team-a\n");
  absl::StatusOr<std::unique_ptr<TokenAuthenticator>> auth =
      TokenAuthenticator::Create({.path = file.path()});
  ASSERT_TRUE(auth.ok()) << auth.status();
  EXPECT_EQ(*(*auth)->Authenticate(std::string("Bearer ") + kTokenA), "team-a");
  absl::StatusOr<std::string> wrong = (*auth)->Authenticate(std::string("Bearer ") + kTokenB);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(wrong.status().message()), Not(HasSubstr(kTokenB)));
  EXPECT_EQ((*auth)->Authenticate("").status().code(), absl::StatusCode::kUnauthenticated);
}

TEST(TokenAuthenticatorTest, MissingOrInvalidFileFailsCreate) {
  EXPECT_EQ(TokenAuthenticator::Create({.path = "/nonexistent/tokens"}).status().code(),
            absl::StatusCode::kNotFound);
  TokensFile file;
  file.Write("short tenant\n");
  EXPECT_EQ(TokenAuthenticator::Create({.path = file.path()}).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A file without tokens is refused at start as on a reload (it would refuse every caller).
  for (const char* empty : {"", "# only a comment\n", "\n\n"}) {
    file.Write(empty);
    absl::StatusOr<std::unique_ptr<TokenAuthenticator>> none =
        TokenAuthenticator::Create({.path = file.path()});
    EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument) << empty;
    EXPECT_THAT(std::string(none.status().message()), HasSubstr("no tokens"));
  }
}

TEST(TokenAuthenticatorTest, ReloadsAChangedFileOncePerPollInterval) {
  FakeClock clock;
  TokensFile file;
  file.Write(std::string(kTokenA) + " team-a\n");
  absl::StatusOr<std::unique_ptr<TokenAuthenticator>> auth = TokenAuthenticator::Create(
      {.path = file.path(), .poll_interval = absl::Seconds(1), .clock = &clock});
  ASSERT_TRUE(auth.ok());
  const std::string bearer_a = std::string("Bearer ") + kTokenA;
  const std::string bearer_b = std::string("Bearer ") + kTokenB;

  file.Write(std::string(kTokenB) + " team-b\n");
  // Within the poll interval the old tokens still hold.
  EXPECT_TRUE((*auth)->Authenticate(bearer_a).ok());
  EXPECT_FALSE((*auth)->Authenticate(bearer_b).ok());

  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(*(*auth)->Authenticate(bearer_b), "team-b");
  EXPECT_EQ((*auth)->Authenticate(bearer_a).status().code(), absl::StatusCode::kUnauthenticated);
}

TEST(TokenAuthenticatorTest, ABrokenFileKeepsThePreviousTokens) {
  FakeClock clock;
  TokensFile file;
  file.Write(std::string(kTokenA) + " team-a\n");
  absl::StatusOr<std::unique_ptr<TokenAuthenticator>> auth = TokenAuthenticator::Create(
      {.path = file.path(), .poll_interval = absl::ZeroDuration(), .clock = &clock});
  ASSERT_TRUE(auth.ok());
  file.Write("half-written\n");
  EXPECT_EQ(*(*auth)->Authenticate(std::string("Bearer ") + kTokenA), "team-a");
  EXPECT_EQ((*auth)->Reload().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*(*auth)->Authenticate(std::string("Bearer ") + kTokenA), "team-a");
}

TEST(TokenAuthenticatorTest, ReloadReadsTheFileAtOnce) {
  FakeClock clock;
  TokensFile file;
  file.Write(std::string(kTokenA) + " team-a\n");
  absl::StatusOr<std::unique_ptr<TokenAuthenticator>> auth = TokenAuthenticator::Create(
      {.path = file.path(), .poll_interval = absl::Hours(1), .clock = &clock});
  ASSERT_TRUE(auth.ok());
  file.Write(std::string(kTokenB) + " team-b rate_qps=3\n");
  EXPECT_FALSE((*auth)->Authenticate(std::string("Bearer ") + kTokenB).ok());
  ASSERT_TRUE((*auth)->Reload().ok());
  EXPECT_EQ(*(*auth)->Authenticate(std::string("Bearer ") + kTokenB), "team-b");
  EXPECT_DOUBLE_EQ((*auth)->LimitsFor("team-b", {.jobs = {}, .rate_qps = 1}).rate_qps, 3);
  EXPECT_DOUBLE_EQ((*auth)->LimitsFor("team-a", {.jobs = {}, .rate_qps = 1}).rate_qps, 1);
  EXPECT_EQ((*auth)->token_count(), 1);
  EXPECT_EQ((*auth)->tenant_count(), 1);
}

}  // namespace
}  // namespace placement::server
