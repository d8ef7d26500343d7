// model.h — the compact, immutable placement model every algorithm and the simulator work on.
//
// A `Model` is built once per request from a validated `placement::v1::PlaceRequest` (see
// model_builder.h). Ops and devices are dense integer ids; adjacency is CSR (forward and reverse);
// attributes are parallel arrays; times are int64 ns and sizes int64 bytes.
//
// Op ids are *canonical*: ops are numbered in the byte order of their names, so everything computed on
// the model is independent of the order of ops and edges in the request. `request_index[op]` maps back to
// the caller's order (and `op_of_request_index` the other way).
//
// Example:
//   absl::StatusOr<Model> model = BuildModel(request);
//   for (OpId v = 0; v < model->num_ops(); ++v)
//     for (EdgeId e = model->out_begin(v); e < model->out_end(v); ++e)
//       Use(model->out_dst[e], model->out_bytes[e]);
//
// Canonical order, in detail:
//
// - **Op ids** are the rank of the op's name in byte order (`std::string` comparison: unsigned bytes, a
//   prefix before its extensions). `request_index[op]` is the op's position in `graph.ops`,
//   `op_of_request_index` the inverse; answers are mapped back to the caller's order with them.
// - **Edges** are merged per (src, dst) — parallel edges sum their bytes — and stored twice in CSR form:
//   `out_*` (each list ascending by dst) and `in_*` (each list ascending by src).
//   `request_edge_count` keeps the number before merging.
// - **`topo_order`** is the topological order that always takes the smallest ready op id (the
//   lexicographically smallest one).
// - **Colocation groups** get dense ids in byte order of their names; `group_member` lists each group's
//   members ascending (CSR by `group_offset`).
// - **Devices** keep the cluster order. Kind ids and node ids are numbered by first appearance among the
//   devices. `allowed_kind_mask` has bit k for kind id k (0 = any kind); kinds no device has are dropped.
// - **Links**: a dense D×D matrix, `intra_node` for devices with the same `node`, `inter_node` otherwise,
//   then `cluster.links` overrides (symmetric).
// - **Capacity**: `capacity_bytes = floor(memory_bytes × (1 − memory_headroom))`, computed in long double;
//   a product within 2⁻⁵² (relative) of an integer is taken to be that integer, so a decimal headroom
//   such as 0.1 gives 1000 → 900 and not 899. Headroom 0 gives exactly `memory_bytes`; −0.0 is stored as 0.
// - Unset `speed` is 1.0.
#ifndef PLACEMENT_SERVICE_ENGINE_MODEL_MODEL_H_
#define PLACEMENT_SERVICE_ENGINE_MODEL_MODEL_H_

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace placement::engine {

using OpId = int32_t;
using DeviceId = int32_t;
using EdgeId = int64_t;
inline constexpr int32_t kNone = -1;

// Alpha-beta link: a transfer of B bytes takes latency_ns + round(B * 1e9 / bandwidth) ns.
struct LinkCost {
  int64_t bandwidth_bytes_per_second = 0;
  int64_t latency_ns = 0;
};

// round(bytes * 1e9 / bandwidth) with exact integer arithmetic, halves rounded up.
inline int64_t TransferDurationNs(const LinkCost& link, int64_t bytes) {
  const __int128 numerator = static_cast<__int128>(bytes) * 1000000000 +
                             link.bandwidth_bytes_per_second / 2;
  return link.latency_ns +
         static_cast<int64_t>(numerator / link.bandwidth_bytes_per_second);
}

// round(compute_ns / speed), halves away from zero (std::llround).
inline int64_t ScaledComputeNs(int64_t compute_ns, double speed) {
  if (speed == 1.0) return compute_ns;
  return static_cast<int64_t>(std::llround(static_cast<double>(compute_ns) / speed));
}

struct Model {
  // ---- Ops (indexed by canonical OpId = rank of the name in byte order) ----
  std::vector<std::string> op_name;
  std::vector<std::string> op_type;
  std::vector<int64_t> compute_ns;
  std::vector<int64_t> output_bytes;
  std::vector<int64_t> persistent_bytes;
  std::vector<int64_t> temp_bytes;
  // Dense colocation group id, or kNone. Groups are numbered by their name's byte order.
  std::vector<int32_t> colocation_group;
  // Device the op is pinned to, or kNone.
  std::vector<DeviceId> pinned_device;
  // Bit k set = the op may run on devices of kind id k. 0 = any kind (no restriction).
  std::vector<uint64_t> allowed_kind_mask;
  // Position of the op in the request's graph.ops, and the inverse.
  std::vector<int32_t> request_index;
  std::vector<OpId> op_of_request_index;

  // ---- Edges: CSR, parallel edges merged (bytes summed), sorted by (src, dst). ----
  std::vector<EdgeId> out_offset;  // size num_ops + 1
  std::vector<OpId> out_dst;
  std::vector<int64_t> out_bytes;
  std::vector<EdgeId> in_offset;  // size num_ops + 1
  std::vector<OpId> in_src;
  std::vector<int64_t> in_bytes;
  // Ops in a topological order (ties by OpId), computed once.
  std::vector<OpId> topo_order;
  // Number of edges in the request before merging parallel ones.
  int64_t request_edge_count = 0;

  // ---- Colocation groups ----
  std::vector<std::string> group_name;  // by group id
  // Members of each group, CSR by group id, members ascending.
  std::vector<int32_t> group_offset;
  std::vector<OpId> group_member;

  // ---- Devices (in cluster order; DeviceId = index into cluster.devices) ----
  std::vector<std::string> device_name;
  std::vector<int32_t> device_kind;  // kind id (index into kind_name)
  std::vector<int32_t> device_node;  // node id (index into node_name)
  std::vector<int64_t> memory_bytes;
  // floor(memory_bytes * (1 - memory_headroom)): what the device may use.
  std::vector<int64_t> capacity_bytes;
  std::vector<double> speed;
  std::vector<std::string> kind_name;  // by kind id, in order of first appearance among devices
  std::vector<std::string> node_name;  // by node id, in order of first appearance among devices
  // Dense num_devices x num_devices link matrix (diagonal unused).
  std::vector<LinkCost> link;

  double memory_headroom = 0.0;

  // ---- Accessors ----
  int32_t num_ops() const { return static_cast<int32_t>(compute_ns.size()); }
  int64_t num_edges() const { return static_cast<int64_t>(out_dst.size()); }
  int32_t num_devices() const { return static_cast<int32_t>(device_name.size()); }
  int32_t num_groups() const { return static_cast<int32_t>(group_name.size()); }
  EdgeId out_begin(OpId v) const { return out_offset[v]; }
  EdgeId out_end(OpId v) const { return out_offset[v + 1]; }
  EdgeId in_begin(OpId v) const { return in_offset[v]; }
  EdgeId in_end(OpId v) const { return in_offset[v + 1]; }

  const LinkCost& Link(DeviceId a, DeviceId b) const {
    return link[static_cast<size_t>(a) * num_devices() + b];
  }
  // Time to move `bytes` from device a to device b; 0 when a == b.
  int64_t TransferNs(DeviceId a, DeviceId b, int64_t bytes) const {
    return a == b ? 0 : TransferDurationNs(Link(a, b), bytes);
  }
  // Run time of op v on device d.
  int64_t OpTimeNs(OpId v, DeviceId d) const { return ScaledComputeNs(compute_ns[v], speed[d]); }
  // True when op v may run on device d according to its pin and allowed kinds (colocation is a
  // property of a whole assignment, see constraints.h).
  bool Allowed(OpId v, DeviceId d) const {
    if (pinned_device[v] != kNone && pinned_device[v] != d) return false;
    const uint64_t mask = allowed_kind_mask[v];
    return mask == 0 || ((mask >> device_kind[d]) & 1) != 0;
  }
};

// An assignment: device id per canonical op id.
using Assignment = std::vector<DeviceId>;

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_MODEL_MODEL_H_
