// lru_cache.h — the in-process result cache: least-recently-used, bounded in bytes.
//
// Every entry is charged its key, the protobuf's SpaceUsedLong() and a fixed bookkeeping overhead; when an
// insertion would pass `max_bytes`, the least recently used entries are evicted first. A value larger than
// the whole cache is refused (counted in CacheStats::rejected). Optional `ttl` drops entries that old
// (measured with the injectable clock). Thread-safe (one absl::Mutex; lookups are O(1) and copy nothing).
//
// Example:
//   LruResultCache cache({.max_bytes = int64_t{256} << 20});
//   cache.Insert(digest, canonical_placement);
//   CachedPlacement hit = cache.Lookup(digest);  // null on a miss
#ifndef PLACEMENT_SERVICE_CACHE_LRU_CACHE_H_
#define PLACEMENT_SERVICE_CACHE_LRU_CACHE_H_

#include <cstdint>
#include <functional>
#include <list>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "service/cache/result_cache.h"

namespace placement::cache {

struct LruCacheOptions {
  // Upper bound of the accounted size of all entries. 0 disables the cache (every insert is refused).
  int64_t max_bytes = int64_t{256} << 20;
  // Entries older than this are dropped on lookup. InfiniteDuration = keep until evicted.
  absl::Duration ttl = absl::InfiniteDuration();
  // Time source for the TTL; null = absl::Now().
  std::function<absl::Time()> now = nullptr;
};

class LruResultCache : public ResultCache {
 public:
  // Bookkeeping charged per entry besides key and value (list node, hash slot, control block).
  static constexpr int64_t kEntryOverheadBytes = 160;

  explicit LruResultCache(LruCacheOptions options);

  CachedPlacement Lookup(absl::string_view request_digest) override ABSL_LOCKS_EXCLUDED(mu_);
  void Insert(absl::string_view request_digest, CachedPlacement placement) override
      ABSL_LOCKS_EXCLUDED(mu_);
  CacheStats Stats() const override ABSL_LOCKS_EXCLUDED(mu_);

  // The size an entry is charged.
  static int64_t ChargeOf(absl::string_view request_digest, const v1::Placement& placement);

 private:
  struct Entry {
    std::string key;
    CachedPlacement value;
    int64_t charge = 0;
    absl::Time inserted_at;
  };
  using List = std::list<Entry>;  // most recently used first

  void EraseLocked(List::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Time Now() const { return options_.now ? options_.now() : absl::Now(); }

  const LruCacheOptions options_;
  mutable absl::Mutex mu_;
  List entries_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, List::iterator> index_ ABSL_GUARDED_BY(mu_);
  CacheStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace placement::cache

#endif  // PLACEMENT_SERVICE_CACHE_LRU_CACHE_H_
