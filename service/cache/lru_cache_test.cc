#include "service/cache/lru_cache.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace placement::cache {
namespace {

CachedPlacement MakePlacement(int ops, int32_t device = 0) {
  auto placement = std::make_shared<v1::Placement>();
  for (int i = 0; i < ops; ++i) placement->add_device(device);
  placement->mutable_provenance()->set_algorithm("test");
  return placement;
}

std::string Key(int i) { return absl::StrCat("digest-", i); }

TEST(LruCacheTest, MissThenHit) {
  LruResultCache cache({.max_bytes = 1 << 20});
  EXPECT_EQ(cache.Lookup(Key(1)), nullptr);
  CachedPlacement value = MakePlacement(10, 3);
  cache.Insert(Key(1), value);
  CachedPlacement hit = cache.Lookup(Key(1));
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit, value);  // shared, not copied
  CacheStats stats = cache.Stats();
  EXPECT_EQ(stats.hits, 1);
  EXPECT_EQ(stats.misses, 1);
  EXPECT_EQ(stats.entries, 1);
  EXPECT_EQ(stats.bytes, LruResultCache::ChargeOf(Key(1), *value));
}

TEST(LruCacheTest, EvictsLeastRecentlyUsedToStayWithinBytes) {
  CachedPlacement value = MakePlacement(100);
  const int64_t charge = LruResultCache::ChargeOf(Key(0), *value);
  LruResultCache cache({.max_bytes = 3 * charge});
  for (int i = 0; i < 3; ++i) cache.Insert(Key(i), MakePlacement(100));
  ASSERT_NE(cache.Lookup(Key(0)), nullptr);  // 0 is now the most recently used
  cache.Insert(Key(3), MakePlacement(100));   // evicts 1, the least recently used
  EXPECT_NE(cache.Lookup(Key(0)), nullptr);
  EXPECT_EQ(cache.Lookup(Key(1)), nullptr);
  EXPECT_NE(cache.Lookup(Key(2)), nullptr);
  EXPECT_NE(cache.Lookup(Key(3)), nullptr);
  CacheStats stats = cache.Stats();
  EXPECT_EQ(stats.entries, 3);
  EXPECT_EQ(stats.evictions, 1);
  EXPECT_LE(stats.bytes, stats.max_bytes);
}

TEST(LruCacheTest, OneBigValueEvictsSeveralSmallOnes) {
  CachedPlacement small = MakePlacement(10);
  CachedPlacement big = MakePlacement(2000);
  const int64_t max_bytes = LruResultCache::ChargeOf(Key(99), *big) +
                            LruResultCache::ChargeOf(Key(4), *small);
  LruResultCache cache({.max_bytes = max_bytes});
  for (int i = 0; i < 5; ++i) cache.Insert(Key(i), MakePlacement(10));
  cache.Insert(Key(99), big);
  EXPECT_NE(cache.Lookup(Key(99)), nullptr);
  EXPECT_NE(cache.Lookup(Key(4)), nullptr);  // the most recent small one survives
  EXPECT_EQ(cache.Lookup(Key(0)), nullptr);
  EXPECT_LE(cache.Stats().bytes, max_bytes);
}

TEST(LruCacheTest, RefusesAValueLargerThanTheCache) {
  LruResultCache cache({.max_bytes = 1000});
  cache.Insert(Key(0), MakePlacement(10));
  cache.Insert(Key(1), MakePlacement(100000));
  EXPECT_EQ(cache.Lookup(Key(1)), nullptr);
  EXPECT_NE(cache.Lookup(Key(0)), nullptr);  // nothing was evicted for it
  EXPECT_EQ(cache.Stats().rejected, 1);
}

TEST(LruCacheTest, ZeroBytesDisablesTheCache) {
  LruResultCache cache({.max_bytes = 0});
  cache.Insert(Key(0), MakePlacement(1));
  EXPECT_EQ(cache.Lookup(Key(0)), nullptr);
  EXPECT_EQ(cache.Stats().entries, 0);
}

TEST(LruCacheTest, InsertReplacesAnEntry) {
  LruResultCache cache({.max_bytes = 1 << 20});
  cache.Insert(Key(0), MakePlacement(10, 1));
  cache.Insert(Key(0), MakePlacement(20, 2));
  CachedPlacement hit = cache.Lookup(Key(0));
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->device_size(), 20);
  CacheStats stats = cache.Stats();
  EXPECT_EQ(stats.entries, 1);
  EXPECT_EQ(stats.bytes, LruResultCache::ChargeOf(Key(0), *hit));
}

TEST(LruCacheTest, EntriesExpireAfterTheTtlOfTheInjectedClock) {
  absl::Time now = absl::FromUnixSeconds(1000);
  LruResultCache cache(
      {.max_bytes = 1 << 20, .ttl = absl::Minutes(10), .now = [&now] { return now; }});
  cache.Insert(Key(0), MakePlacement(10));
  now += absl::Minutes(9);
  EXPECT_NE(cache.Lookup(Key(0)), nullptr);
  now += absl::Minutes(2);
  EXPECT_EQ(cache.Lookup(Key(0)), nullptr);
  EXPECT_EQ(cache.Stats().entries, 0);
  EXPECT_EQ(cache.Stats().bytes, 0);
}

TEST(LruCacheTest, ConcurrentUseStaysWithinTheBound) {
  CachedPlacement value = MakePlacement(50);
  const int64_t max_bytes = 20 * LruResultCache::ChargeOf(Key(0), *value);
  LruResultCache cache({.max_bytes = max_bytes});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&cache, t] {
      for (int i = 0; i < 2000; ++i) {
        const int key = (i * 7 + t) % 64;
        if (cache.Lookup(Key(key)) == nullptr) cache.Insert(Key(key), MakePlacement(50));
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CacheStats stats = cache.Stats();
  EXPECT_LE(stats.bytes, max_bytes);
  EXPECT_EQ(stats.hits + stats.misses, 4 * 2000);
  EXPECT_LE(stats.entries, 20);
}

}  // namespace
}  // namespace placement::cache
