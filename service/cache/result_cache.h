// result_cache.h — the interface of the placement result cache, keyed by request_digest.
//
// Values are finished placements in *canonical* op order (canonical_order.h): `device[i]` is the device
// of canonical op i (the op ranked i-th by name), so one entry serves every caller whatever the order of
// ops in its request. Values are immutable and shared (shared_ptr<const>), so a hit costs no copy until
// the answer is mapped to the caller's order.
//
// Implementations: LruResultCache (lru_cache.h, in-process, bounded in bytes). A shared tier (Redis,
// issue 8) implements the same interface and can be stacked behind the LRU by a tiering wrapper.
//
// Example:
//   LruResultCache cache({.max_bytes = 256 << 20});
//   if (CachedPlacement hit = cache.Lookup(digest)) return ToRequestOrder(*hit, model.request_index);
//   cache.Insert(digest, ToCanonicalOrder(placement, model.request_index));
#ifndef PLACEMENT_SERVICE_CACHE_RESULT_CACHE_H_
#define PLACEMENT_SERVICE_CACHE_RESULT_CACHE_H_

#include <cstdint>
#include <memory>

#include "absl/strings/string_view.h"
#include "placement/v1/placement.pb.h"

namespace placement::cache {

// An immutable placement in canonical op order.
using CachedPlacement = std::shared_ptr<const v1::Placement>;

struct CacheStats {
  int64_t entries = 0;
  int64_t bytes = 0;  // accounted size of all entries (keys, values, bookkeeping)
  int64_t max_bytes = 0;
  int64_t hits = 0;
  int64_t misses = 0;
  int64_t insertions = 0;
  int64_t evictions = 0;  // entries pushed out to make room (or expired)
  int64_t rejected = 0;   // values larger than the whole cache, never stored
};

class ResultCache {
 public:
  virtual ~ResultCache() = default;
  // The entry for `request_digest`, or null. Thread-safe.
  virtual CachedPlacement Lookup(absl::string_view request_digest) = 0;
  // Stores (or replaces) the entry. Thread-safe; best effort (a value may be refused, e.g. too large).
  virtual void Insert(absl::string_view request_digest, CachedPlacement placement) = 0;
  virtual CacheStats Stats() const = 0;
};

}  // namespace placement::cache

#endif  // PLACEMENT_SERVICE_CACHE_RESULT_CACHE_H_
