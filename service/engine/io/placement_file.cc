#include "service/engine/io/placement_file.h"

#include "placement/v1/placement_service.pb.h"
#include "service/engine/io/message_io.h"

namespace placement::engine {

absl::StatusOr<v1::Placement> ReadPlacementFile(absl::string_view path) {
  absl::StatusOr<v1::Placement> placement = ReadMessageFile<v1::Placement>(path);
  if (placement.ok()) return placement;
  if (auto response = ReadMessageFile<v1::PlaceResponse>(path); response.ok()) {
    return response->placement();
  }
  if (auto response = ReadMessageFile<v1::EvaluateResponse>(path); response.ok()) {
    return response->placement();
  }
  return placement.status();
}

}  // namespace placement::engine
