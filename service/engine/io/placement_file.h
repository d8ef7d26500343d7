// placement_file.h — a placement read from whatever file a tool was handed.
//
// Users pass `--placement=FILE` the output of whichever command they ran: a bare Placement
// (`placement_offline place`, `placementctl place`), a PlaceResponse, or an EvaluateResponse (`evaluate`
// of either tool). One reader accepts all three, in any format message_io.h reads.
//
// Example:
//   absl::StatusOr<v1::Placement> placement = ReadPlacementFile("placement.json");
#ifndef PLACEMENT_SERVICE_ENGINE_IO_PLACEMENT_FILE_H_
#define PLACEMENT_SERVICE_ENGINE_IO_PLACEMENT_FILE_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "placement/v1/placement.pb.h"

namespace placement::engine {

// The Placement in `path`: the message itself, or the `placement` of a PlaceResponse or an
// EvaluateResponse (tried in that order). When none parses, the error of reading it as a Placement,
// which names the file.
absl::StatusOr<v1::Placement> ReadPlacementFile(absl::string_view path);

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_IO_PLACEMENT_FILE_H_
