// tenant_limits.h — what one tenant may use of a shared server.
//
// Three independent limits, each 0 = unlimited, from the --tenant_* flags and the tokens file's
// overrides (auth_tokens.h):
//   - jobs.max_running: jobs of the tenant on workers at once. Further jobs wait in the queue even when
//     a worker is free, so one tenant cannot take every worker with long jobs (JobManager enforces it).
//   - jobs.max_queued:  jobs of the tenant waiting for a worker; one more → RESOURCE_EXHAUSTED
//     (JobManager).
//   - rate_qps / burst: a token bucket over the tenant's calls; an empty bucket → RESOURCE_EXHAUSTED
//     (TenantRateLimiter, token_bucket.h, before the call's body is decoded).
// Joining an identical job already in flight (single-flight) creates no work and is not limited by
// max_running / max_queued; the call that joins still takes a token from the rate bucket.
//
// Example:
//   TenantLimits limits{.jobs = {.max_running = 2, .max_queued = 8}, .rate_qps = 5, .burst = 20};
#ifndef PLACEMENT_SERVICE_SERVER_TENANT_LIMITS_H_
#define PLACEMENT_SERVICE_SERVER_TENANT_LIMITS_H_

#include "service/jobs/job_manager.h"

namespace placement::server {

struct TenantLimits {
  // What JobManager holds the tenant's jobs to (max_running, max_queued).
  jobs::TenantJobLimits jobs;
  // Sustained calls per second (0 = unlimited).
  double rate_qps = 0;
  // Calls allowed at once after a quiet period; 0 = max(1, rate_qps).
  double burst = 0;

  bool operator==(const TenantLimits& other) const {
    return jobs == other.jobs && rate_qps == other.rate_qps && burst == other.burst;
  }
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVICE_SERVER_TENANT_LIMITS_H_
