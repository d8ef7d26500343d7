#include "service/server/place_call.h"

#include <cstddef>

namespace placement::server {
namespace {

// Reads a base-128 varint at byte `*offset` of the concatenated pieces; false when it runs off the
// end or over ten bytes.
bool ReadVarint(absl::Span<const absl::string_view> pieces, size_t* offset, uint64_t* value) {
  *value = 0;
  size_t skip = *offset;
  int shift = 0;
  for (absl::string_view piece : pieces) {
    if (skip >= piece.size()) {
      skip -= piece.size();
      continue;
    }
    for (size_t i = skip; i < piece.size(); ++i) {
      const auto byte = static_cast<uint8_t>(piece[i]);
      if (shift > 63) return false;
      *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      shift += 7;
      ++*offset;
      if ((byte & 0x80) == 0) return true;
    }
    skip = 0;
  }
  return false;
}

}  // namespace

std::vector<absl::string_view> SoleEmbeddedMessage(absl::Span<const absl::string_view> pieces,
                                                   int field_number) {
  size_t total = 0;
  for (absl::string_view piece : pieces) total += piece.size();
  size_t offset = 0;
  uint64_t tag = 0;
  uint64_t length = 0;
  constexpr uint64_t kLengthDelimited = 2;
  if (!ReadVarint(pieces, &offset, &tag) ||
      tag != ((static_cast<uint64_t>(field_number) << 3) | kLengthDelimited) ||
      !ReadVarint(pieces, &offset, &length) || length != total - offset) {
    return {};
  }
  std::vector<absl::string_view> payload;
  size_t skip = offset;
  for (absl::string_view piece : pieces) {
    if (skip >= piece.size()) {
      skip -= piece.size();
      continue;
    }
    payload.push_back(piece.substr(skip));
    skip = 0;
  }
  return payload;
}

core::PlaceCall PlaceCallOf(Exchange<v1::PlaceRequest, v1::PlaceResponse>& exchange,
                            absl::Time deadline, const std::string& tenant) {
  core::PlaceCall call;
  call.wire = exchange.Wire();
  call.decode = [&exchange]() -> absl::StatusOr<const v1::PlaceRequest*> {
    if (absl::Status decoded = exchange.Decode(); !decoded.ok()) return decoded;
    return &exchange.request;
  };
  call.deadline = deadline;
  call.tenant = tenant;
  return call;
}

core::PlaceCall PlaceCallOf(
    Exchange<v1::SubmitPlacementRequest, v1::SubmitPlacementResponse>& exchange,
    const std::string& tenant) {
  core::PlaceCall call;
  call.wire = SoleEmbeddedMessage(exchange.Wire(), v1::SubmitPlacementRequest::kRequestFieldNumber);
  call.decode = [&exchange]() -> absl::StatusOr<const v1::PlaceRequest*> {
    if (absl::Status decoded = exchange.Decode(); !decoded.ok()) return decoded;
    return &exchange.request.request();
  };
  call.tenant = tenant;
  return call;
}

}  // namespace placement::server
