#include "service/status_payloads/status_payloads.h"

#include "absl/strings/cord.h"

namespace placement::status_payloads {

absl::Status WithRetryDelay(absl::Status status, absl::Duration delay) {
  v1::RetryInfo info;
  const int64_t nanos = absl::ToInt64Nanoseconds(delay);
  info.mutable_retry_delay()->set_seconds(nanos / 1'000'000'000);
  info.mutable_retry_delay()->set_nanos(static_cast<int32_t>(nanos % 1'000'000'000));
  status.SetPayload(kRetryInfoTypeUrl, absl::Cord(info.SerializeAsString()));
  return status;
}

std::optional<v1::RetryInfo> RetryInfoOf(const absl::Status& status) {
  auto payload = status.GetPayload(kRetryInfoTypeUrl);
  if (!payload.has_value()) return std::nullopt;
  v1::RetryInfo info;
  if (!info.ParseFromString(std::string(*payload))) return std::nullopt;
  return info;
}

std::optional<absl::Duration> RetryDelayOf(const absl::Status& status) {
  std::optional<v1::RetryInfo> info = RetryInfoOf(status);
  if (!info.has_value()) return std::nullopt;
  return absl::Seconds(info->retry_delay().seconds()) +
         absl::Nanoseconds(info->retry_delay().nanos());
}

absl::Status WithFieldViolations(
    absl::Status status, const std::vector<std::pair<std::string, std::string>>& violations) {
  v1::BadRequest bad_request;
  for (const auto& [field, description] : violations) {
    v1::FieldViolation* violation = bad_request.add_field_violations();
    violation->set_field(field);
    violation->set_description(description);
  }
  status.SetPayload(kBadRequestTypeUrl, absl::Cord(bad_request.SerializeAsString()));
  return status;
}

std::optional<v1::BadRequest> BadRequestOf(const absl::Status& status) {
  auto payload = status.GetPayload(kBadRequestTypeUrl);
  if (!payload.has_value()) return std::nullopt;
  v1::BadRequest bad_request;
  if (!bad_request.ParseFromString(std::string(*payload))) return std::nullopt;
  return bad_request;
}

std::vector<std::pair<std::string, std::string>> FieldViolationsOf(const absl::Status& status) {
  std::vector<std::pair<std::string, std::string>> violations;
  if (std::optional<v1::BadRequest> bad_request = BadRequestOf(status)) {
    for (const v1::FieldViolation& v : bad_request->field_violations()) {
      violations.emplace_back(v.field(), v.description());
    }
  }
  return violations;
}

}  // namespace placement::status_payloads
