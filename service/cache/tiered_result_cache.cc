#include "service/cache/tiered_result_cache.h"

#include <utility>

namespace placement::cache {

TieredResultCache::TieredResultCache(ResultCache* local, ResultCache* shared)
    : local_(local), shared_(shared) {}

CachedPlacement TieredResultCache::Lookup(absl::string_view request_digest) {
  if (CachedPlacement hit = local_->Lookup(request_digest)) {
    local_hits_.fetch_add(1, std::memory_order_relaxed);
    return hit;
  }
  local_misses_.fetch_add(1, std::memory_order_relaxed);
  CachedPlacement hit = shared_->Lookup(request_digest);
  if (hit == nullptr) {
    shared_misses_.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  shared_hits_.fetch_add(1, std::memory_order_relaxed);
  local_->Insert(request_digest, hit);
  return hit;
}

void TieredResultCache::Insert(absl::string_view request_digest, CachedPlacement placement) {
  if (placement == nullptr) return;
  local_->Insert(request_digest, placement);
  // A result the time limit cut short is not final: other replicas' callers (any tenant, any time
  // limit) must not get it as if it were. It stays in this process's tier, where the core serves it
  // only to callers with no larger time limit.
  if (placement->provenance().time_limited()) return;
  shared_->Insert(request_digest, std::move(placement));
}

CacheStats TieredResultCache::Stats() const {
  CacheStats stats = local_->Stats();
  stats.hits = local_hits_.load(std::memory_order_relaxed) +
               shared_hits_.load(std::memory_order_relaxed);
  stats.misses = shared_misses_.load(std::memory_order_relaxed);
  return stats;
}

TierStats TieredResultCache::Tiers() const {
  return TierStats{.local_hits = local_hits_.load(std::memory_order_relaxed),
                   .local_misses = local_misses_.load(std::memory_order_relaxed),
                   .shared_hits = shared_hits_.load(std::memory_order_relaxed),
                   .shared_misses = shared_misses_.load(std::memory_order_relaxed)};
}

}  // namespace placement::cache
