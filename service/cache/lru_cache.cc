#include "service/cache/lru_cache.h"

#include <utility>

namespace placement::cache {

LruResultCache::LruResultCache(LruCacheOptions options) : options_(std::move(options)) {
  absl::MutexLock lock(&mu_);
  stats_.max_bytes = options_.max_bytes;
}

int64_t LruResultCache::ChargeOf(absl::string_view request_digest,
                                 const v1::Placement& placement) {
  // The key is stored twice (list entry and hash index).
  return 2 * static_cast<int64_t>(request_digest.size()) +
         static_cast<int64_t>(placement.SpaceUsedLong()) + kEntryOverheadBytes;
}

CachedPlacement LruResultCache::Lookup(absl::string_view request_digest) {
  const bool expiring = options_.ttl != absl::InfiniteDuration();
  const absl::Time now = expiring ? Now() : absl::InfinitePast();
  absl::MutexLock lock(&mu_);
  auto it = index_.find(request_digest);
  if (it == index_.end()) {
    ++stats_.misses;
    return nullptr;
  }
  List::iterator entry = it->second;
  if (expiring && now - entry->inserted_at >= options_.ttl) {
    EraseLocked(entry);
    ++stats_.evictions;
    ++stats_.misses;
    return nullptr;
  }
  entries_.splice(entries_.begin(), entries_, entry);  // now the most recently used
  ++stats_.hits;
  return entry->value;
}

void LruResultCache::Insert(absl::string_view request_digest, CachedPlacement placement) {
  if (placement == nullptr) return;
  const int64_t charge = ChargeOf(request_digest, *placement);
  const absl::Time now = Now();
  absl::MutexLock lock(&mu_);
  if (auto it = index_.find(request_digest); it != index_.end()) EraseLocked(it->second);
  if (charge > options_.max_bytes) {
    ++stats_.rejected;
    return;
  }
  while (!entries_.empty() && stats_.bytes + charge > options_.max_bytes) {
    EraseLocked(std::prev(entries_.end()));
    ++stats_.evictions;
  }
  entries_.push_front(Entry{std::string(request_digest), std::move(placement), charge, now});
  index_.emplace(entries_.front().key, entries_.begin());
  stats_.bytes += charge;
  ++stats_.entries;
  ++stats_.insertions;
}

void LruResultCache::EraseLocked(List::iterator it) {
  stats_.bytes -= it->charge;
  --stats_.entries;
  index_.erase(it->key);
  entries_.erase(it);
}

CacheStats LruResultCache::Stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace placement::cache
