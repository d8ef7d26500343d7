#include "service/server/status_mapping.h"

#include "service/core/status_proto.h"

namespace placement::server {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  v1::Status proto = core::StatusToProto(status);
  const auto code = static_cast<grpc::StatusCode>(status.code());
  if (proto.details_size() == 0) return grpc::Status(code, proto.message());
  return grpc::Status(code, proto.message(), proto.SerializeAsString());
}

}  // namespace placement::server
