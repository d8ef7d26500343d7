// tiered_result_cache.h — the in-process cache in front of a shared one (Redis), as one ResultCache.
//
// Lookup asks the local tier first; on a local miss it asks the shared tier and copies a hit into the
// local tier, so the next lookup of that digest on this replica costs no round trip. Insert writes
// both (the shared tier's write is asynchronous). A hit from either tier is a hit for the caller
// (provenance.cache = HIT, api.md does not name tiers); the per-tier counts are in TierStats.
//
// Example:
//   TieredResultCache cache(&lru, &redis);
//   cache.Insert(digest, placement);
//   CachedPlacement hit = cache.Lookup(digest);
#ifndef PLACEMENT_SERVICE_CACHE_TIERED_RESULT_CACHE_H_
#define PLACEMENT_SERVICE_CACHE_TIERED_RESULT_CACHE_H_

#include <atomic>
#include <cstdint>

#include "service/cache/result_cache.h"

namespace placement::cache {

struct TierStats {
  int64_t local_hits = 0;
  int64_t local_misses = 0;
  int64_t shared_hits = 0;
  int64_t shared_misses = 0;  // includes shared-tier failures, which the shared tier counts itself
};

class TieredResultCache : public ResultCache {
 public:
  // Both must outlive this object.
  TieredResultCache(ResultCache* local, ResultCache* shared);

  CachedPlacement Lookup(absl::string_view request_digest) override;
  void Insert(absl::string_view request_digest, CachedPlacement placement) override;
  // The local tier's stats (what the cache gauges describe: this process's memory), with hits and
  // misses as the caller saw them (a shared hit is a hit).
  CacheStats Stats() const override;
  TierStats Tiers() const;

 private:
  ResultCache* const local_;
  ResultCache* const shared_;
  std::atomic<int64_t> local_hits_{0};
  std::atomic<int64_t> local_misses_{0};
  std::atomic<int64_t> shared_hits_{0};
  std::atomic<int64_t> shared_misses_{0};
};

}  // namespace placement::cache

#endif  // PLACEMENT_SERVICE_CACHE_TIERED_RESULT_CACHE_H_
