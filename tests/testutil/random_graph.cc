// random_graph.cc — see random_graph.h.

#include "tests/testutil/random_graph.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace placement::testutil {
namespace {

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t RotateLeft(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// Writes `value` zero-padded to `width` digits at `out`.
void WritePadded(uint32_t value, int width, char* out) {
  for (int i = width - 1; i >= 0; --i) {
    out[i] = static_cast<char>('0' + value % 10);
    value /= 10;
  }
}

int DigitsOf(uint32_t value) {
  int digits = 1;
  while (value >= 10) {
    value /= 10;
    ++digits;
  }
  return digits;
}

constexpr const char* kOpTypes[] = {"MatMul", "Conv2D", "Relu", "Add", "BiasAdd", "Softmax",
                                    "Reshape", "Mul"};

// Random constraints for an op or a group: a device pin and/or a set of allowed kinds that includes the
// pinned device's kind, so every combination stays satisfiable.
struct Constraint {
  int32_t pinned_device = -1;
  int32_t kind = -1;         // a kind every member allows (-1: unrestricted)
  int32_t second_kind = -1;  // an extra allowed kind (-1: none)
};

Constraint DrawConstraint(const RandomGraphOptions& options, int32_t num_kinds, Rng& rng) {
  Constraint c;
  if (rng.Bernoulli(options.pinned_fraction)) {
    c.pinned_device = static_cast<int32_t>(rng.Uniform(0, options.num_devices - 1));
  }
  if (rng.Bernoulli(options.kind_restricted_fraction)) {
    c.kind = c.pinned_device >= 0 ? c.pinned_device % num_kinds
                                  : static_cast<int32_t>(rng.Uniform(0, num_kinds - 1));
    if (num_kinds > 1 && rng.Bernoulli(0.5)) {
      c.second_kind = static_cast<int32_t>(rng.Uniform(0, num_kinds - 1));
      if (c.second_kind == c.kind) c.second_kind = -1;
    }
  }
  return c;
}

}  // namespace

Rng::Rng(uint64_t seed) {
  uint64_t state = seed;
  for (uint64_t& s : s_) s = SplitMix64(state);
}

uint64_t Rng::Next() {
  const uint64_t result = RotateLeft(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = RotateLeft(s_[3], 45);
  return result;
}

int64_t Rng::Uniform(int64_t lo, int64_t hi) {
  const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) + 1;
  if (span == 0) return static_cast<int64_t>(Next());  // the whole int64 range
  // Lemire's multiply-shift; the tiny bias does not matter for test data.
  const uint64_t offset =
      static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * span) >> 64);
  return static_cast<int64_t>(static_cast<uint64_t>(lo) + offset);
}

double Rng::UniformDouble() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

