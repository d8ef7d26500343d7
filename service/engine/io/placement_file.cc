#include "service/engine/io/placement_file.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
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

absl::StatusOr<google::protobuf::Map<std::string, std::string>> PreviousPlacementOf(
    const v1::PlaceRequest& previous_request, const v1::Placement& placement) {
  const int ops = previous_request.graph().ops_size();
  const int devices = previous_request.cluster().devices_size();
  if (placement.device_size() != ops) {
    return absl::InvalidArgumentError(absl::StrCat("the previous placement has ", placement.device_size(),
                                                   " devices for the previous request's ", ops, " ops"));
  }
  google::protobuf::Map<std::string, std::string> previous;
  for (int i = 0; i < ops; ++i) {
    const int32_t d = placement.device(i);
    if (d < 0 || d >= devices) {
      return absl::InvalidArgumentError(absl::StrCat("the previous placement's device[", i, "] = ", d,
                                                     " is out of range (the previous cluster has ",
                                                     devices, " devices)"));
    }
    previous[previous_request.graph().ops(i).name()] = previous_request.cluster().devices(d).name();
  }
  return previous;
}

absl::StatusOr<google::protobuf::Map<std::string, std::string>> ReadPreviousPlacement(
    absl::string_view placement_path, absl::string_view previous_request_path) {
  absl::StatusOr<v1::Placement> placement = ReadPlacementFile(placement_path);
  if (!placement.ok()) return placement.status();
  absl::StatusOr<v1::PlaceRequest> request = ReadMessageFile<v1::PlaceRequest>(previous_request_path);
  if (!request.ok()) return request.status();
  absl::StatusOr<google::protobuf::Map<std::string, std::string>> previous =
      PreviousPlacementOf(*request, *placement);
  if (!previous.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(placement_path), " answering ",
                                                   std::string(previous_request_path), ": ",
                                                   previous.status().message()));
  }
  return previous;
}

}  // namespace placement::engine
