#include "service/cache/redis_client.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
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

TEST(RedisClientTest, AKilledServerIsAnExchangeFailureAndBackOffPausesOnRequest) {
  START_REDIS_OR_SKIP(redis);
  RedisClient client(TestOptions(redis.port()));
  ASSERT_TRUE(client.Command({"PING"}).ok());
  redis.Kill();
  RedisFailure failure = RedisFailure::kNone;
  EXPECT_FALSE(client.Command({"PING"}, &failure).ok());
  EXPECT_EQ(failure, RedisFailure::kExchange);  // the pooled connection broke mid-call
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

}  // namespace
}  // namespace placement::cache
