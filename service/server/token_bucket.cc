#include "service/server/token_bucket.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "service/status_payloads/status_payloads.h"

namespace placement::server {

TokenBucket::TokenBucket(double rate_per_second, double burst, absl::Time now)
    : rate_(rate_per_second), burst_(burst), tokens_(burst), last_(now) {}

void TokenBucket::Refill(absl::Time now) {
  // A clock that went backwards (or a stale `now` from a racing caller) earns nothing.
  if (now <= last_) return;
  tokens_ = std::min(burst_, tokens_ + absl::ToDoubleSeconds(now - last_) * rate_);
  last_ = now;
}

bool TokenBucket::TryTake(absl::Time now, absl::Duration* wait) {
  Refill(now);
  if (tokens_ >= 1.0) {
    tokens_ -= 1.0;
    return true;
  }
  if (wait != nullptr) {
    // Rounded up to whole milliseconds so that retrying after `wait` finds a token.
    const double seconds = (1.0 - tokens_) / rate_;
    *wait = absl::Milliseconds(std::ceil(seconds * 1000.0));
  }
  return false;
}

void TokenBucket::Reconfigure(double rate_per_second, double burst, absl::Time now) {
  Refill(now);
  rate_ = rate_per_second;
  burst_ = burst;
  tokens_ = std::min(tokens_, burst_);
}

double TokenBucket::tokens(absl::Time now) {
  Refill(now);
  return tokens_;
}

double EffectiveBurst(const TenantLimits& limits) {
  return limits.burst > 0 ? limits.burst : std::max(1.0, limits.rate_qps);
}

TenantRateLimiter::TenantRateLimiter(const Clock* clock)
    : clock_(clock != nullptr ? clock : Clock::Real()) {}

absl::Status TenantRateLimiter::Admit(const std::string& tenant, const TenantLimits& limits) {
  if (limits.rate_qps <= 0) return absl::OkStatus();
  const double burst = std::max(1.0, EffectiveBurst(limits));
  const absl::Time now = clock_->Now();
  absl::Duration wait;
  {
    absl::MutexLock lock(&mu_);
    auto [it, inserted] = buckets_.try_emplace(tenant, limits.rate_qps, burst, now);
    TokenBucket& bucket = it->second;
    if (!inserted && (bucket.rate() != limits.rate_qps || bucket.burst() != burst)) {
      bucket.Reconfigure(limits.rate_qps, burst, now);
    }
    if (bucket.TryTake(now, &wait)) return absl::OkStatus();
  }
  return status_payloads::WithRetryDelay(
      absl::ResourceExhaustedError(absl::StrFormat(
          "tenant \"%s\" exceeded its request rate (%g calls/s, burst %g); retry in %d ms", tenant,
          limits.rate_qps, burst, absl::ToInt64Milliseconds(wait))),
      wait);
}

}  // namespace placement::server
