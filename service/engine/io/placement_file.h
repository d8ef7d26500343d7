// placement_file.h — a placement read from whatever file a tool was handed.
//
// Users pass `--placement=FILE` the output of whichever command they ran: a bare Placement
// (`placement_offline place`, `placementctl place`), a PlaceResponse, or an EvaluateResponse (`evaluate`
// of either tool). One reader accepts all three, in any format message_io.h reads.
//
// Example:
//   absl::StatusOr<v1::Placement> placement = ReadPlacementFile("placement.json");
//   // Re-placement: the answer to the old request as the new request's previous placement.
//   absl::Status set = ReadPreviousPlacement("placement.json", "old_request.json", request.cluster(),
//                                            request.mutable_options());
#ifndef PLACEMENT_SERVICE_ENGINE_IO_PLACEMENT_FILE_H_
#define PLACEMENT_SERVICE_ENGINE_IO_PLACEMENT_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "placement/v1/placement.pb.h"

namespace placement::engine {

// The Placement in `path`: the message itself, or the `placement` of a PlaceResponse or an
// EvaluateResponse (tried in that order). When none parses, the error of reading it as a Placement,
// which names the file.
absl::StatusOr<v1::Placement> ReadPlacementFile(absl::string_view path);

// Re-placement (`--previous=FILE --previous_request=FILE`): the answer `placement` to
// `previous_request` as PlacementOptions.previous_placement, op name -> device name. INVALID_ARGUMENT
// when the placement does not have one device index in range per op of that request.
absl::StatusOr<google::protobuf::Map<std::string, std::string>> PreviousPlacementOf(
    const v1::PlaceRequest& previous_request, const v1::Placement& placement);
// Re-placement in one step, what a caller whose cluster changed wants: `options` (of a request on
// `cluster`) get the previous placement of `placement` answering `previous_request`, and as
// options.departed_devices the devices of the previous cluster that `cluster` no longer has (so the
// server can tell a device that left from a misspelt one). INVALID_ARGUMENT as PreviousPlacementOf.
absl::Status SetPreviousPlacement(const v1::PlaceRequest& previous_request, const v1::Placement& placement,
                                  const v1::Cluster& cluster, v1::PlacementOptions* options);
// The same from the two files (the placement in any form ReadPlacementFile reads; the request in any
// format message_io.h reads). Errors name the file.
absl::Status ReadPreviousPlacement(absl::string_view placement_path, absl::string_view previous_request_path,
                                   const v1::Cluster& cluster, v1::PlacementOptions* options);

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_IO_PLACEMENT_FILE_H_
