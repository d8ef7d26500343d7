// importers.h — one entry point for every supported source format.
//
// Formats: "msr", "pipedream", "onnx", "chakra", "wfcommons", "pardnn" (see each *_importer.h for the
// mapping, below for the conventions they share, README.md for the licences of the test data).
//
// Example:
//   ImportOptions options;
//   absl::StatusOr<v1::PlaceRequest> request = Import("onnx", "light_resnet50.onnx", options);
//   if (!request.ok()) std::cerr << request.status() << "\n";   // names file and line / JSON path
//
// Conventions every importer follows:
//
// - **Units**: every time becomes integer nanoseconds and every size integer bytes, rounded to nearest;
//   negative, NaN or absurd values are errors naming the field.
// - **Errors**: `INVALID_ARGUMENT` naming the file and the line (`graph.txt:12: ...`), the line and column
//   of a JSON syntax error (`trace.json:3:14: invalid JSON: ...`), or the JSON path of a bad value
//   (`x.json: JSON path nodes[12].fpgaLatency: expected a number, found string`). nlohmann and ONNX
//   exceptions are caught at the importer boundary; nothing a file contains can crash the process.
// - **Gzip** is accepted everywhere (message_io's `ReadFileBytes` gunzips by magic bytes); chakra also
//   reads a `.tar.gz` holding one `.json`.
// - **Cluster**: `--cluster` (a JSON `Cluster`) wins; otherwise the source's own (msr: `maxFPGAs` devices of
//   `maxSizePerFPGA` bytes, 2 GiB/s links) or `DefaultCluster()`: 4 GPUs `gpu0..gpu3` of 16 GiB, speed 1.0,
//   one node, intra-node 100 GB/s + 2 µs, inter-node 12.5 GB/s + 10 µs. pardnn adds a `cpu0` device when
//   some ops are CPU-only.
// - **Validity**: `placement_offline convert` runs `BuildModel` on the result before writing it, so a
//   converted file is one the service accepts; the tests check the same for every fixture.
#ifndef PLACEMENT_SERVICE_ENGINE_IMPORTERS_IMPORTERS_H_
#define PLACEMENT_SERVICE_ENGINE_IMPORTERS_IMPORTERS_H_

#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "placement/v1/placement.pb.h"
#include "service/importers/import_options.h"

namespace placement::importers {

// The format names accepted by Import, in a fixed order.
const std::vector<std::string>& ImportFormats();

// Imports `path` as `format`. INVALID_ARGUMENT for an unknown format or a bad file (the message names
// the file and the line or JSON path), NOT_FOUND for a missing file.
absl::StatusOr<v1::PlaceRequest> Import(absl::string_view format, absl::string_view path,
                                        const ImportOptions& options);

}  // namespace placement::importers

#endif  // PLACEMENT_SERVICE_ENGINE_IMPORTERS_IMPORTERS_H_
