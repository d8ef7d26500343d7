#include "service/server/access_control.h"

#include <utility>

namespace placement::server {

AccessControl::AccessControl(TokenAuthenticator* authenticator, TenantLimits default_limits,
                             const Clock* clock, ServiceMetrics* metrics)
    : authenticator_(authenticator),
      default_limits_(default_limits),
      metrics_(metrics),
      rate_limiter_(clock) {}

absl::StatusOr<std::string> AccessControl::Admit(absl::string_view authorization) {
  std::string tenant;
  if (authenticator_ != nullptr) {
    absl::StatusOr<std::string> authenticated = authenticator_->Authenticate(authorization);
    if (!authenticated.ok()) {
      if (metrics_ != nullptr) {
        metrics_->RecordAuthFailure(authorization.empty() ? "missing" : "invalid");
      }
      return authenticated.status();
    }
    tenant = *std::move(authenticated);
  }
  if (absl::Status admitted = rate_limiter_.Admit(tenant, LimitsFor(tenant)); !admitted.ok()) {
    if (metrics_ != nullptr) metrics_->OnTenantRejected(tenant, "rate");
    return admitted;
  }
  return tenant;
}

TenantLimits AccessControl::LimitsFor(const std::string& tenant) const {
  if (authenticator_ == nullptr) return default_limits_;
  return authenticator_->LimitsFor(tenant, default_limits_);
}

}  // namespace placement::server