v1::Cluster RandomCluster(const RandomGraphOptions& options) {
  v1::Cluster cluster;
  Rng rng(options.seed ^ 0x5eedc1u);
  const int32_t num_devices = options.num_devices;
  const int32_t num_nodes = std::max(1, options.num_nodes);
  const int32_t num_kinds = std::max<int32_t>(1, static_cast<int32_t>(options.device_kinds.size()));
  for (int32_t d = 0; d < num_devices; ++d) {
    v1::Device* device = cluster.add_devices();
    const std::string kind =
        options.device_kinds.empty() ? std::string("gpu") : options.device_kinds[d % num_kinds];
    device->set_name(absl::StrCat(kind, d));
    device->set_kind(kind);
    device->set_node(absl::StrCat("node", static_cast<int64_t>(d) * num_nodes / num_devices));
    device->set_memory_bytes(options.device_memory_bytes);
    if (options.heterogeneous_speeds) {
      const int64_t lo = static_cast<int64_t>(std::ceil(options.min_speed * 4));
      const int64_t hi = static_cast<int64_t>(std::floor(options.max_speed * 4));
      device->set_speed(static_cast<double>(rng.Uniform(std::max<int64_t>(lo, 1), std::max(lo, hi))) /
                        4.0);
    }
  }
  cluster.mutable_intra_node()->set_bandwidth_bytes_per_second(
      options.intra_node.bandwidth_bytes_per_second);
  cluster.mutable_intra_node()->set_latency_ns(options.intra_node.latency_ns);
  cluster.mutable_inter_node()->set_bandwidth_bytes_per_second(
      options.inter_node.bandwidth_bytes_per_second);
  cluster.mutable_inter_node()->set_latency_ns(options.inter_node.latency_ns);

  const int64_t pairs = static_cast<int64_t>(num_devices) * (num_devices - 1) / 2;
  const int64_t overrides = std::min<int64_t>(options.num_link_overrides, pairs);
  std::vector<char> used(static_cast<size_t>(num_devices) * num_devices, 0);
  for (int64_t k = 0; k < overrides;) {
    const int32_t a = static_cast<int32_t>(rng.Uniform(0, num_devices - 1));
    const int32_t b = static_cast<int32_t>(rng.Uniform(0, num_devices - 1));
    if (a == b || used[static_cast<size_t>(a) * num_devices + b]) continue;
    used[static_cast<size_t>(a) * num_devices + b] = used[static_cast<size_t>(b) * num_devices + a] = 1;
    v1::Link* link = cluster.add_links();
    link->set_a(cluster.devices(a).name());
    link->set_b(cluster.devices(b).name());
    const int64_t slow = std::max<int64_t>(1, options.inter_node.bandwidth_bytes_per_second / 2);
    const int64_t fast = std::max(slow, options.intra_node.bandwidth_bytes_per_second);
    link->mutable_spec()->set_bandwidth_bytes_per_second(rng.Uniform(slow, fast));
    link->mutable_spec()->set_latency_ns(rng.Uniform(0, options.inter_node.latency_ns));
    ++k;
  }
  return cluster;
}

