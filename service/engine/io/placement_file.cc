#include "service/engine/io/placement_file.h"

#include <set>
#include <string>

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

absl::Status SetPreviousPlacement(const v1::PlaceRequest& previous_request, const v1::Placement& placement,
                                  const v1::Cluster& cluster, v1::PlacementOptions* options) {
  absl::StatusOr<google::protobuf::Map<std::string, std::string>> previous =
      PreviousPlacementOf(previous_request, placement);
  if (!previous.ok()) return previous.status();
  *options->mutable_previous_placement() = *std::move(previous);
  std::set<std::string> present;
  for (const v1::Device& device : cluster.devices()) present.insert(device.name());
  options->clear_departed_devices();
  for (const v1::Device& device : previous_request.cluster().devices()) {
    if (present.count(device.name()) == 0) options->add_departed_devices(device.name());
  }
  return absl::OkStatus();
}

absl::Status ReadPreviousPlacement(absl::string_view placement_path, absl::string_view previous_request_path,
                                   const v1::Cluster& cluster, v1::PlacementOptions* options) {
  absl::StatusOr<v1::Placement> placement = ReadPlacementFile(placement_path);
  if (!placement.ok()) return placement.status();
  absl::StatusOr<v1::PlaceRequest> request = ReadMessageFile<v1::PlaceRequest>(previous_request_path);
  if (!request.ok()) return request.status();
  const absl::Status set = SetPreviousPlacement(*request, *placement, cluster, options);
  if (!set.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(placement_path), " answering ",
                                                   std::string(previous_request_path), ": ", set.message()));
  }
  return absl::OkStatus();
}

}  // namespace placement::engine
