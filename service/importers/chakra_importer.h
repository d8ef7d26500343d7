// chakra_importer.h — imports PyTorch execution traces (ET / Chakra JSON, schema 1.0.x and 1.1.x),
// optionally with the matching Kineto trace for GPU times.
//
// Input: an ET JSON file ({"schema", "nodes": [...]}), gzipped or not, or a .tar(.gz) holding one.
// Nodes nest by `parent` (1.0.x) or `ctrl_deps` (1.1.x). Graph construction:
//   * Top-level ops: descend from the root through wrappers ("[pytorch|profiler|...]" process/thread
//     nodes, "ProfilerStep#N", "## name ##" annotations, "Optimizer.step#..."/"Optimizer.zero_grad#...");
//     every other node reached is one op, named "<name>@<et id>". With several ProfilerSteps only one
//     step is imported (ImportOptions::chakra_step, default the first non-empty one); ops outside any
//     step wrapper (the autograd thread) belong to the step whose id range holds their id.
//   * Each op's tensor reads and writes are collected over its whole subtree (a read of a tensor
//     written earlier inside the same subtree is internal). Tensors are [id, storage, offset, numel,
//     elem_bytes, device] tuples (also inside GenericList[Tensor...]); bytes = numel x elem_bytes.
//   * Ops run in ET id order. A read of tensor t makes an edge from t's last writer (bytes of t); a write
//     to a tensor that already has a writer (in-place update) also orders it after the tensor's readers
//     since that write (0-byte edges). Parallel tensors between two ops add up on one edge.
//   * output_bytes = bytes of the op's written tensors that later ops read.
//   * State (parameters, gradients, optimizer state): device tensors read before any write in the step.
//     Their bytes are persistent on the first op touching them, and ops touching the same state tensor
//     share a colocation group ("state:<first op>") — so forward, backward and update of a layer stay
//     with its weights — except fused multi-tensor ops (more than 16 state tensors, e.g. _foreach_*).
//   * compute_ns: with a Kineto trace, the GPU time of the op's subtree: ET rf_id + k = Kineto cpu_op
//     "External id" for the offsets k at which names agree (one per profiled iteration), kernel /
//     memcpy / memset `dur` summed per cpu_op by "External id", median over the matching iterations.
//     Without one (or for ops Kineto does not know), a roofline estimate from shapes (conv, mm, addmm,
//     bmm, matmul, linear and their backward; 1 FLOP per element otherwise).
// Cluster: --cluster or DefaultCluster().
// Ops Kineto does not know fall back to the roofline. Kineto alignment: ET rf_ids equal Kineto External ids
// up to an offset per profiled iteration that drifts where one side recorded calls the other did not, so
// the two name sequences are aligned with local re-synchronisation, and every iteration that aligns
// (>= 95 % of the best) counts. Known limits: tensors are matched by tensor id, so an in-place write
// through a view of another tensor is not ordered after readers of the base tensor; memory of
// temporaries inside an op is not counted.
//
// Example:
//   ImportOptions options;
//   options.kineto_path = "resnet_kineto_pid23442.json.gz";
//   absl::StatusOr<v1::PlaceRequest> r = ImportChakra("resnet_et_2023_pid23442.json.gz", options);
#ifndef PLACEMENT_SERVICE_ENGINE_IMPORTERS_CHAKRA_IMPORTER_H_
#define PLACEMENT_SERVICE_ENGINE_IMPORTERS_CHAKRA_IMPORTER_H_

#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "placement/v1/placement.pb.h"
#include "service/importers/import_options.h"

namespace placement::importers {

absl::StatusOr<v1::PlaceRequest> ImportChakra(absl::string_view path, const ImportOptions& options);

// Statistics of the last import, for tests and the convert command's summary.
struct ChakraImportStats {
  int64_t et_nodes = 0;
  int64_t top_level_ops = 0;
  int64_t kineto_iterations_matched = 0;  // 0 = no Kineto times used
  int64_t ops_with_kineto_time = 0;
};
absl::StatusOr<v1::PlaceRequest> ImportChakra(absl::string_view path, const ImportOptions& options,
                                              ChakraImportStats* stats);

}  // namespace placement::importers

#endif  // PLACEMENT_SERVICE_ENGINE_IMPORTERS_CHAKRA_IMPORTER_H_
