// importers.h — one entry point for every supported source format.
//
// Formats: "msr", "pipedream", "onnx", "chakra", "wfcommons", "pardnn" (see each *_importer.h for the
// mapping, and README.md for units, defaults and licences of the test data).
//
// Example:
//   ImportOptions options;
//   absl::StatusOr<v1::PlaceRequest> request = Import("onnx", "light_resnet50.onnx", options);
//   if (!request.ok()) std::cerr << request.status() << "\n";   // names file and line / JSON path
#ifndef PLACEMENT_SERVICE_ENGINE_IMPORTERS_IMPORTERS_H_
#define PLACEMENT_SERVICE_ENGINE_IMPORTERS_IMPORTERS_H_

#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "placement/v1/placement.pb.h"
#include "service/engine/importers/import_options.h"

namespace placement::engine::importers {

// The format names accepted by Import, in a fixed order.
const std::vector<std::string>& ImportFormats();

// Imports `path` as `format`. INVALID_ARGUMENT for an unknown format or a bad file (the message names
// the file and the line or JSON path), NOT_FOUND for a missing file.
absl::StatusOr<v1::PlaceRequest> Import(absl::string_view format, absl::string_view path,
                                        const ImportOptions& options);

}  // namespace placement::engine::importers

#endif  // PLACEMENT_SERVICE_ENGINE_IMPORTERS_IMPORTERS_H_
