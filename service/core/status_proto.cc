#include "service/core/status_proto.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "service/status_payloads/status_payloads.h"

namespace placement::core {

std::string TruncatedMessage(absl::string_view message) {
  if (message.size() <= kMaxStatusMessageBytes) return std::string(message);
  return absl::StrCat(message.substr(0, kMaxStatusMessageBytes), "... (truncated)");
}

v1::Status StatusToProto(const absl::Status& status) {
  v1::Status proto;
  proto.set_code(static_cast<int32_t>(status.code()));
  proto.set_message(TruncatedMessage(status.message()));
  if (auto retry = status_payloads::RetryInfoOf(status)) {
    proto.add_details()->PackFrom(*retry);
  }
  if (auto bad_request = status_payloads::BadRequestOf(status)) {
    proto.add_details()->PackFrom(*bad_request);
  }
  return proto;
}

}  // namespace placement::core
