// place_call.h — the core's view of a received Place or SubmitPlacement call: the PlaceRequest's
// bytes as they arrived (for the repeat fast path, placement_core.h) and a decoder the core calls only
// when the bytes alone cannot answer.
//
// A SubmitPlacementRequest carries the PlaceRequest as its field 1; when that is all it carries, those
// bytes are exactly what a Place call of the same request sends, so both RPCs share repeat-index
// entries. Anything else in the wrapper (an unknown field, a repeated field 1) gives no bytes: such a
// call takes the decoding path, which is always right.
//
// Example (PlaceReactor):
//   core.Place(PlaceCallOf(*exchange, deadline, tenant), &exchange->response, &notes);
#ifndef PLACEMENT_SERVICE_SERVER_PLACE_CALL_H_
#define PLACEMENT_SERVICE_SERVER_PLACE_CALL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "placement/v1/placement_service.pb.h"
#include "service/core/placement_core.h"
#include "service/server/raw_call.h"

namespace placement::server {

// The payload of `pieces` (a serialized message, in pieces) when it consists of exactly one
// length-delimited field `field_number`, as views into `pieces`; empty otherwise.
std::vector<absl::string_view> SoleEmbeddedMessage(absl::Span<const absl::string_view> pieces,
                                                   int field_number);

core::PlaceCall PlaceCallOf(Exchange<v1::PlaceRequest, v1::PlaceResponse>& exchange,
                            absl::Time deadline, const std::string& tenant);
core::PlaceCall PlaceCallOf(
    Exchange<v1::SubmitPlacementRequest, v1::SubmitPlacementResponse>& exchange,
    const std::string& tenant);

}  // namespace placement::server

#endif  // PLACEMENT_SERVICE_SERVER_PLACE_CALL_H_
