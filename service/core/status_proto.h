// status_proto.h — absl::Status ↔ placement.v1.Status (the google.rpc.Status-shaped message).
//
// Used for the `error` of a finished Operation and, by status_mapping.h, for the
// grpc-status-details-bin trailer. Known payloads (service/status_payloads/status_payloads.h: RetryInfo,
// BadRequest) become `google.protobuf.Any` details; messages are truncated to kMaxStatusMessageBytes.
//
// Example:
//   v1::Status proto = StatusToProto(absl::InvalidArgumentError("graph.ops[3].name: empty"));
#ifndef PLACEMENT_SERVICE_CORE_STATUS_PROTO_H_
#define PLACEMENT_SERVICE_CORE_STATUS_PROTO_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "placement/v1/operation.pb.h"

namespace placement::core {

// Longest status message sent to a client; the BadRequest detail still lists every violation.
inline constexpr size_t kMaxStatusMessageBytes = 4096;

std::string TruncatedMessage(absl::string_view message);

// Code, (truncated) message and details from the known payloads.
v1::Status StatusToProto(const absl::Status& status);

}  // namespace placement::core

#endif  // PLACEMENT_SERVICE_CORE_STATUS_PROTO_H_
