#include "service/importers/training_graph.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace placement::importers {
namespace {

void AddEdge(v1::Graph& graph, int32_t src, int32_t dst, int64_t bytes) {
  v1::Edge* edge = graph.add_edges();
  edge->set_src(src);
  edge->set_dst(dst);
  edge->set_bytes(bytes);
}

v1::Op* AddForwardOp(v1::Graph& graph, const LayerSpec& layer) {
  v1::Op* op = graph.add_ops();
  op->set_name(layer.name);
  op->set_type(layer.type);
  op->set_compute_ns(layer.forward_ns);
  op->set_output_bytes(layer.output_bytes);
  op->set_persistent_bytes(layer.parameter_bytes);
  op->set_temp_bytes(layer.temp_bytes);
  return op;
}

}  // namespace

int64_t WeightUpdateNs(int64_t parameter_bytes, const TrainingOptions& training,
                       const RooflineModel& roofline) {
  const double traffic =
      static_cast<double>(parameter_bytes) * (3.0 + 2.0 * training.optimizer_state_copies);
  return roofline.launch_overhead_ns +
         static_cast<int64_t>(std::llround(traffic * 1e9 / roofline.memory_bytes_per_second));
}

v1::Graph ForwardOnly(const LayerGraph& layers) {
  v1::Graph graph;
  graph.mutable_ops()->Reserve(static_cast<int>(layers.layers.size()));
  for (const LayerSpec& layer : layers.layers) AddForwardOp(graph, layer);
  for (const LayerEdge& edge : layers.edges) AddEdge(graph, edge.src, edge.dst, edge.bytes);
  return graph;
}

v1::Graph ExpandForTraining(const LayerGraph& layers, const TrainingOptions& training,
                            const RooflineModel& roofline) {
  const int32_t n = static_cast<int32_t>(layers.layers.size());
  v1::Graph graph;
  graph.mutable_ops()->Reserve(3 * n);
  graph.mutable_edges()->Reserve(static_cast<int>(3 * layers.edges.size()) + 2 * n);

  for (const LayerSpec& layer : layers.layers) AddForwardOp(graph, layer);

  // Backward ops in reverse layer order (the order autograd would run them in a chain).
  std::vector<int32_t> backward(n, -1);
  for (int32_t i = n - 1; i >= 0; --i) {
    const LayerSpec& layer = layers.layers[i];
    if (!layer.needs_gradient) continue;
    backward[i] = graph.ops_size();
    v1::Op* op = graph.add_ops();
    op->set_name(absl::StrCat(layer.name, kBackwardSuffix));
    op->set_type(absl::StrCat(layer.type, "Backward"));
    op->set_compute_ns(layer.backward_ns);
  }

  std::vector<int64_t> gradient_bytes(n, 0);  // what each backward op produces
  for (const LayerEdge& edge : layers.edges) {
    AddEdge(graph, edge.src, edge.dst, edge.bytes);
    if (backward[edge.dst] >= 0) {
      // The backward op of the consumer needs the input it read: keeps the activation alive.
      AddEdge(graph, edge.src, backward[edge.dst], edge.bytes);
      if (backward[edge.src] >= 0) {
        AddEdge(graph, backward[edge.dst], backward[edge.src], edge.bytes);
        gradient_bytes[edge.dst] += edge.bytes;
      }
    }
  }
  for (int32_t i = 0; i < n; ++i) {
    if (backward[i] < 0) continue;
    const LayerSpec& layer = layers.layers[i];
    AddEdge(graph, i, backward[i], layer.output_bytes);
    graph.mutable_ops(backward[i])->set_output_bytes(gradient_bytes[i] + layer.parameter_bytes);
  }

  for (int32_t i = 0; i < n; ++i) {
    const LayerSpec& layer = layers.layers[i];
    if (backward[i] < 0 || layer.parameter_bytes <= 0) continue;
    const std::string group = absl::StrCat(layer.name, kParamsGroupSuffix);
    const int32_t update = graph.ops_size();
    v1::Op* op = graph.add_ops();
    op->set_name(absl::StrCat(layer.name, kUpdateSuffix));
    op->set_type("WeightUpdate");
    op->set_compute_ns(WeightUpdateNs(layer.parameter_bytes, training, roofline));
    op->set_persistent_bytes(layer.parameter_bytes * training.optimizer_state_copies);
    op->set_colocation_group(group);
    graph.mutable_ops(i)->set_colocation_group(group);
    graph.mutable_ops(backward[i])->set_colocation_group(group);
    AddEdge(graph, backward[i], update, layer.parameter_bytes);
  }
  return graph;
}

v1::Graph BuildLayerGraph(const LayerGraph& layers, const TrainingOptions& training,
                          const RooflineModel& roofline) {
  return training.enabled ? ExpandForTraining(layers, training, roofline) : ForwardOnly(layers);
}

}  // namespace placement::importers
