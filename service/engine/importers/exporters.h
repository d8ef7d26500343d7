// exporters.h — writes a placement in formats other tools read.
//
//   dot     Graphviz digraph, ops filled with one colour per device, a legend of devices;
//   csv     "name,device" with a header line (RFC 4180 quoting), device = the device's name;
//   pardnn  the ParDNN reference's placement file: "name part" lines, part = -1 for devices of kind
//           "cpu" and 0..K-1 for the other devices in cluster order; NoOp-typed ops are left out, as
//           the reference does.
//
// Example:
//   absl::StatusOr<std::string> text = ExportPlacement("csv", request, placement);
#ifndef PLACEMENT_SERVICE_ENGINE_IMPORTERS_EXPORTERS_H_
#define PLACEMENT_SERVICE_ENGINE_IMPORTERS_EXPORTERS_H_

#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "placement/v1/placement.pb.h"

namespace placement::engine::importers {

const std::vector<std::string>& ExportFormats();

// INVALID_ARGUMENT when the placement does not fit the request (one device per op, each an index into
// cluster.devices) or the format is unknown.
absl::StatusOr<std::string> ExportPlacement(absl::string_view format, const v1::PlaceRequest& request,
                                            const v1::Placement& placement);

}  // namespace placement::engine::importers

#endif  // PLACEMENT_SERVICE_ENGINE_IMPORTERS_EXPORTERS_H_