void FillRandomLayeredRequest(const RandomGraphOptions& options, v1::PlaceRequest* request) {
  request->Clear();
  *request->mutable_cluster() = RandomCluster(options);
  request->mutable_options()->set_algorithm(options.algorithm);
  request->mutable_options()->set_memory_headroom(options.memory_headroom);

  Rng rng(options.seed);
  const int32_t n = std::max(0, options.num_ops);
  v1::Graph* graph = request->mutable_graph();
  if (n == 0) return;

  // ---- Layers: contiguous blocks of `width` ops in generation order. ----
  int32_t width;
  if (options.num_layers > 0) {
    width = std::max<int32_t>(1, (n + options.num_layers - 1) / options.num_layers);
  } else if (options.layer_width > 0) {
    width = options.layer_width;
  } else {
    width = std::max<int32_t>(1, static_cast<int32_t>(std::lround(std::sqrt(static_cast<double>(n)))));
  }
  const int32_t num_layers = (n + width - 1) / width;

  // ---- Names ----
  std::vector<uint32_t> number(n);
  std::iota(number.begin(), number.end(), 0u);
  if (options.scramble_names) {
    for (int32_t i = n - 1; i > 0; --i) std::swap(number[i], number[rng.Uniform(0, i)]);
  }
  const int digits = DigitsOf(static_cast<uint32_t>(n - 1));
  std::string name = options.name_prefix;
  const size_t prefix_size = name.size();
  name.resize(prefix_size + digits);

  // ---- Constraints: groups take consecutive grouped ops (neighbours in the DAG, as in real models). ----
  const int32_t num_kinds = std::max<int32_t>(1, static_cast<int32_t>(options.device_kinds.size()));
  const bool constrained = options.num_devices > 0 &&
                           (options.pinned_fraction > 0 || options.kind_restricted_fraction > 0);
  int32_t group_count = 0;
  int32_t group_members = 0;  // members of the current group so far
  Constraint group_constraint;
  std::string group_name;

  // ---- Ops ----
  graph->mutable_ops()->Reserve(n);
  std::vector<int64_t> output_bytes(n);
  for (int32_t i = 0; i < n; ++i) {
    v1::Op* op = graph->add_ops();
    WritePadded(number[i], digits, &name[prefix_size]);
    op->set_name(name);
    op->set_type(kOpTypes[rng.Next() % (sizeof(kOpTypes) / sizeof(kOpTypes[0]))]);
    op->set_compute_ns(rng.Uniform(options.min_compute_ns, options.max_compute_ns));
    output_bytes[i] = rng.Uniform(options.min_output_bytes, options.max_output_bytes);
    op->set_output_bytes(output_bytes[i]);
    if (rng.Bernoulli(options.persistent_fraction)) {
      op->set_persistent_bytes(rng.Uniform(options.min_persistent_bytes, options.max_persistent_bytes));
    }
    if (rng.Bernoulli(options.temp_fraction)) {
      op->set_temp_bytes(rng.Uniform(options.min_temp_bytes, options.max_temp_bytes));
    }

    Constraint constraint;
    bool first_member = false;
    if (rng.Bernoulli(options.colocation_fraction)) {
      if (group_members == 0) {
        group_name = absl::StrCat("g", group_count++);
        group_constraint = constrained ? DrawConstraint(options, num_kinds, rng) : Constraint();
        first_member = true;
      }
      op->set_colocation_group(group_name);
      // Every member honours the group's pin and kind; only some spell them out (the first member
      // always does, so the group really is constrained).
      constraint = group_constraint;
      if (!first_member && rng.Bernoulli(0.5)) constraint.pinned_device = -1;
      if (!first_member && rng.Bernoulli(0.5)) constraint.kind = constraint.second_kind = -1;
      if (++group_members == std::max(1, options.colocation_group_size)) group_members = 0;
    } else if (constrained) {
      constraint = DrawConstraint(options, num_kinds, rng);
    }
    if (constraint.pinned_device >= 0) {
      op->set_pinned_device(request->cluster().devices(constraint.pinned_device).name());
    }
    if (constraint.kind >= 0 && !options.device_kinds.empty()) {
      op->add_allowed_kinds(options.device_kinds[constraint.kind]);
      if (constraint.second_kind >= 0) op->add_allowed_kinds(options.device_kinds[constraint.second_kind]);
    }
  }

  // ---- Edges ----
  const int64_t target_edges = std::llround(options.avg_out_degree * n);
  const int64_t chained = static_cast<int64_t>(n) - std::min(n, width);  // ops with a previous layer
  const double chain_probability =
      chained == 0 ? 0.0 : std::min(1.0, static_cast<double>(target_edges) / chained);
  const int64_t expected_extra = std::max<int64_t>(0, target_edges - chained);
  graph->mutable_edges()->Reserve(static_cast<int>(
      std::min<int64_t>(INT32_MAX, (target_edges + 16) * (1.0 + options.parallel_edge_fraction) + 16)));
  // Endpoints are drawn in batches and the producers' output sizes gathered in a tight loop, so the
  // random reads of output_bytes overlap instead of each waiting behind a protobuf allocation.
  constexpr int kBatch = 256;
  int32_t batch_src[kBatch];
  int32_t batch_dst[kBatch];
  int64_t batch_bytes[kBatch];
  int batch_size = 0;
  auto flush = [&]() {
    for (int k = 0; k < batch_size; ++k) {
      batch_bytes[k] = options.edge_bytes_from_output ? output_bytes[batch_src[k]] : 0;
    }
    for (int k = 0; k < batch_size; ++k) {
      int64_t bytes = options.edge_bytes_from_output
                          ? batch_bytes[k]
                          : rng.Uniform(options.min_edge_bytes, options.max_edge_bytes);
      if (rng.Bernoulli(options.control_edge_fraction)) bytes = 0;
      v1::Edge* edge = graph->add_edges();
      edge->set_src(batch_src[k]);
      edge->set_dst(batch_dst[k]);
      edge->set_bytes(bytes);
      if (rng.Bernoulli(options.parallel_edge_fraction)) {
        v1::Edge* copy = graph->add_edges();
        copy->set_src(batch_src[k]);
        copy->set_dst(batch_dst[k]);
        copy->set_bytes(bytes / 2);
      }
    }
    batch_size = 0;
  };
  auto add_edge = [&](int32_t src, int32_t dst) {
    batch_src[batch_size] = src;
    batch_dst[batch_size] = dst;
    if (++batch_size == kBatch) flush();
  };
  // Every op after the first layer reads from the layer before it, so the DAG really has num_layers
  // levels (unless fewer edges than ops were asked for).
  for (int32_t i = width; i < n; ++i) {
    if (chain_probability < 1.0 && !rng.Bernoulli(chain_probability)) continue;
    const int32_t layer = i / width;
    add_edge(static_cast<int32_t>(rng.Uniform(static_cast<int64_t>(layer - 1) * width,
                                              static_cast<int64_t>(layer) * width - 1)),
             i);
  }
  // The rest: a random producer before the last layer, a consumer up to max_layer_skip layers later.
  if (num_layers >= 2) {
    const int32_t producers = (num_layers - 1) * width;  // ops of layers 0 .. num_layers - 2
    const int32_t skip = std::max(1, options.max_layer_skip);
    for (int64_t k = 0; k < expected_extra; ++k) {
      const int32_t src = static_cast<int32_t>(rng.Uniform(0, producers - 1));
      const int32_t layer = src / width;
      const int32_t dst_layer =
          layer + static_cast<int32_t>(rng.Uniform(1, std::min(skip, num_layers - 1 - layer)));
      const int32_t first = dst_layer * width;
      const int32_t last = std::min(n, first + width) - 1;
      add_edge(src, static_cast<int32_t>(rng.Uniform(first, last)));
    }
  }
  flush();
}

