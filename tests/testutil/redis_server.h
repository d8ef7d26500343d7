// redis_server.h — a throw-away redis-server for tests: loopback only, no persistence, its own temp
// directory, killed by the destructor.
//
// Tests that need Redis skip (GTEST_SKIP) when Start() says NOT_FOUND, so the suite still passes on a
// machine without the Debian package `redis-server`.
//
// Example:
//   absl::StatusOr<std::unique_ptr<RedisServer>> redis = RedisServer::Start();
//   if (absl::IsNotFound(redis.status())) GTEST_SKIP() << redis.status();
//   ASSERT_TRUE(redis.ok()) << redis.status();
//   RedisCacheOptions options{.host = "127.0.0.1", .port = (*redis)->port()};
//   (*redis)->Kill();                           // SIGKILL: what a crashed Redis looks like
//   ASSERT_TRUE((*redis)->Restart().ok());      // same port, empty data set
//   (*redis)->Pause(); ... (*redis)->Resume();  // SIGSTOP / SIGCONT: a Redis that stalls
//   RedisServer::Start({.args = {"--maxmemory", "32mb", "--maxmemory-policy", "noeviction"}});
#ifndef PLACEMENT_TESTS_TESTUTIL_REDIS_SERVER_H_
#define PLACEMENT_TESTS_TESTUTIL_REDIS_SERVER_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace placement::testutil {

// The redis-server binary ($PLACEMENT_REDIS_SERVER, else the first on PATH, else /usr/bin), or "".
std::string FindRedisServerBinary();

// A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read it, close).
int PickFreePort();

struct RedisServerOptions {
  // More redis-server arguments (e.g. {"--maxmemory", "32mb"}), kept for Restart().
  std::vector<std::string> args = {};
  // `requirepass`: clients must AUTH (Command() does). Empty = none.
  std::string password = {};
  // How long Start() waits for it to answer PING.
  absl::Duration timeout = absl::Seconds(10);
};

class RedisServer {
 public:
  // NOT_FOUND without a redis-server binary; UNAVAILABLE when it does not answer PING in time.
  static absl::StatusOr<std::unique_ptr<RedisServer>> Start(RedisServerOptions options = {});
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  std::string address() const;
  bool running() const { return pid_ > 0; }

  // SIGKILL and reap.
  void Kill();
  // SIGSTOP / SIGCONT: Redis stalls with its connections open (queued commands run on Resume).
  void Pause();
  void Resume();
  // A fresh redis-server on the same port (after Kill).
  absl::Status Restart(absl::Duration timeout = absl::Seconds(10));
  // Sends a command (e.g. {"SET", key, value}) and returns the reply as text (strings, status,
  // integers; "(nil)" for nil; "(array of N)" for arrays). INTERNAL on connection errors or error
  // replies.
  absl::StatusOr<std::string> Command(const std::vector<std::string>& args) const;

 private:
  RedisServer() = default;
  absl::Status Launch(absl::Duration timeout);

  RedisServerOptions options_;
  std::string binary_;
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace placement::testutil

#endif  // PLACEMENT_TESTS_TESTUTIL_REDIS_SERVER_H_
