// redis_replicas.h — the fixture of the end-to-end tests of shared operations: a throw-away
// redis-server (tests/testutil/redis_server.h) and real placement_server replicas sharing it, with
// bearer tokens for two tenants. Tests skip without redis-server.
//
// Example:
//   class MyTest : public RedisReplicasTest {};
//   TEST_F(MyTest, Something) {
//     std::unique_ptr<ServerProcess> a = StartReplica({"--operation_lease=2s"});
//     auto on_a = Client(*a);                       // tenant team-a
//     redis_->Pause();                              // the Redis the replicas share
//     EXPECT_EQ(Metric(*a, "placement_operations_taken_over_total"), 0);
//   }
#ifndef PLACEMENT_TESTS_E2E_REDIS_REPLICAS_H_
#define PLACEMENT_TESTS_E2E_REDIS_REPLICAS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "client/placement_client.h"
#include "gtest/gtest.h"
#include "tests/e2e/server_process.h"
#include "tests/e2e/temp_dir.h"
#include "tests/testutil/redis_server.h"

namespace placement::e2e {

inline constexpr char kTeamA[] = "team-a-token-0123456789abcdef";
inline constexpr char kTeamB[] = "team-b-token-fedcba9876543210";

class RedisReplicasTest : public ::testing::Test {
 protected:
  // Starts Redis (the test skips without redis-server), writes the tokens file, picks a key prefix
  // no other test uses.
  void SetUp() override;

  // A fresh Redis with `options` in place of the current one (a test that needs maxmemory, a
  // password, ... calls it first thing).
  void StartRedis(testutil::RedisServerOptions options = {});
  // A replica sharing redis_: one worker, --operation_lease=1s, --redis_timeout=100ms, testing
  // algorithms, no request log, a 1 s shutdown grace, the tokens of team-a and team-b; then `extra`
  // (a later flag wins). Null, with a test failure, when it does not start.
  std::unique_ptr<ServerProcess> StartReplica(const std::vector<std::string>& extra = {});
  // One attempt per call, 30 s, as `token`'s tenant.
  static std::unique_ptr<client::PlacementClient> Client(const ServerProcess& server,
                                                         const std::string& token = kTeamA);
  // The value of `series` in a scrape of `server` (-1 when the scrape fails).
  static double Metric(const ServerProcess& server, absl::string_view series);
  // A key of the shared operations' layout: Key("op:" + name), Key("jobs").
  std::string Key(absl::string_view rest) const;

  // A replica (as StartReplica) that the fixture stops at the end of the test — SIGTERM, exit status
  // 0 expected — unless the test ended it itself; null, with a test failure, when it does not start.
  ServerProcess* Replica(const std::vector<std::string>& extra = {});
  // A client (as Client) that the fixture closes before it stops the replicas (an open connection
  // would hold up their shutdown).
  client::PlacementClient& ClientOf(const ServerProcess& server, const std::string& token = kTeamA);
  void TearDown() override;

  TempDir dir_{"redis_replicas_e2e"};
  std::unique_ptr<testutil::RedisServer> redis_;
  std::string tokens_;
  std::string key_prefix_;

 private:
  std::vector<std::unique_ptr<client::PlacementClient>> clients_;
  std::vector<std::unique_ptr<ServerProcess>> replicas_;
};

// Until `name` reports a stage other than "queued" through `client` (true), or 10 s (false).
bool AwaitRunning(client::PlacementClient& client, const std::string& name);

}  // namespace placement::e2e

#endif  // PLACEMENT_TESTS_E2E_REDIS_REPLICAS_H_
