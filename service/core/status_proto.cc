#include "service/core/status_proto.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "service/common/status_payloads.h"

namespace placement::core {

std::string TruncatedMessage(absl::string_view message) {
  if (message.size() <= kMaxStatusMessageBytes) return std::string(message);
  return absl::StrCat(message.substr(0, kMaxStatusMessageBytes), "... (truncated)");
}

v1::Status StatusToProto(const absl::Status& status) {
  v1::Status proto;
  proto.set_code(static_cast<int32_t>(status.code()));
  proto.set_message(TruncatedMessage(status.message()));
  if (auto retry = common::RetryInfoOf(status)) {
    proto.add_details()->PackFrom(*retry);
  }
  if (auto bad_request = common::BadRequestOf(status)) {
    proto.add_details()->PackFrom(*bad_request);
  }
  return proto;
}

std::vector<std::pair<std::string, std::string>> ViolationsFromMessage(absl::string_view message) {
  std::vector<std::pair<std::string, std::string>> violations;
  for (absl::string_view line : absl::StrSplit(message, '\n', absl::SkipEmpty())) {
    const size_t colon = line.find(": ");
    if (colon == absl::string_view::npos) {
      violations.emplace_back("", std::string(line));
    } else {
      violations.emplace_back(std::string(line.substr(0, colon)),
                              std::string(line.substr(colon + 2)));
    }
  }
  return violations;
}

}  // namespace placement::core
