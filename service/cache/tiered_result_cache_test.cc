#include "service/cache/tiered_result_cache.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "service/cache/lru_cache.h"

namespace placement::cache {
namespace {

CachedPlacement MakePlacement(int ops) {
  auto placement = std::make_shared<v1::Placement>();
  for (int i = 0; i < ops; ++i) placement->add_device(i % 2);
  return placement;
}

TEST(TieredResultCacheTest, SharedHitIsCopiedIntoTheLocalTier) {
  LruResultCache local({.max_bytes = 1 << 20});
  LruResultCache shared({.max_bytes = 1 << 20});
  TieredResultCache tiered(&local, &shared);
  CachedPlacement value = MakePlacement(10);
  shared.Insert("d", value);  // as if another replica had computed it

  EXPECT_EQ(tiered.Lookup("d"), value);
  EXPECT_NE(local.Lookup("d"), nullptr);
  EXPECT_EQ(tiered.Lookup("d"), value);  // now from the local tier
  TierStats tiers = tiered.Tiers();
  EXPECT_EQ(tiers.local_hits, 1);
  EXPECT_EQ(tiers.local_misses, 1);
  EXPECT_EQ(tiers.shared_hits, 1);
  EXPECT_EQ(tiers.shared_misses, 0);
  EXPECT_EQ(tiered.Stats().hits, 2);
  EXPECT_EQ(tiered.Stats().misses, 0);
}

TEST(TieredResultCacheTest, MissInBothAndInsertWritesBoth) {
  LruResultCache local({.max_bytes = 1 << 20});
  LruResultCache shared({.max_bytes = 1 << 20});
  TieredResultCache tiered(&local, &shared);
  EXPECT_EQ(tiered.Lookup("d"), nullptr);
  tiered.Insert("d", MakePlacement(3));
  EXPECT_NE(local.Lookup("d"), nullptr);
  EXPECT_NE(shared.Lookup("d"), nullptr);
  EXPECT_EQ(tiered.Tiers().shared_misses, 1);
  EXPECT_EQ(tiered.Stats().misses, 1);
  // The gauges describe this process's memory: the local tier's bytes and entries.
  EXPECT_EQ(tiered.Stats().entries, 1);
  EXPECT_EQ(tiered.Stats().bytes, local.Stats().bytes);
}

TEST(TieredResultCacheTest, DisabledLocalTierStillServesSharedHits) {
  LruResultCache local({.max_bytes = 0});  // --cache_bytes=0
  LruResultCache shared({.max_bytes = 1 << 20});
  TieredResultCache tiered(&local, &shared);
  tiered.Insert("d", MakePlacement(3));
  EXPECT_NE(tiered.Lookup("d"), nullptr);
  EXPECT_EQ(tiered.Tiers().shared_hits, 1);
}

}  // namespace
}  // namespace placement::cache
