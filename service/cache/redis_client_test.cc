#include "service/cache/redis_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/testutil/redis_server.h"
#include "tests/testutil/start_redis_or_skip.h"

namespace placement::cache {
namespace {

RedisClientOptions TestOptions(int port) {
  return {.host = "127.0.0.1",
          .port = port,
          .timeout = absl::Milliseconds(500),
          .connections = 2,
          .initial_backoff = absl::Seconds(30),  // long enough that a test sees the pause
          .max_backoff = absl::Seconds(60)};
}

TEST(RedisClientTest, CommandsRoundTripAndAnErrorReplyIsInternalOnAWorkingConnection) {
  START_REDIS_OR_SKIP(redis);
  RedisClient client(TestOptions(redis.port()));
  RedisFailure failure = RedisFailure::kExchange;
  absl::StatusOr<RedisValue> set = client.Command({"SET", "k", std::string("v\0w", 3)}, &failure);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(failure, RedisFailure::kNone);
  EXPECT_EQ(set->type, RedisValue::Type::kStatus);
  absl::StatusOr<RedisValue> got = client.Command({"GET", "k"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->str, std::string("v\0w", 3));  // binary safe
  absl::StatusOr<RedisValue> absent = client.Command({"GET", "absent"});
  ASSERT_TRUE(absent.ok()) << absent.status();
  EXPECT_TRUE(absent->is_nil());

  absl::StatusOr<RedisValue> wrong = client.Command({"NO-SUCH-COMMAND"}, &failure);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInternal) << wrong.status();
  EXPECT_EQ(failure, RedisFailure::kNone);  // Redis answered
  EXPECT_FALSE(client.backing_off());
  EXPECT_TRUE(client.Command({"PING"}).ok());
  EXPECT_EQ(client.failures(), 0);
  EXPECT_EQ(client.connections_open(), 1);  // one connection, reused by every call
}

TEST(RedisClientTest, PipelineAnswersInOrderWithErrorRepliesAsValues) {
  START_REDIS_OR_SKIP(redis);
  RedisClient client(TestOptions(redis.port()));
  absl::StatusOr<std::vector<RedisValue>> replies =
      client.Pipeline({{"INCR", "n"}, {"INCR", "n"}, {"HGET", "n", "f"}, {"GET", "n"}});
  ASSERT_TRUE(replies.ok()) << replies.status();
  ASSERT_EQ(replies->size(), 4u);
  EXPECT_EQ((*replies)[0].integer, 1);
  EXPECT_EQ((*replies)[1].integer, 2);
  EXPECT_EQ((*replies)[2].type, RedisValue::Type::kError);  // WRONGTYPE
  EXPECT_EQ((*replies)[3].str, "2");
  EXPECT_EQ(client.round_trips(), 1);
}

TEST(RedisClientTest, ScriptIsSentAgainWhenRedisForgotIt) {
  START_REDIS_OR_SKIP(redis);
  RedisClient client(TestOptions(redis.port()));
  constexpr char kScript[] = "return redis.call('INCRBY', KEYS[1], ARGV[1])";
  absl::StatusOr<RedisValue> first = client.Script(kScript, {"n"}, {"5"});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->integer, 5);
  ASSERT_TRUE(redis.Command({"SCRIPT", "FLUSH"}).ok());
  absl::StatusOr<RedisValue> again = client.Script(kScript, {"n"}, {"2"});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->integer, 7);
  EXPECT_EQ(ScriptSha1(""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
}

TEST(RedisClientTest, AFailedConnectBacksOffAndLaterCallsAreNotTried) {
  RedisClient client(TestOptions(testutil::PickFreePort()));  // nothing listens there
  RedisFailure failure = RedisFailure::kNone;
  absl::StatusOr<RedisValue> refused = client.Command({"PING"}, &failure);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();
  EXPECT_EQ(failure, RedisFailure::kConnect);
  EXPECT_TRUE(client.backing_off());
  absl::StatusOr<RedisValue> paused = client.Command({"PING"}, &failure);
  EXPECT_EQ(paused.status().code(), absl::StatusCode::kUnavailable) << paused.status();
  EXPECT_EQ(failure, RedisFailure::kNotTried);
  EXPECT_EQ(client.failures(), 1);
  EXPECT_EQ(client.connections_open(), 0);
}

TEST(RedisClientTest, AKilledServerIsTriedOnceMoreThenBacksOffAndBackOffPausesOnRequest) {
  START_REDIS_OR_SKIP(redis);
  RedisClient client(TestOptions(redis.port()));
  ASSERT_TRUE(client.Command({"PING"}).ok());
  redis.Kill();
  RedisFailure failure = RedisFailure::kNone;
  EXPECT_FALSE(client.Command({"PING"}, &failure).ok());
  // The pooled connection was closed by the dying server: tried once more on a fresh connection,
  // which nothing accepts.
  EXPECT_EQ(failure, RedisFailure::kConnect);
  EXPECT_EQ(client.stale_retries(), 1);
  EXPECT_TRUE(client.backing_off());
  EXPECT_EQ(client.connections_open(), 0);  // the broken one is closed, not pooled

  RedisClient healthy(TestOptions(redis.port()));
  ASSERT_TRUE(redis.Restart().ok());
  ASSERT_TRUE(healthy.Command({"PING"}).ok());
  healthy.BackOff();
  EXPECT_TRUE(healthy.backing_off());
  EXPECT_FALSE(healthy.Command({"PING"}, &failure).ok());
  EXPECT_EQ(failure, RedisFailure::kNotTried);
}

TEST(RedisClientTest, APooledConnectionClosedByARestartIsRetriedOnAFreshOne) {
  START_REDIS_OR_SKIP(redis);
  RedisClient client(TestOptions(redis.port()));
  ASSERT_TRUE(client.Command({"SET", "k", "v"}).ok());
  ASSERT_TRUE(redis.Restart().ok());  // the pooled connection is dead now
  absl::StatusOr<RedisValue> after = client.Command({"SET", "k", "w"});
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(client.stale_retries(), 1);
  EXPECT_EQ(client.failures(), 0);
  EXPECT_FALSE(client.backing_off());
  // A script as well (sent again after NOSCRIPT on the fresh connection).
  ASSERT_TRUE(redis.Restart().ok());
  absl::StatusOr<RedisValue> script = client.Script("return 7", {}, {});
  ASSERT_TRUE(script.ok()) << script.status();
  EXPECT_EQ(script->integer, 7);
  EXPECT_EQ(client.stale_retries(), 2);
}

TEST(RedisClientTest, AStalledServerTimesOutWithoutARetryAndCloseEndsWaitingCalls) {
  START_REDIS_OR_SKIP(redis);
  RedisClientOptions options = TestOptions(redis.port());
  options.timeout = absl::Seconds(30);
  RedisClient client(options);
  ASSERT_TRUE(client.Command({"PING"}).ok());
  redis.Pause();
  // A call that waits for the stalled server ends at once when the client is closed.
  absl::StatusOr<RedisValue> blocked = absl::UnknownError("not run");
  std::thread caller([&] { blocked = client.Command({"SET", "k", "v"}); });
  absl::SleepFor(absl::Milliseconds(200));
  const absl::Time closed = absl::Now();
  client.Close();
  caller.join();
  EXPECT_LT(absl::Now() - closed, absl::Seconds(2));
  EXPECT_TRUE(absl::IsUnavailable(blocked.status())) << blocked.status();
  EXPECT_EQ(client.stale_retries(), 1);  // closed under it: its retry found the client closed
  EXPECT_TRUE(absl::IsUnavailable(client.Command({"PING"}).status()));
  redis.Resume();
  // A timeout is never sent again: Redis may still run the command.
  options.timeout = absl::Milliseconds(200);
  RedisClient quick(options);
  ASSERT_TRUE(quick.Command({"PING"}).ok());
  redis.Pause();
  EXPECT_FALSE(quick.Command({"PING"}).ok());
  EXPECT_EQ(quick.stale_retries(), 0);
  redis.Resume();
}

TEST(RedisClientTest, ErrorRepliesAreReadByTheirFirstWord) {
  START_REDIS_OR_SKIP(redis);
  RedisClient client(TestOptions(redis.port()));
  ASSERT_TRUE(client.Command({"SET", "k", "v"}).ok());
  absl::StatusOr<RedisValue> wrong = client.Command({"HGET", "k", "f"});
  EXPECT_EQ(ErrorReplyCode(wrong.status()), "WRONGTYPE") << wrong.status();
  EXPECT_FALSE(IsPassingErrorReply(wrong.status()));
  absl::StatusOr<RedisValue> in_script =
      client.Script("return redis.call('HGET', KEYS[1], 'f')", {"k"}, {});
  EXPECT_EQ(ErrorReplyCode(in_script.status()), "WRONGTYPE") << in_script.status();
  ASSERT_TRUE(client.Command({"CONFIG", "SET", "maxmemory-policy", "noeviction"}).ok());
  ASSERT_TRUE(client.Command({"CONFIG", "SET", "maxmemory", "1"}).ok());
  absl::StatusOr<RedisValue> full = client.Command({"SET", "k2", "v"});
  EXPECT_EQ(ErrorReplyCode(full.status()), "OOM") << full.status();
  EXPECT_TRUE(IsPassingErrorReply(full.status()));
  EXPECT_EQ(ErrorReplyCode(absl::UnavailableError("redis: connect failed")), "");
}

// A TCP server on a free loopback port that answers anything with an HTTP error, as a web server
// (or a metrics endpoint) given to --redis by mistake would.
class HttpLookalike {
 public:
  HttpLookalike() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    listen(fd_, 4);
    thread_ = std::thread([this] {
      const int client = accept(fd_, nullptr, nullptr);
      if (client < 0) return;
      char buffer[256];
      (void)read(client, buffer, sizeof(buffer));
      constexpr char kReply[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
      (void)write(client, kReply, sizeof(kReply) - 1);
      close(client);
    });
  }
  ~HttpLookalike() {
    shutdown(fd_, SHUT_RDWR);
    thread_.join();
    close(fd_);
  }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

TEST(CheckRedisServerTest, SaysWhetherTheAddressIsAUsableRedis) {
  START_REDIS_OR_SKIP(redis);
  EXPECT_TRUE(CheckRedisServer("127.0.0.1", redis.port(), absl::Seconds(2)).ok());
  // Nothing listens: maybe later, so only UNAVAILABLE.
  EXPECT_TRUE(absl::IsUnavailable(
      CheckRedisServer("127.0.0.1", testutil::PickFreePort(), absl::Seconds(2))));
  // Not Redis: no retry will make it one.
  HttpLookalike http;
  absl::Status not_redis = CheckRedisServer("127.0.0.1", http.port(), absl::Seconds(2));
  EXPECT_EQ(not_redis.code(), absl::StatusCode::kInvalidArgument) << not_redis;
  EXPECT_TRUE(absl::StrContains(not_redis.message(), "not a Redis server")) << not_redis;
  // A Redis that wants a password.
  absl::StatusOr<std::unique_ptr<testutil::RedisServer>> locked =
      testutil::RedisServer::Start({.password = "pw-0123456789"});
  ASSERT_TRUE(locked.ok()) << locked.status();
  absl::Status needs_password = CheckRedisServer("127.0.0.1", (*locked)->port(), absl::Seconds(2));
  EXPECT_EQ(needs_password.code(), absl::StatusCode::kFailedPrecondition) << needs_password;
  EXPECT_TRUE(absl::StrContains(needs_password.message(), "password")) << needs_password;
  // A stalled Redis: it may answer later.
  redis.Pause();
  EXPECT_TRUE(absl::IsUnavailable(
      CheckRedisServer("127.0.0.1", redis.port(), absl::Milliseconds(300))));
  redis.Resume();
}

}  // namespace
}  // namespace placement::cache
