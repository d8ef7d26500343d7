#include "service/importers/scaled_graphs.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "service/importers/roofline.h"
#include "service/importers/training_graph.h"

namespace placement::importers {
namespace {

struct Neighbours {
  std::vector<std::vector<int32_t>> in, out;  // edge indices
};

Neighbours IndexEdges(const v1::Graph& graph) {
  Neighbours n;
  n.in.resize(graph.ops_size());
  n.out.resize(graph.ops_size());
  for (int e = 0; e < graph.edges_size(); ++e) {
    n.out[graph.edges(e).src()].push_back(e);
    n.in[graph.edges(e).dst()].push_back(e);
  }
  return n;
}

void AddEdge(v1::Graph& graph, int32_t src, int32_t dst, int64_t bytes) {
  v1::Edge* edge = graph.add_edges();
  edge->set_src(src);
  edge->set_dst(dst);
  edge->set_bytes(bytes);
}

}  // namespace

absl::StatusOr<v1::Graph> StackLayers(const v1::Graph& graph, const std::vector<int64_t>& layer_of_op,
                                      const StackSpec& spec) {
  const int32_t n = graph.ops_size();
  if (static_cast<int32_t>(layer_of_op.size()) != n) {
    return absl::InvalidArgumentError("layer_of_op must have one entry per op");
  }
  if (!(spec.first_layer < spec.template_layer && spec.template_layer < spec.last_layer)) {
    return absl::InvalidArgumentError("need first_layer < template_layer < last_layer");
  }
  for (int e = 0; e < graph.edges_size(); ++e) {
    const v1::Edge& edge = graph.edges(e);
    if (edge.src() < 0 || edge.src() >= n || edge.dst() < 0 || edge.dst() >= n) {
      return absl::InvalidArgumentError(absl::StrCat("graph.edges[", e, "]: op index out of range"));
    }
  }
  const Neighbours nb = IndexEdges(graph);
  auto in_range = [&](int64_t layer) { return layer >= spec.first_layer && layer <= spec.last_layer; };

  // Layer of every op, with unlabelled ops attached to the one replaced layer that all their labelled
  // neighbours and colocation-group mates lie in (msr leaves the per-layer Gelu / AccumulateGrad nodes
  // unlabelled; a trace's per-parameter optimizer ops are tied to their layer only by the group).
  absl::flat_hash_map<std::string, absl::flat_hash_set<int64_t>> layers_of_group;
  for (int32_t i = 0; i < n; ++i) {
    if (layer_of_op[i] >= 0 && !graph.ops(i).colocation_group().empty()) {
      layers_of_group[graph.ops(i).colocation_group()].insert(layer_of_op[i]);
    }
  }
  std::vector<int64_t> layer = layer_of_op;
  for (int32_t i = 0; i < n; ++i) {
    if (layer_of_op[i] >= 0) continue;
    int64_t only = -1;
    bool single = true;
    auto consider = [&](int64_t other) {
      if (other < 0) return;
      if (only >= 0 && other != only) single = false;
      only = other;
    };
    for (const auto* list : {&nb.in[i], &nb.out[i]}) {
      for (int32_t e : *list) {
        const v1::Edge& edge = graph.edges(e);
        consider(layer_of_op[edge.src() == i ? edge.dst() : edge.src()]);
      }
    }
    if (auto group = layers_of_group.find(graph.ops(i).colocation_group());
        group != layers_of_group.end()) {
      for (int64_t other : group->second) consider(other);
    }
    if (single && in_range(only)) layer[i] = only;
  }

  const int64_t t = spec.template_layer;
  std::vector<int32_t> members;  // template ops, in op order
  std::vector<int32_t> local(n, -1);
  for (int32_t i = 0; i < n; ++i) {
    if (layer[i] == t) {
      local[i] = static_cast<int32_t>(members.size());
      members.push_back(i);
    }
  }
  if (members.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("no op has layer id ", t));
  }

