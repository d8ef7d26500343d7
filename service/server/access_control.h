// access_control.h — who is calling and may they: authentication and the per-tenant request rate.
//
// Every PlacementService call passes Admit() first (the gRPC adapter hands it the `authorization`
// metadata). Without a TokenAuthenticator everyone is the tenant "" and the metadata is ignored; with
// one, a missing or unknown token is UNAUTHENTICATED. Then the tenant's token bucket takes one call
// (RESOURCE_EXHAUSTED + RetryInfo when empty). The grpc.health.v1 service, reflection and /metrics are
// separate services and never pass here: probes and tools need no token.
//
// LimitsFor() gives a tenant's limits (flags, overridden per tenant by the tokens file) to the job
// layer, which enforces max_running and max_queued.
//
// Example:
//   AccessControl access(authenticator.get(), {.jobs = {.max_queued = 8}, .rate_qps = 5}, nullptr, &metrics);
//   absl::StatusOr<std::string> tenant = access.Admit(authorization_metadata);
//   if (!tenant.ok()) return tenant.status();  // UNAUTHENTICATED or RESOURCE_EXHAUSTED
#ifndef PLACEMENT_SERVICE_SERVER_ACCESS_CONTROL_H_
#define PLACEMENT_SERVICE_SERVER_ACCESS_CONTROL_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/clock/clock.h"
#include "service/server/tenant_limits.h"
#include "service/server/token_bucket.h"
#include "service/server/auth_tokens.h"
#include "service/server/service_metrics.h"

namespace placement::server {

class AccessControl {
 public:
  // `authenticator` (null = no authentication), `clock` (null = real) and `metrics` (may be null) must
  // outlive this.
  AccessControl(TokenAuthenticator* authenticator, TenantLimits default_limits,
                const Clock* clock, ServiceMetrics* metrics);

  // The caller's tenant, after authentication and the rate limit.
  absl::StatusOr<std::string> Admit(absl::string_view authorization);

  TenantLimits LimitsFor(const std::string& tenant) const;

  bool authenticating() const { return authenticator_ != nullptr; }
  TokenAuthenticator* authenticator() const { return authenticator_; }

 private:
  TokenAuthenticator* const authenticator_;
  const TenantLimits default_limits_;
  ServiceMetrics* const metrics_;
  TenantRateLimiter rate_limiter_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVICE_SERVER_ACCESS_CONTROL_H_
