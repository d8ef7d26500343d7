// scaled_graphs.h — large graphs built from real structure and real costs, for benchmarks.
//
// No public graph with costs reaches 100K-1M ops, so these generators scale real ones up and say so in
// every op name prefix and in the corpus README ("scaled from X"):
//   * StackLayers: replicate one transformer layer of an msr operator graph (e.g. BERT-L12 training,
//     layer 6: its ops, costs, memory, colocation classes and edges) between the model's unchanged
//     embedding / head, chaining copy r's forward output into copy r+1 and copy r+1's gradient into
//     copy r exactly as the original layers are chained.
//   * LabelTransformerBlocks + StackLayers: the same for the blocks of a transformer training step
//     recovered from a PyTorch execution trace (the param GPT-2 trace: 36 blocks).
//   * UnrolledRnn: a synthetic-structure L-layer LSTM unrolled over T steps (forward cell, backward cell,
//     per-step loss, one weight update per layer colocated with all its cells), costs from the roofline.
//
// Example:
//   std::vector<int64_t> layer_of_op;
//   auto bert = ImportMsrText(path, text, ImportOptions(), &layer_of_op);
//   StackSpec spec{.template_layer = 6, .first_layer = 2, .last_layer = 12, .target_ops = 1'000'000};
//   absl::StatusOr<v1::Graph> big = StackLayers(bert->graph(), layer_of_op, spec);
#ifndef PLACEMENT_SERVICE_ENGINE_IMPORTERS_SCALED_GRAPHS_H_
#define PLACEMENT_SERVICE_ENGINE_IMPORTERS_SCALED_GRAPHS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "placement/v1/placement.pb.h"
#include "service/importers/import_options.h"

namespace placement::importers {

struct StackSpec {
  int64_t template_layer = 6;  // the layer copied; first_layer < template_layer < last_layer
  int64_t first_layer = 2;     // layers first..last are replaced by the copies
  int64_t last_layer = 12;
  int64_t target_ops = 100'000;  // copies = (target_ops - ops kept) / ops per layer, at least 1
};

// `layer_of_op[i]` is op i's layer id (-1 = none). Unlabelled ops whose every neighbour lies in one
// replaced layer belong to that layer (msr leaves the per-layer Gelu / AccumulateGrad nodes unlabelled).
// FAILED_PRECONDITION when the layers are not chained through one forward output and one gradient
// output per layer (the structure this replication relies on).
absl::StatusOr<v1::Graph> StackLayers(const v1::Graph& graph, const std::vector<int64_t>& layer_of_op,
                                      const StackSpec& spec);

// Layer ids for a pre-norm transformer training step imported from a PyTorch execution trace (chakra
// importer, ops in execution order): block k (1..n) = its forward ops from its first layer_norm to the
// next block's, and its backward ops between the matching NativeLayerNormBackward0 ops; 0 = embedding
// (and its backward), n+1 = final norm, head and loss; optimizer ops stay -1 (StackLayers attaches the
// per-parameter ones through their colocation groups). `blocks` receives n.
absl::StatusOr<std::vector<int64_t>> LabelTransformerBlocks(const v1::Graph& graph, int64_t* blocks);

struct RnnSpec {
  int32_t layers = 4;
  int32_t steps = 1000;
  int64_t batch = 64;
  int64_t hidden = 1024;
  int32_t optimizer_state_copies = 1;
  RooflineModel roofline;
};

// Ops: layers x steps x 2 cells + steps x 2 loss ops + layers updates.
v1::Graph UnrolledRnn(const RnnSpec& spec);

// `devices` GPUs (8 per node, links as DefaultCluster()) whose memory is the larger of
// `min_memory_bytes` and what makes the graph's persistent bytes fill about half of the total: the scaled
// graphs keep their sources' per-op memory, which no real cluster of a sensible size could hold, and a
// benchmark of placement speed should not be dominated by an infeasible memory budget.
v1::Cluster ClusterForGraph(const v1::Graph& graph, int32_t devices, int64_t min_memory_bytes);

}  // namespace placement::importers

#endif  // PLACEMENT_SERVICE_ENGINE_IMPORTERS_SCALED_GRAPHS_H_