  // Interfaces between consecutive layers: exactly one source op each way.
  struct Interface {
    int32_t source = -1;
    std::vector<std::pair<int32_t, int64_t>> targets;  // (op, bytes)
  };
  // Kept ops wired to several replaced layers (e.g. BERT's attention mask, fed to every layer) are not
  // part of the chain: their edges to the template are repeated for every copy instead.
  std::vector<bool> broadcast(n, false);
  for (int32_t i = 0; i < n; ++i) {
    if (in_range(layer[i])) continue;
    absl::flat_hash_set<int64_t> touched;
    for (const auto* list : {&nb.in[i], &nb.out[i]}) {
      for (int32_t e : *list) {
        const v1::Edge& edge = graph.edges(e);
        const int64_t other = layer[edge.src() == i ? edge.dst() : edge.src()];
        if (in_range(other)) touched.insert(other);
      }
    }
    broadcast[i] = touched.size() >= 2;
  }
  auto interface = [&](int64_t from, int64_t to) -> absl::StatusOr<Interface> {
    Interface out;
    for (const v1::Edge& edge : graph.edges()) {
      if (layer[edge.src()] != from || layer[edge.dst()] != to) continue;
      if (broadcast[edge.src()] || broadcast[edge.dst()]) continue;
      if (out.source >= 0 && out.source != edge.src()) {
        return absl::FailedPreconditionError(absl::StrCat("layer ", from, " feeds layer ", to,
                                                          " from more than one op"));
      }
      out.source = edge.src();
      out.targets.push_back({edge.dst(), edge.bytes()});
    }
    if (out.source < 0) {
      return absl::FailedPreconditionError(absl::StrCat("no edge from layer ", from, " to ", to));
    }
    return out;
  };
  absl::StatusOr<Interface> fwd_in = interface(t - 1, t);    // targets: template entry points
  absl::StatusOr<Interface> fwd_out = interface(t, t + 1);   // source: template forward output
  absl::StatusOr<Interface> bwd_in = interface(t + 1, t);    // targets: template gradient entry
  absl::StatusOr<Interface> bwd_out = interface(t, t - 1);   // source: template gradient output
  absl::StatusOr<Interface> model_in = interface(spec.first_layer - 1, spec.first_layer);
  absl::StatusOr<Interface> model_out = interface(spec.last_layer, spec.last_layer + 1);
  absl::StatusOr<Interface> grad_in = interface(spec.last_layer + 1, spec.last_layer);
  absl::StatusOr<Interface> grad_out = interface(spec.first_layer, spec.first_layer - 1);
  for (const auto* s : {&fwd_in, &fwd_out, &bwd_in, &bwd_out, &model_in, &model_out, &grad_in, &grad_out}) {
    if (!s->ok()) return s->status();
  }

  // Groups that also hold kept ops keep their name in every copy (the copies must join them); groups
  // within the replaced layers become one group per copy.
  absl::flat_hash_set<std::string> shared_groups;
  for (int32_t i = 0; i < n; ++i) {
    if (!in_range(layer[i]) && !graph.ops(i).colocation_group().empty()) {
      shared_groups.insert(graph.ops(i).colocation_group());
    }
  }

  v1::Graph out;
  std::vector<int32_t> kept(n, -1);  // original op -> new index for ops outside the replaced layers
  int32_t kept_count = 0;
  for (int32_t i = 0; i < n; ++i) {
    if (!in_range(layer[i])) kept[i] = kept_count++;
  }
  const int64_t per_copy = static_cast<int64_t>(members.size());
  const int64_t copies = std::max<int64_t>(1, (spec.target_ops - kept_count) / per_copy);
  out.mutable_ops()->Reserve(static_cast<int>(kept_count + copies * per_copy));
  for (int32_t i = 0; i < n; ++i) {
    if (kept[i] >= 0) *out.add_ops() = graph.ops(i);
  }
  auto copy_index = [&](int64_t r, int32_t template_op) {
    return static_cast<int32_t>(kept_count + r * per_copy + local[template_op]);
  };
  for (int64_t r = 0; r < copies; ++r) {
    for (int32_t i : members) {
      v1::Op* op = out.add_ops();
      *op = graph.ops(i);
      op->set_name(absl::StrCat("L", r, "/", graph.ops(i).name()));
      if (!op->colocation_group().empty() && !shared_groups.contains(op->colocation_group())) {
        op->set_colocation_group(absl::StrCat("L", r, "/", op->colocation_group()));
      }
    }
  }

  // Edges among kept ops, and between the template and kept ops (once per copy).
  for (const v1::Edge& edge : graph.edges()) {
    const int32_t s = edge.src(), d = edge.dst();
    if (kept[s] >= 0 && kept[d] >= 0) {
      AddEdge(out, kept[s], kept[d], edge.bytes());
    } else if (layer[s] == t && layer[d] == t) {
      for (int64_t r = 0; r < copies; ++r) AddEdge(out, copy_index(r, s), copy_index(r, d), edge.bytes());
    } else if (layer[s] == t && kept[d] >= 0) {
      for (int64_t r = 0; r < copies; ++r) AddEdge(out, copy_index(r, s), kept[d], edge.bytes());
    } else if (kept[s] >= 0 && layer[d] == t) {
      // The chain into the first replaced layer is rebuilt below; other kept -> layer edges repeat.
      if (s == model_in->source && !broadcast[s]) continue;
      for (int64_t r = 0; r < copies; ++r) AddEdge(out, kept[s], copy_index(r, d), edge.bytes());
    }
  }
  // The chains: forward output of copy r feeds copy r+1, gradient of copy r+1 feeds copy r.
  for (int64_t r = 0; r < copies; ++r) {
    const int32_t forward_source =
        r == 0 ? kept[model_in->source] : copy_index(r - 1, fwd_out->source);
    for (const auto& [target, bytes] : fwd_in->targets) {
      AddEdge(out, forward_source, copy_index(r, target), bytes);
    }
    const int32_t gradient_source =
        r == copies - 1 ? kept[grad_in->source] : copy_index(r + 1, bwd_out->source);
    for (const auto& [target, bytes] : bwd_in->targets) {
      AddEdge(out, gradient_source, copy_index(r, target), bytes);
    }
  }
  for (const auto& [target, bytes] : model_out->targets) {
    AddEdge(out, copy_index(copies - 1, fwd_out->source), kept[target], bytes);
  }
  for (const auto& [target, bytes] : grad_out->targets) {
    AddEdge(out, copy_index(0, bwd_out->source), kept[target], bytes);
  }
  return out;
}

