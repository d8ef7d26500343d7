#include "tests/e2e/redis_replicas.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/e2e/test_requests.h"

namespace placement::e2e {

void RedisReplicasTest::SetUp() {
  tokens_ = dir_.Write("tokens", absl::StrCat(kTeamA, " team-a\n", kTeamB, " team-b\n"));
  key_prefix_ = absl::StrCat("ops", FreshSeed(), ":");
  StartRedis();
}

void RedisReplicasTest::StartRedis(testutil::RedisServerOptions options) {
  redis_.reset();
  absl::StatusOr<std::unique_ptr<testutil::RedisServer>> redis =
      testutil::RedisServer::Start(std::move(options));
  if (absl::IsNotFound(redis.status())) GTEST_SKIP() << redis.status();
  ASSERT_TRUE(redis.ok()) << redis.status();
  redis_ = *std::move(redis);
}

std::unique_ptr<ServerProcess> RedisReplicasTest::StartReplica(
    const std::vector<std::string>& extra) {
  std::vector<std::string> flags = {absl::StrCat("--redis=", redis_->address()),
                                    "--redis_key_prefix=" + key_prefix_,
                                    "--redis_timeout=100ms",
                                    "--operation_lease=1s",
                                    "--workers=1",
                                    "--testing_algorithms",
                                    "--log_requests=false",
                                    "--shutdown_grace=1s",
                                    "--auth_tokens=" + tokens_};
  flags.insert(flags.end(), extra.begin(), extra.end());
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(flags);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

std::unique_ptr<client::PlacementClient> RedisReplicasTest::Client(const ServerProcess& server,
                                                                   const std::string& token) {
  client::ClientOptions options;
  options.target = server.address();
  options.default_timeout = absl::Seconds(30);
  options.retry.max_attempts = 1;
  options.token = token;
  return std::make_unique<client::PlacementClient>(options);
}

double RedisReplicasTest::Metric(const ServerProcess& server, absl::string_view series) {
  absl::StatusOr<std::string> scrape = ScrapeMetrics(server.metrics_port());
  EXPECT_TRUE(scrape.ok()) << scrape.status();
  return scrape.ok() ? MetricValue(*scrape, series) : -1;
}

std::string RedisReplicasTest::Key(absl::string_view rest) const {
  return absl::StrCat(key_prefix_, "o1:", rest);
}

ServerProcess* RedisReplicasTest::Replica(const std::vector<std::string>& extra) {
  std::unique_ptr<ServerProcess> replica = StartReplica(extra);
  if (replica == nullptr) return nullptr;
  replicas_.push_back(std::move(replica));
  return replicas_.back().get();
}

client::PlacementClient& RedisReplicasTest::ClientOf(const ServerProcess& server,
                                                     const std::string& token) {
  clients_.push_back(Client(server, token));
  return *clients_.back();
}

void RedisReplicasTest::TearDown() {
  clients_.clear();
  for (std::unique_ptr<ServerProcess>& replica : replicas_) {
    // Killed or stopped by the test already: nothing to stop.
    if (replica->WaitForExit(absl::ZeroDuration()).ok()) continue;
    StopServer(*replica);
  }
  replicas_.clear();
}

bool AwaitRunning(client::PlacementClient& client, const std::string& name) {
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (absl::Now() < give_up) {
    absl::StatusOr<v1::Operation> got = client.GetOperation(name);
    if (got.ok() && got->metadata().stage() != "queued") return true;
    absl::SleepFor(absl::Milliseconds(20));  // another process's progress: nothing to await on
  }
  return false;
}

}  // namespace placement::e2e
