// status_payloads.h — structured error details carried inside absl::Status (engine, service, client).
//
// Below the gRPC adapter every error is an absl::Status. Details a caller can act on travel as status
// payloads keyed by the type URL of a placement.v1 message, so the one function that maps absl::Status to
// grpc::Status (service/server/status_mapping.h) can turn them into `google.protobuf.Any` details, and
// the client, which turns those details back into payloads, reads them with the same functions:
//   - RetryInfo  (UNAVAILABLE, RESOURCE_EXHAUSTED): how long to wait before retrying;
//   - BadRequest (INVALID_ARGUMENT): every field violation, by field path.
// Protobuf messages and Abseil only (no gRPC, no jobs), so the client links it without the server.
//
// Example:
//   absl::Status full = WithRetryDelay(absl::UnavailableError("queue full"), absl::Seconds(1));
//   std::optional<absl::Duration> delay = RetryDelayOf(full);  // 1s
#ifndef PLACEMENT_SERVICE_STATUS_PAYLOADS_STATUS_PAYLOADS_H_
#define PLACEMENT_SERVICE_STATUS_PAYLOADS_STATUS_PAYLOADS_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "placement/v1/operation.pb.h"

namespace placement::status_payloads {

inline constexpr char kRetryInfoTypeUrl[] = "type.googleapis.com/placement.v1.RetryInfo";
inline constexpr char kBadRequestTypeUrl[] = "type.googleapis.com/placement.v1.BadRequest";

// Returns `status` with a RetryInfo payload saying "retry after `delay`".
absl::Status WithRetryDelay(absl::Status status, absl::Duration delay);
// The RetryInfo carried by `status`, if any (none when the payload does not parse).
std::optional<v1::RetryInfo> RetryInfoOf(const absl::Status& status);
// Its retry delay.
std::optional<absl::Duration> RetryDelayOf(const absl::Status& status);

// Returns `status` with a BadRequest payload listing `violations` as (field, description) pairs.
absl::Status WithFieldViolations(absl::Status status,
                                 const std::vector<std::pair<std::string, std::string>>& violations);
// The BadRequest carried by `status`, if any (none when the payload does not parse).
std::optional<v1::BadRequest> BadRequestOf(const absl::Status& status);
// The same violations as (field, description) pairs; empty when there is no BadRequest.
std::vector<std::pair<std::string, std::string>> FieldViolationsOf(const absl::Status& status);

}  // namespace placement::status_payloads

#endif  // PLACEMENT_SERVICE_STATUS_PAYLOADS_STATUS_PAYLOADS_H_
