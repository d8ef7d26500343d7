#include "service/cache/redis_result_cache.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/testutil/redis_server.h"
#include "tests/testutil/start_redis_or_skip.h"

namespace placement::cache {
namespace {

using testutil::RedisServer;

CachedPlacement MakePlacement(int ops, int32_t device = 1) {
  auto placement = std::make_shared<v1::Placement>();
  for (int i = 0; i < ops; ++i) placement->add_device(device);
  placement->mutable_provenance()->set_algorithm("test");
  placement->mutable_provenance()->set_request_digest("abc");
  return placement;
}

// Options for a test against `port`: a unique key prefix per test, short timeouts and backoff.
RedisCacheOptions TestOptions(int port) {
  const testing::TestInfo* test = testing::UnitTest::GetInstance()->current_test_info();
  return RedisCacheOptions{.host = "127.0.0.1",
                           .port = port,
                           .key_prefix = absl::StrCat("test:", test->name(), ":"),
                           .ttl = absl::Minutes(5),
                           .timeout = absl::Milliseconds(200),
                           .connections = 2,
                           .initial_backoff = absl::Milliseconds(50),
                           .max_backoff = absl::Milliseconds(200)};
}

TEST(RedisAddressTest, Parses) {
  absl::StatusOr<std::pair<std::string, int>> parsed = ParseRedisAddress("redis:6379");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->first, "redis");
  EXPECT_EQ(parsed->second, 6379);
  parsed = ParseRedisAddress("[::1]:7000");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->first, "::1");
  EXPECT_FALSE(ParseRedisAddress("redis").ok());
  EXPECT_FALSE(ParseRedisAddress(":6379").ok());
  EXPECT_FALSE(ParseRedisAddress("redis:0").ok());
  EXPECT_FALSE(ParseRedisAddress("redis:http").ok());
}

TEST(RedisValueTest, RoundTripsAndRejectsOtherFormats) {
  CachedPlacement placement = MakePlacement(5, 2);
  const std::string value = RedisResultCache::EncodeValue(*placement);
  ASSERT_FALSE(value.empty());
  EXPECT_EQ(static_cast<uint8_t>(value[0]), RedisResultCache::kValueFormat);
  absl::StatusOr<CachedPlacement> decoded = RedisResultCache::DecodeValue(value);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ((*decoded)->SerializeAsString(), placement->SerializeAsString());

  std::string other_format = value;
  other_format[0] = static_cast<char>(RedisResultCache::kValueFormat + 1);
  EXPECT_FALSE(RedisResultCache::DecodeValue(other_format).ok());
  EXPECT_FALSE(RedisResultCache::DecodeValue("").ok());
  EXPECT_FALSE(RedisResultCache::DecodeValue(std::string(1, '\x01') + "\xff\xff\xff").ok());
}

TEST(RedisValueTest, KeyHasPrefixAndLayoutVersion) {
  RedisResultCache cache({.key_prefix = "ns:"});
  EXPECT_EQ(cache.KeyOf("0123abcd"), "ns:r1:0123abcd");
}

TEST(RedisResultCacheTest, InsertThenLookupAcrossInstances) {
  START_REDIS_OR_SKIP(redis);
  CachedPlacement placement = MakePlacement(100, 3);
  RedisResultCache writer(TestOptions(redis.port()));
  EXPECT_EQ(writer.Lookup("d1"), nullptr);
  writer.Insert("d1", placement);
  ASSERT_TRUE(writer.Flush(absl::Seconds(5)));

  // Another replica (another cache object, other connections) sees it.
  RedisResultCache reader(TestOptions(redis.port()));
  CachedPlacement hit = reader.Lookup("d1");
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->SerializeAsString(), placement->SerializeAsString());

  RedisCacheStats writer_stats = writer.RedisStats();
  EXPECT_EQ(writer_stats.misses, 1);
  EXPECT_EQ(writer_stats.writes_stored, 1);
  RedisCacheStats reader_stats = reader.RedisStats();
  EXPECT_EQ(reader_stats.hits, 1);
  EXPECT_EQ(reader_stats.lookup_errors, 0);
  EXPECT_EQ(reader.Stats().hits, 1);

  // Stored under the documented key, with a TTL.
  absl::StatusOr<std::string> ttl = redis.Command({"PTTL", writer.KeyOf("d1")});
  ASSERT_TRUE(ttl.ok()) << ttl.status();
  EXPECT_GT(std::stoll(*ttl), 0);
  EXPECT_LE(std::stoll(*ttl), absl::ToInt64Milliseconds(absl::Minutes(5)));
}

TEST(RedisResultCacheTest, ValuesExpireAfterTtl) {
  START_REDIS_OR_SKIP(redis);
  RedisCacheOptions options = TestOptions(redis.port());
  options.ttl = absl::Milliseconds(100);
  RedisResultCache cache(options);
  cache.Insert("short", MakePlacement(3));
  ASSERT_TRUE(cache.Flush(absl::Seconds(5)));
  EXPECT_NE(cache.Lookup("short"), nullptr);
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(cache.Lookup("short"), nullptr);
}

