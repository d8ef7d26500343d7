// tenant_limits.h — what one tenant may use of a shared server.
//
// Three independent limits, each 0 = unlimited:
//   - max_running: jobs of the tenant on workers at once. Further jobs wait in the queue even when a
//     worker is free, so one tenant cannot take every worker with long jobs (JobManager).
//   - max_queued:  jobs of the tenant waiting for a worker; one more → RESOURCE_EXHAUSTED (JobManager).
//   - rate_qps / burst: a token bucket over the tenant's calls; an empty bucket → RESOURCE_EXHAUSTED
//     (TenantRateLimiter, token_bucket.h).
// Joining an identical job already in flight (single-flight) creates no work and is not limited by
// max_running / max_queued; the call that joins still takes a token from the rate bucket.
//
// Example:
//   TenantLimits limits{.max_running = 2, .max_queued = 8, .rate_qps = 5, .burst = 20};
#ifndef PLACEMENT_SERVICE_JOBS_TENANT_LIMITS_H_
#define PLACEMENT_SERVICE_JOBS_TENANT_LIMITS_H_

namespace placement::jobs {

struct TenantLimits {
  // Jobs running on workers at once (0 = unlimited).
  int max_running = 0;
  // Jobs waiting for a worker (0 = unlimited).
  int max_queued = 0;
  // Sustained calls per second (0 = unlimited).
  double rate_qps = 0;
  // Calls allowed at once after a quiet period; 0 = max(1, rate_qps).
  double burst = 0;

  bool operator==(const TenantLimits& other) const {
    return max_running == other.max_running && max_queued == other.max_queued &&
           rate_qps == other.rate_qps && burst == other.burst;
  }
};

}  // namespace placement::jobs

#endif  // PLACEMENT_SERVICE_JOBS_TENANT_LIMITS_H_
