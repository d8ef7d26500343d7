// token_bucket.h — request-rate limiting: a token bucket, and one bucket per tenant.
//
// A bucket holds up to `burst` tokens and gains `rate` tokens per second; each call takes one. When the
// bucket is empty the call is refused and told how long until a token is there, which the server sends
// back as RetryInfo. Time comes from an injectable Clock (clock.h), so tests move it by hand.
//
// Example:
//   TenantRateLimiter limiter(Clock::Real());
//   absl::Status admitted = limiter.Admit("team-a", {.rate_qps = 5, .burst = 20});
//   // RESOURCE_EXHAUSTED + RetryInfo when team-a made more than 20 calls faster than 5 per second.
#ifndef PLACEMENT_SERVICE_SERVER_TOKEN_BUCKET_H_
#define PLACEMENT_SERVICE_SERVER_TOKEN_BUCKET_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "service/clock/clock.h"
#include "service/server/tenant_limits.h"

namespace placement::server {

// Not thread-safe (TenantRateLimiter guards its buckets).
class TokenBucket {
 public:
  // `rate_per_second` > 0; `burst` ≥ 1. Starts full.
  TokenBucket(double rate_per_second, double burst, absl::Time now);

  // Takes one token if there is one (true). Otherwise takes nothing, and `*wait` (if non-null) is the
  // time until a token will be there.
  bool TryTake(absl::Time now, absl::Duration* wait = nullptr);

  // New rate and burst, keeping the tokens earned so far (capped by the new burst).
  void Reconfigure(double rate_per_second, double burst, absl::Time now);

  double tokens(absl::Time now);
  double rate() const { return rate_; }
  double burst() const { return burst_; }

 private:
  void Refill(absl::Time now);

  double rate_;
  double burst_;
  double tokens_;
  absl::Time last_;
};

// One bucket per tenant, created on a tenant's first call. Tenants are bounded (they come from the
// tokens file), so the buckets are too. Thread-safe.
class TenantRateLimiter {
 public:
  // `clock` must outlive the limiter; null = Clock::Real().
  explicit TenantRateLimiter(const Clock* clock = nullptr);

  // Counts one call of `tenant`. OK when `limits.rate_qps` is 0 (unlimited) or a token was there;
  // otherwise RESOURCE_EXHAUSTED with a RetryInfo payload (common/status_payloads.h) of the time until
  // the next token. A change of the tenant's limits applies from this call on.
  absl::Status Admit(const std::string& tenant, const TenantLimits& limits)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const Clock* const clock_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, TokenBucket> buckets_ ABSL_GUARDED_BY(mu_);
};

// `limits.burst`, or max(1, rate_qps) when it is not set.
double EffectiveBurst(const TenantLimits& limits);

}  // namespace placement::server

#endif  // PLACEMENT_SERVICE_SERVER_TOKEN_BUCKET_H_