TEST(RedisResultCacheTest, OversizedValuesAreNotStored) {
  START_REDIS_OR_SKIP(redis);
  RedisCacheOptions options = TestOptions(redis.port());
  options.max_value_bytes = 64;
  RedisResultCache cache(options);
  cache.Insert("big", MakePlacement(1000));
  cache.Insert("small", MakePlacement(2));
  ASSERT_TRUE(cache.Flush(absl::Seconds(5)));
  EXPECT_EQ(cache.Lookup("big"), nullptr);
  EXPECT_NE(cache.Lookup("small"), nullptr);
  EXPECT_EQ(cache.RedisStats().writes_too_large, 1);
  EXPECT_EQ(cache.RedisStats().writes_stored, 1);
}

TEST(RedisResultCacheTest, GarbageValueIsAMissAndCounted) {
  START_REDIS_OR_SKIP(redis);
  RedisResultCache cache(TestOptions(redis.port()));
  ASSERT_TRUE(redis.Command({"SET", cache.KeyOf("bad"), "\x09not a placement"}).ok());
  EXPECT_EQ(cache.Lookup("bad"), nullptr);
  RedisCacheStats stats = cache.RedisStats();
  EXPECT_EQ(stats.decode_errors, 1);
  EXPECT_EQ(stats.lookup_errors, 1);
  EXPECT_EQ(stats.hits, 0);
}

TEST(RedisResultCacheTest, DeadRedisDegradesQuicklyAndRecoversAfterRestart) {
  START_REDIS_OR_SKIP(redis);
  RedisResultCache cache(TestOptions(redis.port()));
  cache.Insert("k", MakePlacement(4));
  ASSERT_TRUE(cache.Flush(absl::Seconds(5)));
  ASSERT_NE(cache.Lookup("k"), nullptr);

  redis.Kill();
  // Every lookup returns (a miss) within about one timeout, whatever is wrong.
  for (int i = 0; i < 20; ++i) {
    const absl::Time start = absl::Now();
    EXPECT_EQ(cache.Lookup("k"), nullptr);
    EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  }
  cache.Insert("k2", MakePlacement(4));  // dropped, not queued forever
  RedisCacheStats down = cache.RedisStats();
  EXPECT_GE(down.get_errors + down.connect_errors, 1);
  EXPECT_GE(down.lookup_errors, 1);
  EXPECT_EQ(down.lookup_errors + down.lookups_skipped, 20);
  EXPECT_EQ(down.connections_open, 0);

  // Back (empty): after the backoff the cache reconnects by itself.
  ASSERT_TRUE(redis.Restart().ok());
  const absl::Time give_up = absl::Now() + absl::Seconds(5);
  bool reconnected = false;
  while (!reconnected && absl::Now() < give_up) {
    cache.Insert("k3", MakePlacement(4));
    cache.Flush(absl::Seconds(1));
    reconnected = cache.Lookup("k3") != nullptr;
    if (!reconnected) absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_TRUE(reconnected);
  EXPECT_EQ(cache.Lookup("k"), nullptr);  // the restarted Redis lost it
}

// A server that accepts connections and never answers: every command has to time out.
class SilentServer {
 public:
  SilentServer() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
        listen(fd_, 64) == 0 &&
        getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
      port_ = ntohs(address.sin_port);
    }
  }
  ~SilentServer() { close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST(RedisResultCacheTest, SlowRedisCostsAtMostTheTimeout) {
  SilentServer silent;
  ASSERT_NE(silent.port(), 0);
  RedisCacheOptions options = TestOptions(silent.port());
  options.timeout = absl::Milliseconds(100);
  options.initial_backoff = absl::Seconds(10);
  RedisResultCache cache(options);
  absl::Time start = absl::Now();
  EXPECT_EQ(cache.Lookup("k"), nullptr);
  const absl::Duration first = absl::Now() - start;
  EXPECT_GE(first, absl::Milliseconds(90));  // it did wait for the reply...
  EXPECT_LT(first, absl::Seconds(1));        // ...but not longer than the timeout (plus slack)
  // Backing off: the next lookups do not even try.
  start = absl::Now();
  for (int i = 0; i < 10; ++i) EXPECT_EQ(cache.Lookup("k"), nullptr);
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(50));
  RedisCacheStats stats = cache.RedisStats();
  EXPECT_EQ(stats.get_errors, 1);
  EXPECT_EQ(stats.lookups_skipped, 10);
}

TEST(RedisResultCacheTest, ConcurrentLookupsAndInserts) {
  START_REDIS_OR_SKIP(redis);
  RedisResultCache cache(TestOptions(redis.port()));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&cache, t] {
      for (int i = 0; i < 50; ++i) {
        const std::string key = absl::StrCat("c", (t * 50 + i) % 40);
        if (cache.Lookup(key) == nullptr) cache.Insert(key, MakePlacement(8, t));
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  ASSERT_TRUE(cache.Flush(absl::Seconds(5)));
  RedisCacheStats stats = cache.RedisStats();
  EXPECT_EQ(stats.hits + stats.misses + stats.lookup_errors + stats.lookups_skipped, 200);
  EXPECT_EQ(stats.lookup_errors, 0);
  EXPECT_LE(stats.connections_open, 2);
  for (int i = 0; i < 40; ++i) EXPECT_NE(cache.Lookup(absl::StrCat("c", i)), nullptr) << i;
}

}  // namespace
}  // namespace placement::cache