absl::StatusOr<std::vector<int64_t>> LabelTransformerBlocks(const v1::Graph& graph, int64_t* blocks) {
  std::vector<int32_t> forward_norms, backward_norms;
  for (int32_t i = 0; i < graph.ops_size(); ++i) {
    const std::string& type = graph.ops(i).type();
    if (type == "aten::layer_norm") forward_norms.push_back(i);
    if (type == "NativeLayerNormBackward0") backward_norms.push_back(i);
  }
  const int64_t n = (static_cast<int64_t>(forward_norms.size()) - 1) / 2;
  if (n < 3 || forward_norms.size() != static_cast<size_t>(2 * n + 1) ||
      backward_norms.size() != forward_norms.size() || backward_norms.front() < forward_norms.back()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "not a pre-norm transformer trace: ", forward_norms.size(), " layer_norm and ",
        backward_norms.size(), " NativeLayerNormBackward0 ops (expected 2 per block + 1, blocks >= 3)"));
  }
  std::vector<int64_t> layer(graph.ops_size(), -1);
  auto label = [&](int32_t from, int32_t to, int64_t id) {  // [from, to)
    for (int32_t i = from; i < to; ++i) layer[i] = id;
  };
  label(0, forward_norms[0], 0);
  for (int64_t k = 0; k < n; ++k) label(forward_norms[2 * k], forward_norms[2 * k + 2], k + 1);
  label(forward_norms[2 * n], backward_norms[0] + 1, n + 1);  // final norm, head, loss and their backward
  for (int64_t j = 0; j < n; ++j) label(backward_norms[2 * j] + 1, backward_norms[2 * j + 2] + 1, n - j);
  // After the first block's backward: the embedding's backward (layer 0); optimizer ops stay unlabelled.
  for (int32_t i = backward_norms[2 * n] + 1; i < graph.ops_size(); ++i) {
    const std::string& type = graph.ops(i).type();
    if (absl::StrContains(type, "Backward") || absl::StrContains(type, "AccumulateGrad")) layer[i] = 0;
  }
  if (blocks != nullptr) *blocks = n;
  return layer;
}

