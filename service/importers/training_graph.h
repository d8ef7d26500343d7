// training_graph.h — turns a forward-only layer graph into the graph of one training step.
//
// Sources such as PipeDream profiles and ONNX models describe the forward pass only. A placement for
// training must also place the backward pass and the weight updates, and memory only behaves like a
// training step when activations stay alive until the backward pass has used them. The expansion (see
// TrainingOptions in import_options.h for the full rules):
//
//   forward edge a -> b (bytes B):   a -> b (B),   a -> b/backward (B: b's stashed input),
//                                    b/backward -> a/backward (B: gradient of a's output)
//   every layer L:                   L -> L/backward (L's output, kept for its own backward)
//   layers with parameters P > 0:    L/backward -> L/update (P: weight gradient);
//                                    L, L/backward, L/update in colocation group "L/params"
//
// Example:
//   LayerGraph layers;
//   layers.layers.push_back({.name = "conv1", .type = "Conv2d", .forward_ns = 1000, .backward_ns = 2000,
//                            .output_bytes = 4096, .parameter_bytes = 1024});
//   v1::Graph graph = ExpandForTraining(layers, options.training, options.roofline);
#ifndef PLACEMENT_SERVICE_ENGINE_IMPORTERS_TRAINING_GRAPH_H_
#define PLACEMENT_SERVICE_ENGINE_IMPORTERS_TRAINING_GRAPH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "placement/v1/graph.pb.h"
#include "service/importers/import_options.h"

namespace placement::importers {

struct LayerSpec {
  std::string name;  // unique within the graph
  std::string type;
  int64_t forward_ns = 0;
  int64_t backward_ns = 0;
  int64_t output_bytes = 0;     // forward activation
  int64_t parameter_bytes = 0;  // weights (fp32 bytes as stored)
  int64_t temp_bytes = 0;       // scratch while the forward op runs
  // False for data inputs (nothing to differentiate): no backward op, no gradient edges into it.
  bool needs_gradient = true;
};

struct LayerEdge {
  int32_t src = 0;
  int32_t dst = 0;
  int64_t bytes = 0;
};

struct LayerGraph {
  std::vector<LayerSpec> layers;
  std::vector<LayerEdge> edges;
};

// Suffixes of the generated op names.
inline constexpr char kBackwardSuffix[] = "/backward";
inline constexpr char kUpdateSuffix[] = "/update";
inline constexpr char kParamsGroupSuffix[] = "/params";

// Estimated time of one weight update of `parameter_bytes`: memory-bound, reading weights, gradient and
// state and writing weights and state, (3 + 2 x optimizer_state_copies) x P bytes, plus one launch.
int64_t WeightUpdateNs(int64_t parameter_bytes, const TrainingOptions& training,
                       const RooflineModel& roofline);

// The training step (forward, backward, update ops; op order: all forward ops in layer order, then the
// backward ops in reverse layer order, then the update ops).
v1::Graph ExpandForTraining(const LayerGraph& layers, const TrainingOptions& training,
                            const RooflineModel& roofline);

// The forward pass alone: one op per layer holding its parameters.
v1::Graph ForwardOnly(const LayerGraph& layers);

// ExpandForTraining when training.enabled, else ForwardOnly.
v1::Graph BuildLayerGraph(const LayerGraph& layers, const TrainingOptions& training,
                          const RooflineModel& roofline);

}  // namespace placement::importers

#endif  // PLACEMENT_SERVICE_ENGINE_IMPORTERS_TRAINING_GRAPH_H_
