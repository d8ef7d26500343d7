// status_mapping.h — the one place where absl::Status becomes grpc::Status.
//
// The code is carried over unchanged (the numeric values are the same), the message is truncated to
// kMaxStatusMessageBytes, and known payloads become details in the grpc-status-details-bin trailer as a
// serialized placement.v1.Status (google.rpc.Status wire shape): BadRequest for INVALID_ARGUMENT (every
// field violation), RetryInfo for UNAVAILABLE (when to retry). Clients read them with
// grpc::Status::error_details() or grpc::ExtractErrorDetails<placement::v1::Status>.
//
// Example:
//   return reactor->Finish(ToGrpcStatus(absl::UnavailableError("queue full")));
#ifndef PLACEMENT_SERVICE_SERVER_STATUS_MAPPING_H_
#define PLACEMENT_SERVICE_SERVER_STATUS_MAPPING_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace placement::server {

grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace placement::server

#endif  // PLACEMENT_SERVICE_SERVER_STATUS_MAPPING_H_