v1::PlaceRequest RandomLayeredRequest(const RandomGraphOptions& options) {
  v1::PlaceRequest request;
  FillRandomLayeredRequest(options, &request);
  return request;
}

void ShuffleRequestInPlace(v1::PlaceRequest* request, uint64_t seed) {
  Rng rng(seed);
  v1::Graph* graph = request->mutable_graph();
  auto* ops = graph->mutable_ops();
  const int n = ops->size();
  // Fisher-Yates with pointer swaps; original_at[i] = old index of the op now at i.
  std::vector<int32_t> original_at(n);
  std::iota(original_at.begin(), original_at.end(), 0);
  for (int i = n - 1; i > 0; --i) {
    const int j = static_cast<int>(rng.Uniform(0, i));
    ops->SwapElements(i, j);
    std::swap(original_at[i], original_at[j]);
  }
  std::vector<int32_t> new_index(n);
  for (int i = 0; i < n; ++i) new_index[original_at[i]] = i;
  original_at = std::vector<int32_t>();

  for (v1::Op& op : *ops) {
    auto* kinds = op.mutable_allowed_kinds();
    for (int i = kinds->size() - 1; i > 0; --i) kinds->SwapElements(i, static_cast<int>(rng.Uniform(0, i)));
  }

  auto* edges = graph->mutable_edges();
  for (int i = edges->size() - 1; i > 0; --i) edges->SwapElements(i, static_cast<int>(rng.Uniform(0, i)));
  for (v1::Edge& edge : *edges) {
    if (edge.src() >= 0 && edge.src() < n) edge.set_src(new_index[edge.src()]);
    if (edge.dst() >= 0 && edge.dst() < n) edge.set_dst(new_index[edge.dst()]);
  }

  auto* links = request->mutable_cluster()->mutable_links();
  for (int i = links->size() - 1; i > 0; --i) links->SwapElements(i, static_cast<int>(rng.Uniform(0, i)));
  for (v1::Link& link : *links) {
    if (rng.Bernoulli(0.5)) {
      std::string a = link.a();
      link.set_a(link.b());
      link.set_b(std::move(a));
    }
  }
}

v1::PlaceRequest ShuffleRequest(const v1::PlaceRequest& request, uint64_t seed) {
  v1::PlaceRequest copy = request;
  ShuffleRequestInPlace(&copy, seed);
  return copy;
}

absl::flat_hash_map<std::string, int32_t> DevicesByName(const v1::PlaceRequest& request,
                                                        const v1::Placement& placement) {
  absl::flat_hash_map<std::string, int32_t> devices;
  for (int i = 0; i < request.graph().ops_size(); ++i) {
    devices[request.graph().ops(i).name()] = placement.device(i);
  }
  return devices;
}

}  // namespace placement::testutil
