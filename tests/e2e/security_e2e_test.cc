// End-to-end tests of the server's security and limits: TLS and mutual TLS (a test CA made at test
// time with the `openssl` command), the refusal to serve plaintext without --insecure, bearer tokens
// (missing, wrong, file reloads, SIGHUP), tenant isolation of operations, per-tenant limits (queued,
// running, request rate) and the request-size limit flags. The real placement_server, placementctl and
// client library over real sockets; slow jobs use `testing_wait` (--testing_algorithms).
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "client/placement_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/client_options.h"
#include "tests/e2e/server_process.h"
#include "tests/e2e/temp_dir.h"
#include "tests/e2e/test_requests.h"
#include "tests/testutil/random_graph.h"

namespace placement::e2e {
namespace {

using client::ClientOptions;
using client::PlacementClient;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

constexpr char kTokenA[] = "team-a-token-0123456789abcdef";
constexpr char kTokenB[] = "team-b-token-fedcba9876543210";
constexpr char kTokenC[] = "team-c-token-00112233445566778899";

std::string FindOpenssl() {
  for (const char* dir : {"/usr/bin", "/usr/local/bin", "/bin"}) {
    const std::string path = absl::StrCat(dir, "/openssl");
    if (access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

// A CA, a server certificate for 127.0.0.1 / localhost and a client certificate, all signed by the
// CA, plus a second, unrelated CA. EC P-256 keys: quick to make.
struct TestPki {
  std::string ca_cert, server_cert, server_key, client_cert, client_key, other_ca_cert;
};

absl::StatusOr<TestPki> MakeTestPki(const TempDir& dir) {
  const std::string openssl = FindOpenssl();
  if (openssl.empty()) return absl::NotFoundError("the openssl command is not installed");
  auto run = [&](std::vector<std::string> args) -> absl::Status {
    args.insert(args.begin(), openssl);
    CommandResult result = RunCommand(args);
    if (result.exit_status != 0) {
      return absl::InternalError(absl::StrCat(absl::StrJoin(args, " "), ": ", result.err));
    }
    return absl::OkStatus();
  };
  const std::vector<std::string> ec = {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                                       "-nodes"};
  auto self_signed = [&](const std::string& name, const std::string& cn) {
    std::vector<std::string> args = {"req", "-x509"};
    args.insert(args.end(), ec.begin(), ec.end());
    args.insert(args.end(), {"-keyout", dir.File(name + ".key"), "-out", dir.File(name + ".pem"),
                             "-days", "3650", "-subj", "/CN=" + cn});
    return run(args);
  };
  auto signed_by_ca = [&](const std::string& name, const std::string& cn,
                          const std::string& extensions) -> absl::Status {
    std::vector<std::string> req = {"req"};
    req.insert(req.end(), ec.begin(), ec.end());
    req.insert(req.end(), {"-keyout", dir.File(name + ".key"), "-out", dir.File(name + ".csr"),
                           "-subj", "/CN=" + cn});
    if (absl::Status s = run(req); !s.ok()) return s;
    const std::string ext = dir.Write(name + ".ext", extensions);
    return run({"x509", "-req", "-in", dir.File(name + ".csr"), "-CA", dir.File("ca.pem"),
                "-CAkey", dir.File("ca.key"), "-set_serial", "7", "-days", "3650", "-extfile",
                ext, "-out", dir.File(name + ".pem")});
  };
  if (absl::Status s = self_signed("ca", "placement test CA"); !s.ok()) return s;
  if (absl::Status s = self_signed("other_ca", "unrelated CA"); !s.ok()) return s;
  if (absl::Status s = signed_by_ca("server", "localhost",
                                    "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                    "extendedKeyUsage=serverAuth\n");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = signed_by_ca("client", "placement test client",
                                    "extendedKeyUsage=clientAuth\n");
      !s.ok()) {
    return s;
  }
  return TestPki{dir.File("ca.pem"),     dir.File("server.pem"), dir.File("server.key"),
                 dir.File("client.pem"), dir.File("client.key"), dir.File("other_ca.pem")};
}

ClientOptions TlsClientOptions(const ServerProcess& server, const TestPki& pki, bool client_cert,
                         const std::string& token = "") {
  ClientOptions options = OneAttemptOptions(server, token);
  options.default_timeout = absl::Seconds(10);
  const absl::Status loaded =
      client::LoadTlsFiles(pki.ca_cert, client_cert ? pki.client_cert : "",
                           client_cert ? pki.client_key : "", &options.tls);
  EXPECT_TRUE(loaded.ok()) << loaded;
  return options;
}

std::string TokensFile(const TempDir& dir, const std::string& extra = "") {
  return dir.Write("tokens", absl::StrCat("# test tokens\n", kTokenA, " team-a\n", kTokenB,
                                          " team-b\n", extra));
}

// Polls the operation until its stage is not "queued" (a worker took it) or `timeout` passes.
bool AwaitStarted(PlacementClient& client, const std::string& name, absl::Duration timeout) {
  const absl::Time until = absl::Now() + timeout;
  while (absl::Now() < until) {
    absl::StatusOr<v1::Operation> op = client.GetOperation(name);
    if (!op.ok()) return false;
    if (op->done() || op->metadata().stage() != "queued") return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return false;
}

int Occurrences(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Waits until the server's log holds `what` at least `count` times.
bool AwaitLogCount(const ServerProcess& server, const std::string& what, int count) {
  const absl::Time until = absl::Now() + absl::Seconds(20);
  while (absl::Now() < until) {
    if (Occurrences(server.Log(), what) >= count) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return false;
}

// ---- Transport security ----

class TlsE2ETest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("security_e2e");
    absl::StatusOr<TestPki> pki = MakeTestPki(*dir_);
    if (pki.ok()) {
      pki_ = new TestPki(*std::move(pki));
    } else {
      pki_error_ = new std::string(pki.status().ToString());
    }
  }
  static void TearDownTestSuite() {
    delete pki_;
    delete pki_error_;
    delete dir_;
    pki_ = nullptr;
    pki_error_ = nullptr;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (pki_ == nullptr && FindOpenssl().empty()) GTEST_SKIP() << *pki_error_;
    ASSERT_NE(pki_, nullptr) << *pki_error_;
  }

  static TempDir* dir_;
  static TestPki* pki_;
  static std::string* pki_error_;
};

TempDir* TlsE2ETest::dir_ = nullptr;
TestPki* TlsE2ETest::pki_ = nullptr;
std::string* TlsE2ETest::pki_error_ = nullptr;

TEST_F(TlsE2ETest, ServesTlsClientsAndNoPlaintextOnes) {
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(
      {"--tls_cert=" + pki_->server_cert, "--tls_key=" + pki_->server_key});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_THAT((*server)->Log(), HasSubstr("transport: TLS"));

  PlacementClient tls(TlsClientOptions(**server, *pki_, /*client_cert=*/false));
  EXPECT_TRUE(tls.ListAlgorithms().ok());
  absl::StatusOr<v1::PlaceResponse> placed = tls.Place(RandomRequest(30, 1, "m_etf", 2, 2.0));
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ(placed->placement().device_size(), 30);

  PlacementClient plaintext(OneAttemptOptions(**server));
  EXPECT_EQ(plaintext.ListAlgorithms().status().code(), absl::StatusCode::kUnavailable);

  // A server certificate the client's CA did not sign is refused.
  ClientOptions wrong_ca = OneAttemptOptions(**server);
  ASSERT_TRUE(client::LoadTlsFiles(pki_->other_ca_cert, "", "", &wrong_ca.tls).ok());
  wrong_ca.default_timeout = absl::Seconds(5);
  EXPECT_EQ(PlacementClient(wrong_ca).ListAlgorithms().status().code(),
            absl::StatusCode::kUnavailable);

  // placementctl speaks TLS with --tls_ca.
  CommandResult health = RunCommand({PlacementctlBinary(), "--server=" + (*server)->address(),
                                     "--tls_ca=" + pki_->ca_cert, "health"});
  EXPECT_EQ(health.exit_status, 0) << health.err;
  StopServer(**server);
}

// Issue 14: a plaintext placementctl against a TLS server, or one with the wrong CA, says it is a
// TLS / certificate problem (not only "cannot connect").
TEST_F(TlsE2ETest, PlacementctlNamesATlsProblem) {
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(
      {"--tls_cert=" + pki_->server_cert, "--tls_key=" + pki_->server_key,
       "--shutdown_grace=1s"});
  ASSERT_TRUE(server.ok()) << server.status();
  CommandResult plaintext = RunCommand({PlacementctlBinary(), "--server=" + (*server)->address(),
                                        "--connect_timeout=1s", "algorithms"});
  EXPECT_EQ(plaintext.exit_status, 2);
  EXPECT_THAT(plaintext.err, HasSubstr("TLS problem"));
  EXPECT_THAT(plaintext.err, HasSubstr("--tls_ca"));
  CommandResult wrong_ca = RunCommand({PlacementctlBinary(), "--server=" + (*server)->address(),
                                       "--tls_ca=" + pki_->other_ca_cert,
                                       "--connect_timeout=1s", "health"});
  EXPECT_EQ(wrong_ca.exit_status, 2);
  EXPECT_THAT(wrong_ca.err, HasSubstr("certificate"));
  // Issue 21: placementctl's own line only, not gRPC's raw log beside it.
  EXPECT_FALSE(HasGrpcLogLine(plaintext.err)) << plaintext.err;
  EXPECT_FALSE(HasGrpcLogLine(wrong_ca.err)) << wrong_ca.err;
  StopServer(**server);
}

// Issue 14: an expired server certificate is a failed start naming its dates (clients would only see
// failed handshakes).
TEST_F(TlsE2ETest, AnExpiredCertificateIsAFailedStartNamingItsDates) {
  TempDir dir("security_e2e");
  const std::string openssl = FindOpenssl();
  const std::string fresh = dir.File("fresh.pem");
  const std::string expired = dir.File("expired.pem");
  ASSERT_EQ(RunCommand({openssl, "req", "-x509", "-key", pki_->server_key, "-days", "1", "-subj",
                        "/CN=localhost", "-out", fresh})
                .exit_status,
            0);
  // Re-signed with an end date a day in the past.
  ASSERT_EQ(RunCommand({openssl, "x509", "-in", fresh, "-signkey", pki_->server_key, "-days", "-1",
                        "-out", expired})
                .exit_status,
            0);
  CommandResult result =
      RunCommand({"/usr/bin/timeout", "10", ServerBinary(), "--tls_cert=" + expired,
                  "--tls_key=" + pki_->server_key, "--host=127.0.0.1", "--port=0",
                  "--metrics_port=-1"});
  EXPECT_EQ(result.exit_status, 1);
  EXPECT_THAT(result.err, HasSubstr("has expired (valid from "));
  EXPECT_THAT(result.err, Not(HasSubstr("listening on")));
}

TEST_F(TlsE2ETest, MutualTlsRejectsClientsWithoutACertificate) {
  TempDir dir("security_e2e");
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(
      {"--tls_cert=" + pki_->server_cert, "--tls_key=" + pki_->server_key,
       "--tls_client_ca=" + pki_->ca_cert, "--auth_tokens=" + TokensFile(dir),
       // The refused handshake's connection keeps gRPC's Shutdown waiting for the whole grace.
       "--shutdown_grace=2s"});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_THAT((*server)->Log(), HasSubstr("transport: mutual TLS"));

  PlacementClient no_cert(TlsClientOptions(**server, *pki_, /*client_cert=*/false, kTokenA));
  EXPECT_EQ(no_cert.ListAlgorithms().status().code(), absl::StatusCode::kUnavailable);

  // With a certificate and the token (sent as call credentials over TLS): served.
  PlacementClient with_cert(TlsClientOptions(**server, *pki_, /*client_cert=*/true, kTokenA));
  absl::StatusOr<v1::ListAlgorithmsResponse> listed = with_cert.ListAlgorithms();
  EXPECT_TRUE(listed.ok()) << listed.status();
  // Mutual TLS does not replace the token.
  PlacementClient cert_no_token(TlsClientOptions(**server, *pki_, /*client_cert=*/true));
  EXPECT_EQ(cert_no_token.ListAlgorithms().status().code(),
            absl::StatusCode::kUnauthenticated);

  CommandResult ctl = RunCommand({PlacementctlBinary(), "--server=" + (*server)->address(),
                                  "--tls_ca=" + pki_->ca_cert, "--tls_cert=" + pki_->client_cert,
                                  "--tls_key=" + pki_->client_key,
                                  "--token_file=" + dir.Write("token_a", kTokenA), "algorithms"});
  EXPECT_EQ(ctl.exit_status, 0) << ctl.err;
  EXPECT_THAT(ctl.out, HasSubstr("pardnn"));
  StopServer(**server);
}

TEST_F(TlsE2ETest, BadSecurityFlagsStopTheServerWithAClearMessage) {
  struct Case {
    std::vector<std::string> flags;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--noinsecure"}, "refusing to serve without transport security"},
      {{"--insecure", "--tls_cert=" + pki_->server_cert, "--tls_key=" + pki_->server_key},
       "--insecure contradicts"},
      {{"--tls_cert=" + pki_->server_cert}, "--tls_cert and --tls_key go together"},
      {{"--tls_cert=" + pki_->server_cert, "--tls_key=" + pki_->client_key},
       "does not match the certificate"},
      {{"--tls_cert=" + pki_->server_key, "--tls_key=" + pki_->server_key},
       "holds no PEM certificate"},
      {{"--tls_cert=/nonexistent.pem", "--tls_key=" + pki_->server_key}, "cannot read"},
      {{"--insecure", "--auth_tokens=/nonexistent/tokens"}, "--auth_tokens: cannot read"},
      {{"--insecure", "--tenant_max_queued=-1"}, "--tenant_max_queued"},
      {{"--insecure", "--max_ops=0"}, "--max_ops"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::unique_ptr<ServerProcess>> server =
        ServerProcess::Start(c.flags, absl::Seconds(30));
    ASSERT_FALSE(server.ok()) << absl::StrJoin(c.flags, " ") << " started";
    EXPECT_THAT(std::string(server.status().message()), HasSubstr(c.message))
        << absl::StrJoin(c.flags, " ");
  }
}

// ---- Tokens ----

TEST(AuthE2ETest, MissingOrWrongTokensAreUnauthenticatedAndHealthNeedsNone) {
  TempDir dir("security_e2e");
  absl::StatusOr<std::unique_ptr<ServerProcess>> server =
      ServerProcess::Start({"--auth_tokens=" + TokensFile(dir)});
  ASSERT_TRUE(server.ok()) << server.status();

  PlacementClient anonymous(OneAttemptOptions(**server));
  absl::Status missing = anonymous.ListAlgorithms().status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(missing.message()), HasSubstr("missing credentials"));
  EXPECT_EQ(anonymous.GetOperation("operations/0123").status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(anonymous.Place(RandomRequest(10, 1, "m_etf", 2, 2.0)).status().code(),
            absl::StatusCode::kUnauthenticated);
  // Probes need no token.
  EXPECT_EQ(anonymous.CheckHealth("").value_or(client::ServingStatus::kUnknown),
            client::ServingStatus::kServing);

  PlacementClient wrong(OneAttemptOptions(**server, "not-a-token-of-this-server"));
  absl::Status invalid = wrong.ListAlgorithms().status();
  EXPECT_EQ(invalid.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(invalid.message()), Not(HasSubstr("not-a-token")));

  PlacementClient team_a(OneAttemptOptions(**server, kTokenA));
  EXPECT_TRUE(team_a.ListAlgorithms().ok());
  absl::StatusOr<v1::PlaceResponse> placed = team_a.Place(RandomRequest(10, 1, "m_etf", 2, 2.0));
  EXPECT_TRUE(placed.ok()) << placed.status();

  absl::StatusOr<std::string> metrics = ScrapeMetrics((*server)->metrics_port());
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(MetricValue(*metrics, "placement_auth_failures_total{reason=\"missing\"}"), 3);
  EXPECT_EQ(MetricValue(*metrics, "placement_auth_failures_total{reason=\"invalid\"}"), 1);
  // The log names the tenant, never a token.
  // (The log reaches the test through a pipe that another thread reads: wait for the line.)
  EXPECT_TRUE((*server)->WaitForLog("tenant=team-a", absl::Seconds(10))) << (*server)->Log();
  EXPECT_THAT((*server)->Log(), Not(HasSubstr(kTokenA)));

  // placementctl: --token_file, and UNAUTHENTICATED (exit 1) without it.
  CommandResult with_token = RunCommand({PlacementctlBinary(), "--server=" + (*server)->address(),
                                         "--token_file=" + dir.Write("t", kTokenB), "algorithms"});
  EXPECT_EQ(with_token.exit_status, 0) << with_token.err;
  CommandResult without = RunCommand(
      {PlacementctlBinary(), "--server=" + (*server)->address(), "algorithms"});
  EXPECT_EQ(without.exit_status, 1);
  EXPECT_THAT(without.err, HasSubstr("UNAUTHENTICATED"));
  StopServer(**server);
}

TEST(AuthE2ETest, AChangedTokensFileIsReloaded) {
  TempDir dir("security_e2e");
  absl::StatusOr<std::unique_ptr<ServerProcess>> server =
      ServerProcess::Start({"--auth_tokens=" + TokensFile(dir), "--auth_tokens_poll=0s"});
  ASSERT_TRUE(server.ok()) << server.status();
  PlacementClient team_a(OneAttemptOptions(**server, kTokenA));
  PlacementClient team_c(OneAttemptOptions(**server, kTokenC));
  ASSERT_TRUE(team_a.ListAlgorithms().ok());
  ASSERT_EQ(team_c.ListAlgorithms().status().code(), absl::StatusCode::kUnauthenticated);

  // team-a's token is revoked, team-c's added.
  dir.Write("tokens", absl::StrCat(kTokenB, " team-b\n", kTokenC, " team-c\n"));
  EXPECT_TRUE(team_c.ListAlgorithms().ok());
  EXPECT_EQ(team_a.ListAlgorithms().status().code(), absl::StatusCode::kUnauthenticated);

  // A broken file keeps the tokens in force.
  dir.Write("tokens", "this line is broken\n");
  EXPECT_TRUE(team_c.ListAlgorithms().ok());
  EXPECT_TRUE((*server)->WaitForLog("keeping the previous tokens", absl::Seconds(10)))
      << (*server)->Log();
  StopServer(**server);
}

TEST(AuthE2ETest, SighupReloadsTheTokensFile) {
  TempDir dir("security_e2e");
  absl::StatusOr<std::unique_ptr<ServerProcess>> server =
      ServerProcess::Start({"--auth_tokens=" + TokensFile(dir), "--auth_tokens_poll=1h"});
  ASSERT_TRUE(server.ok()) << server.status();
  PlacementClient team_c(OneAttemptOptions(**server, kTokenC));
  dir.Write("tokens", absl::StrCat(kTokenC, " team-c\n"));
  // The file is not polled for an hour: only SIGHUP makes the server read it.
  EXPECT_EQ(team_c.ListAlgorithms().status().code(), absl::StatusCode::kUnauthenticated);
  (*server)->Signal(SIGHUP);
  ASSERT_TRUE(AwaitLogCount(**server, "auth tokens loaded", 2)) << (*server)->Log();
  EXPECT_TRUE(team_c.ListAlgorithms().ok());
  EXPECT_EQ(PlacementClient(OneAttemptOptions(**server, kTokenA)).ListAlgorithms().status().code(),
            absl::StatusCode::kUnauthenticated);
  StopServer(**server);
}

// ---- Tenants ----

TEST(TenantE2ETest, OperationsAreInvisibleToOtherTenantsAndSharedJobsSurviveTheirCancel) {
  TempDir dir("security_e2e");
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(
      {"--auth_tokens=" + TokensFile(dir), "--workers=1", "--testing_algorithms"});
  ASSERT_TRUE(server.ok()) << server.status();
  PlacementClient team_a(OneAttemptOptions(**server, kTokenA));
  PlacementClient team_b(OneAttemptOptions(**server, kTokenB));

  const v1::PlaceRequest slow = SlowRequest(FreshSeed(), absl::Seconds(2));
  absl::StatusOr<v1::Operation> a_op = team_a.Submit(slow);
  ASSERT_TRUE(a_op.ok()) << a_op.status();
  // Names are 128 random bits, not counters.
  EXPECT_THAT(a_op->name(), MatchesRegex("operations/[0-9a-f]{32}"));

  EXPECT_EQ(team_b.GetOperation(a_op->name()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(team_b.WaitOperation(a_op->name(), absl::Seconds(1)).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(team_b.CancelOperation(a_op->name()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(team_b.WatchOperation(a_op->name(), nullptr, absl::Now() + absl::Seconds(5))
                .status()
                .code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(team_a.GetOperation(a_op->name()).ok());

  // Team b asks for the same computation: it joins a's job (one solve) under its own operation...
  absl::StatusOr<v1::Operation> b_op = team_b.Submit(slow);
  ASSERT_TRUE(b_op.ok()) << b_op.status();
  EXPECT_NE(b_op->name(), a_op->name());
  // ...and a cancelling its operation does not cancel b's.
  ASSERT_TRUE(team_a.CancelOperation(a_op->name()).ok());
  absl::StatusOr<v1::Operation> b_done =
      team_b.WaitUntilDone(b_op->name(), absl::Now() + absl::Seconds(30));
  ASSERT_TRUE(b_done.ok()) << b_done.status();
  EXPECT_TRUE(b_done->has_response()) << b_done->DebugString();
  EXPECT_EQ(b_done->response().placement().provenance().cache(), v1::COALESCED);
  absl::StatusOr<v1::Operation> a_done = team_a.GetOperation(a_op->name());
  ASSERT_TRUE(a_done.ok());
  EXPECT_EQ(a_done->error().code(), static_cast<int>(absl::StatusCode::kCancelled));

  // Results hold no secrets: another tenant's identical request is a cache hit.
  absl::StatusOr<v1::PlaceResponse> hit = team_a.Place(slow);
  ASSERT_TRUE(hit.ok()) << hit.status();
  EXPECT_EQ(hit->placement().provenance().cache(), v1::HIT);
  StopServer(**server);
}

TEST(TenantE2ETest, QueuedAndRunningLimitsHoldOneTenantWhileAnotherIsServed) {
  TempDir dir("security_e2e");
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(
      {"--auth_tokens=" + TokensFile(dir), "--workers=2", "--testing_algorithms",
       "--tenant_max_running=1", "--tenant_max_queued=1", "--retry_delay=4s"});
  ASSERT_TRUE(server.ok()) << server.status();
  PlacementClient team_a(OneAttemptOptions(**server, kTokenA));
  PlacementClient team_b(OneAttemptOptions(**server, kTokenB));

  absl::StatusOr<v1::Operation> a1 = team_a.Submit(SlowRequest(FreshSeed(), absl::Minutes(5)));
  ASSERT_TRUE(a1.ok()) << a1.status();
  ASSERT_TRUE(AwaitStarted(team_a, a1->name(), absl::Seconds(30)));
  // a2 waits although a worker is free: team-a may run one job at a time.
  absl::StatusOr<v1::Operation> a2 = team_a.Submit(SlowRequest(FreshSeed(), absl::Minutes(5)));
  ASSERT_TRUE(a2.ok()) << a2.status();
  // a3 exceeds team-a's queue.
  absl::StatusOr<v1::Operation> a3 = team_a.Submit(SlowRequest(FreshSeed(), absl::Minutes(5)));
  ASSERT_EQ(a3.status().code(), absl::StatusCode::kResourceExhausted) << a3.status();
  EXPECT_THAT(std::string(a3.status().message()), HasSubstr("tenant \"team-a\""));
  EXPECT_EQ(client::RetryDelayOf(a3.status()), absl::Seconds(4));

  // team-b gets the free worker (had a2 taken it, b1 would stay queued behind a1 and a2).
  absl::StatusOr<v1::Operation> b1 = team_b.Submit(SlowRequest(FreshSeed(), absl::Minutes(5)));
  ASSERT_TRUE(b1.ok()) << b1.status();
  EXPECT_TRUE(AwaitStarted(team_b, b1->name(), absl::Seconds(30)));
  absl::StatusOr<v1::Operation> a2_now = team_a.GetOperation(a2->name());
  ASSERT_TRUE(a2_now.ok());
  EXPECT_EQ(a2_now->metadata().stage(), "queued");

  absl::StatusOr<std::string> metrics = ScrapeMetrics((*server)->metrics_port());
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(MetricValue(*metrics,
                        "placement_tenant_rejections_total{reason=\"queued\",tenant=\"team-a\"}"),
            1);
  EXPECT_EQ(MetricValue(*metrics, "placement_jobs_running"), 2);

  for (const absl::StatusOr<v1::Operation>* op : {&a1, &a2}) {
    EXPECT_TRUE(team_a.CancelOperation((*op)->name()).ok());
  }
  EXPECT_TRUE(team_b.CancelOperation(b1->name()).ok());
  StopServer(**server);
}

TEST(TenantE2ETest, RequestRateIsLimitedPerTenantWithOverridesFromTheTokensFile) {
  TempDir dir("security_e2e");
  // team-c's line lifts the rate limit for team-c.
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(
      {"--auth_tokens=" + TokensFile(dir, absl::StrCat(kTokenC, " team-c rate_qps=0\n")),
       "--tenant_rate_qps=0.01", "--tenant_burst=3"});
  ASSERT_TRUE(server.ok()) << server.status();
  PlacementClient team_a(OneAttemptOptions(**server, kTokenA));
  PlacementClient team_b(OneAttemptOptions(**server, kTokenB));
  PlacementClient team_c(OneAttemptOptions(**server, kTokenC));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(team_a.ListAlgorithms().ok()) << i;
  absl::Status limited = team_a.ListAlgorithms().status();
  ASSERT_EQ(limited.code(), absl::StatusCode::kResourceExhausted) << limited;
  EXPECT_THAT(std::string(limited.message()), HasSubstr("exceeded its request rate"));
  std::optional<absl::Duration> retry = client::RetryDelayOf(limited);
  ASSERT_TRUE(retry.has_value());
  EXPECT_GT(*retry, absl::Seconds(1));
  // Other tenants still get served.
  EXPECT_TRUE(team_b.ListAlgorithms().ok());
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(team_c.ListAlgorithms().ok()) << i;

  absl::StatusOr<std::string> metrics = ScrapeMetrics((*server)->metrics_port());
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(MetricValue(*metrics,
                        "placement_tenant_rejections_total{reason=\"rate\",tenant=\"team-a\"}"),
            1);
  StopServer(**server);
}

// ---- Request limits ----

TEST(LimitsE2ETest, EachLimitFlagGivesItsOwnClearError) {
  absl::StatusOr<std::unique_ptr<ServerProcess>> server =
      ServerProcess::Start({"--max_ops=12", "--max_edges=40", "--max_devices=3",
                            "--max_name_bytes=16", "--max_message_bytes=65536"});
  ASSERT_TRUE(server.ok()) << server.status();
  PlacementClient client(OneAttemptOptions(**server));
  auto place_error = [&](const v1::PlaceRequest& request) {
    return client.Place(request).status();
  };

  EXPECT_TRUE(client.Place(RandomRequest(10, 1, "m_etf", 2, 2.0)).ok());

  absl::Status ops = place_error(RandomRequest(13, 1, "m_etf", 2, 2.0));
  EXPECT_EQ(ops.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ops.message()), HasSubstr("13 ops exceed the limit of 12"));

  v1::PlaceRequest many_edges = RandomRequest(12, 1, "m_etf", 2, 2.0);
  while (many_edges.graph().edges_size() <= 40) {
    *many_edges.mutable_graph()->add_edges() = many_edges.graph().edges(0);
  }
  absl::Status edges = place_error(many_edges);
  EXPECT_EQ(edges.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(edges.message()), HasSubstr("edges exceed the limit of 40"));

  v1::PlaceRequest many_devices = RandomRequest(10, 1, "m_etf", 2, 2.0);
  while (many_devices.cluster().devices_size() <= 3) {
    v1::Device* device = many_devices.mutable_cluster()->add_devices();
    *device = many_devices.cluster().devices(0);
    device->set_name(absl::StrCat("extra", many_devices.cluster().devices_size()));
  }
  absl::Status devices = place_error(many_devices);
  EXPECT_EQ(devices.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(devices.message()), HasSubstr("devices exceed the limit of 3"));

  v1::PlaceRequest long_name = RandomRequest(10, 1, "m_etf", 2, 2.0);
  long_name.mutable_graph()->mutable_ops(0)->set_name(std::string(17, 'n'));
  absl::Status name = place_error(long_name);
  EXPECT_EQ(name.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(name.message()), HasSubstr("17 bytes long; the limit is 16"));

  v1::PlaceRequest huge = RandomRequest(10, 1, "m_etf", 2, 2.0);
  huge.set_request_id(std::string(70'000, 'x'));
  absl::Status message = place_error(huge);
  EXPECT_EQ(message.code(), absl::StatusCode::kResourceExhausted) << message;

  // Evaluate checks the same limits.
  v1::PlaceRequest big = RandomRequest(13, 1, "m_etf", 2, 2.0);
  v1::EvaluateRequest evaluate;
  *evaluate.mutable_graph() = big.graph();
  *evaluate.mutable_cluster() = big.cluster();
  for (int i = 0; i < big.graph().ops_size(); ++i) evaluate.add_device(0);
  absl::Status evaluated = client.Evaluate(evaluate).status();
  EXPECT_EQ(evaluated.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(evaluated.message()), HasSubstr("13 ops exceed the limit of 12"));
  StopServer(**server);
}

}  // namespace
}  // namespace placement::e2e
