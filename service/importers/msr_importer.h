// msr_importer.h — imports the NeurIPS'20 device-placement inputs (msr-fiddle/dnn-partitioning).
//
// Format (one JSON object): maxSizePerFPGA (bytes), maxFPGAs, maxCPUs, nodes[] {id, name,
// supportedOnFpga, cpuLatency, fpgaLatency, isBackwardNode, colorClass?, size, layerId?}, edges[]
// {sourceId, destId, cost, size}.
//
// Mapping (node latencies are milliseconds: the LayerGraphs equal the PipeDream profiles in ms):
//   op name      = node name (made unique with "#k"), type "forward" / "backward" (isBackwardNode)
//   compute_ns   = fpgaLatency ms (cpuLatency for nodes not supportedOnFpga, which may only run on "cpu")
//   persistent   = size (msr's memory model charges a node's size on its device for the whole run)
//   output_bytes = 0, or the largest out-edge size with ImportOptions::msr_count_activations
//   colocation   = "color<k>" for every colorClass with two or more nodes
//   edges        = sourceId -> destId with `size` bytes
// Cluster (unless --cluster): maxFPGAs devices "acc0".. of kind "gpu" with maxSizePerFPGA bytes on one
// node, plus maxCPUs "cpu<k>" devices (kind "cpu", 64 GiB) only when some node is CPU-only; links of
// 2 GiB/s and no latency (edge costs are size / 2^31 B/s in every file; their time unit differs between
// LayerGraphs and OperatorGraphs, so only that bandwidth is taken from them).
//
// Example:
//   absl::StatusOr<v1::PlaceRequest> r = ImportMsr("bert_l-3_training.json", ImportOptions());
#ifndef PLACEMENT_SERVICE_ENGINE_IMPORTERS_MSR_IMPORTER_H_
#define PLACEMENT_SERVICE_ENGINE_IMPORTERS_MSR_IMPORTER_H_

#include <cstdint>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "placement/v1/placement.pb.h"
#include "service/importers/import_options.h"

namespace placement::importers {

absl::StatusOr<v1::PlaceRequest> ImportMsr(absl::string_view path, const ImportOptions& options);

// Same, from the file's text (`path` only names it in errors). When `layer_of_op` is given it receives
// each op's `layerId` (-1 where the node has none), in op order (used by the scaled generators).
absl::StatusOr<v1::PlaceRequest> ImportMsrText(absl::string_view path, absl::string_view text,
                                               const ImportOptions& options,
                                               std::vector<int64_t>* layer_of_op = nullptr);

}  // namespace placement::importers

#endif  // PLACEMENT_SERVICE_ENGINE_IMPORTERS_MSR_IMPORTER_H_