v1::Graph UnrolledRnn(const RnnSpec& spec) {
  const int64_t b = spec.batch, h = spec.hidden;
  const int64_t hidden_bytes = b * h * 4;             // one h or c tensor, fp32
  const int64_t gates_bytes = b * 4 * h * 4;          // the four gates, kept for backward
  const int64_t weight_bytes = (2 * h) * (4 * h) * 4 + 4 * h * 4;
  const double cell_flops = 2.0 * b * (2 * h) * (4 * h) + 10.0 * b * h;
  const double cell_traffic = weight_bytes + 3.0 * hidden_bytes + gates_bytes + 2.0 * hidden_bytes;
  const int64_t forward_ns = RooflineNs(cell_flops, cell_traffic, spec.roofline);
  const int64_t backward_ns = RooflineNs(2.0 * cell_flops, 2.0 * cell_traffic, spec.roofline);
  const int64_t loss_ns = RooflineNs(5.0 * b * h, 2.0 * hidden_bytes, spec.roofline);
  const int32_t layers = std::max(1, spec.layers), steps = std::max(1, spec.steps);

  v1::Graph graph;
  const int64_t total = 2LL * layers * steps + 2LL * steps + layers;
  graph.mutable_ops()->Reserve(static_cast<int>(total));
  graph.mutable_edges()->Reserve(static_cast<int>(8LL * layers * steps + 4LL * steps));
  auto forward = [&](int32_t l, int32_t s) { return l * steps + s; };
  const int32_t backward_base = layers * steps;
  auto backward = [&](int32_t l, int32_t s) { return backward_base + l * steps + s; };
  const int32_t loss_base = 2 * layers * steps;
  auto loss = [&](int32_t s) { return loss_base + s; };
  auto loss_backward = [&](int32_t s) { return loss_base + steps + s; };
  const int32_t update_base = loss_base + 2 * steps;

  for (int32_t l = 0; l < layers; ++l) {
    for (int32_t s = 0; s < steps; ++s) {
      v1::Op* op = graph.add_ops();
      op->set_name(absl::StrCat("rnn/l", l, "/t", s));
      op->set_type("LSTMCell");
      op->set_compute_ns(forward_ns);
      op->set_output_bytes(2 * hidden_bytes + gates_bytes);
      op->set_colocation_group(absl::StrCat("rnn/l", l, "/params"));
    }
  }
  for (int32_t l = 0; l < layers; ++l) {
    for (int32_t s = 0; s < steps; ++s) {
      v1::Op* op = graph.add_ops();
      op->set_name(absl::StrCat("rnn/l", l, "/t", s, "/backward"));
      op->set_type("LSTMCellBackward");
      op->set_compute_ns(backward_ns);
      op->set_output_bytes(3 * hidden_bytes);
      op->set_colocation_group(absl::StrCat("rnn/l", l, "/params"));
    }
  }
  for (int32_t s = 0; s < steps; ++s) {
    v1::Op* op = graph.add_ops();
    op->set_name(absl::StrCat("rnn/loss/t", s));
    op->set_type("Loss");
    op->set_compute_ns(loss_ns);
    op->set_output_bytes(hidden_bytes);
  }
  for (int32_t s = 0; s < steps; ++s) {
    v1::Op* op = graph.add_ops();
    op->set_name(absl::StrCat("rnn/loss/t", s, "/backward"));
    op->set_type("LossBackward");
    op->set_compute_ns(loss_ns);
    op->set_output_bytes(hidden_bytes);
  }
  TrainingOptions training;
  training.optimizer_state_copies = spec.optimizer_state_copies;
  for (int32_t l = 0; l < layers; ++l) {
    v1::Op* op = graph.add_ops();
    op->set_name(absl::StrCat("rnn/l", l, "/update"));
    op->set_type("WeightUpdate");
    op->set_compute_ns(WeightUpdateNs(weight_bytes, training, spec.roofline));
    // Weights, their gradient accumulator and the optimizer state live with the layer.
    op->set_persistent_bytes(weight_bytes * (2 + spec.optimizer_state_copies));
    op->set_colocation_group(absl::StrCat("rnn/l", l, "/params"));
  }

  for (int32_t l = 0; l < layers; ++l) {
    for (int32_t s = 0; s < steps; ++s) {
      if (s > 0) {
        AddEdge(graph, forward(l, s - 1), forward(l, s), 2 * hidden_bytes);        // h, c
        AddEdge(graph, forward(l, s - 1), backward(l, s), 2 * hidden_bytes);       // stashed input
        AddEdge(graph, backward(l, s), backward(l, s - 1), 2 * hidden_bytes);      // dh, dc
      }
      if (l > 0) {
        AddEdge(graph, forward(l - 1, s), forward(l, s), hidden_bytes);            // x = h below
        AddEdge(graph, forward(l - 1, s), backward(l, s), hidden_bytes);
        AddEdge(graph, backward(l, s), backward(l - 1, s), hidden_bytes);          // dx
      }
      AddEdge(graph, forward(l, s), backward(l, s), gates_bytes);                  // own gates
      AddEdge(graph, backward(l, s), update_base + l, 0);  // gradient accumulated in place
    }
  }
  for (int32_t s = 0; s < steps; ++s) {
    AddEdge(graph, forward(layers - 1, s), loss(s), hidden_bytes);
    AddEdge(graph, loss(s), loss_backward(s), hidden_bytes);
    AddEdge(graph, loss_backward(s), backward(layers - 1, s), hidden_bytes);
  }
  return graph;
}

v1::Cluster ClusterForGraph(const v1::Graph& graph, int32_t devices, int64_t min_memory_bytes) {
  devices = std::clamp<int32_t>(devices, 1, 1024);
  double persistent = 0;
  for (const v1::Op& op : graph.ops()) persistent += static_cast<double>(op.persistent_bytes());
  const double wanted = std::ceil(2.0 * persistent / devices);
  // Stay well inside the model's 1 PiB limit on any byte count.
  const int64_t memory = static_cast<int64_t>(
      std::min(std::max(wanted, static_cast<double>(min_memory_bytes)), 1e15));
  v1::Cluster cluster = DefaultCluster();
  const v1::Device prototype = cluster.devices(0);
  cluster.clear_devices();
  for (int32_t d = 0; d < devices; ++d) {
    v1::Device* device = cluster.add_devices();
    *device = prototype;
    device->set_name(absl::StrCat("gpu", d));
    device->set_node(absl::StrCat("node", d / 8));
    device->set_memory_bytes(memory);
  }
  return cluster;
}

}  // namespace placement::importers
