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

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace placement::engine {

using OpId = int32_t;
using DeviceId = int32_t;
using EdgeId = int64_t;
inline constexpr int32_t kNone = -1;
// A previous placement's device that is no longer in the cluster (Model::previous_device).
inline constexpr int32_t kDepartedDevice = -2;

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

// How the step runs (api.md §2.1): M microbatches, at most W in flight, D data-parallel replicas. The
// defaults are api.md §2 exactly (one microbatch, no replicas).
struct TrainingPlan {
  int32_t microbatches = 1;   // M >= 1
  // W in 1..M, or 0 = not fixed by the request (the solver chooses; a simulation with 0 runs with no
  // window, like W = M).
  int32_t max_in_flight = 0;
  // D >= 1, or 0 = not fixed by the request (the solver chooses). A model with D > 1 is a replica group
  // (ReplicaGroupModel, replica_group.h): its devices are group 0's.
  int32_t data_parallel = 1;

  // W as the simulator applies it: M when not fixed.
  int32_t Window() const { return max_in_flight > 0 ? max_in_flight : microbatches; }
  bool operator==(const TrainingPlan& other) const {
    return microbatches == other.microbatches && max_in_flight == other.max_in_flight &&
           data_parallel == other.data_parallel;
  }
};

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
  // 1 = the op runs once per step (api.md §2.1 `once_per_step`), 0 = once per microbatch.
  std::vector<uint8_t> once_per_step;
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

  // ---- Training plan (api.md §2.1) ----
  TrainingPlan plan;
  // True when some op is once_per_step.
  bool has_once_ops = false;
  // Only in a replica-group model (plan.data_parallel > 1): per device of group 0, the slowest link of
  // its all-reduce ring (lowest bandwidth; on a tie the highest latency). Empty otherwise.
  std::vector<LinkCost> ring_link;
  // Devices of the request's cluster: num_devices() × data_parallel in a replica-group model.
  int32_t cluster_devices = 0;
  // Set in a plan model (plans/plan_model.h) whose request leaves W to the solver: plan.max_in_flight is
  // then only the working window the algorithms simulate with, and the answer's W is chosen afterwards.
  bool solver_chooses_window = false;

  // ---- Re-placement (PlacementOptions.previous_placement, move_weight_ns_per_byte) ----
  // Per op: the device it was on before the cluster changed; kNone = no entry (a new op, whose placement
  // moves nothing); kDepartedDevice = a device that is no longer in the cluster (the op must move).
  // Empty = no previous placement (a fresh solve). In a replica-group model a previous device outside
  // group 0 (id >= num_devices()) counts as departed too (PreviousDeviceOf).
  std::vector<DeviceId> previous_device;
  // ns of step traded for one byte moved (>= 0, finite).
  double move_weight_ns_per_byte = 0.0;

  // ---- Accessors ----
  int32_t num_ops() const { return static_cast<int32_t>(compute_ns.size()); }
  int64_t num_edges() const { return static_cast<int64_t>(out_dst.size()); }
  int32_t num_devices() const { return static_cast<int32_t>(device_name.size()); }
  int32_t num_groups() const { return static_cast<int32_t>(group_name.size()); }
  int32_t microbatches() const { return plan.microbatches; }
  bool is_once(OpId v) const { return !once_per_step.empty() && once_per_step[v] != 0; }
  // True when the step is api.md §2 exactly: one microbatch, no once ops, no replicas.
  bool IsPlainStep() const {
    return plan.microbatches == 1 && !has_once_ops && plan.data_parallel <= 1;
  }
  EdgeId out_begin(OpId v) const { return out_offset[v]; }
  EdgeId out_end(OpId v) const { return out_offset[v + 1]; }
  EdgeId in_begin(OpId v) const { return in_offset[v]; }
  EdgeId in_end(OpId v) const { return in_offset[v + 1]; }

  bool has_previous_placement() const { return !previous_device.empty(); }
  // The op's previous device in this model: kNone (no entry), kDepartedDevice, or a device id.
  DeviceId PreviousDeviceOf(OpId v) const {
    if (previous_device.empty()) return kNone;
    const DeviceId d = previous_device[v];
    return d >= num_devices() ? kDepartedDevice : d;
  }
  // True when placing op v on d moves its persistent bytes (it had a previous device and d is another).
  bool Moves(OpId v, DeviceId d) const {
    const DeviceId previous = PreviousDeviceOf(v);
    return previous != kNone && previous != d;
  }
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

// Re-placement: the persistent bytes `assignment` moves away from the model's previous placement (0
// without one): the ops whose device changes (Model::Moves), each with its persistent_bytes — in every
// replica group: a replica-group model (plan.data_parallel = D > 1) places group 0, every group runs the
// same assignment and holds its own copy of an op's state, so each move is made D times. Saturates at
// the int64 maximum.
inline int64_t BytesMoved(const Model& model, const Assignment& assignment) {
  if (!model.has_previous_placement()) return 0;
  int64_t bytes = 0;
  for (OpId v = 0; v < model.num_ops(); ++v) {
    if (model.Moves(v, assignment[v])) bytes += model.persistent_bytes[v];
  }
  const int64_t copies = std::max<int64_t>(1, model.plan.data_parallel);
  return bytes > std::numeric_limits<int64_t>::max() / copies ? std::numeric_limits<int64_t>::max()
                                                               : bytes * copies;
}

// Re-placement: where the ops [begin, end) (a unit: a colocation group or one op) were before, by
// surviving device — each op's persistent_bytes + `per_op` added to its previous device's entry (ops
// without a previous device, or whose device left, count nowhere; an op adding 0 makes no entry).
// `per_op` = 1 lets ops without state vote; 0 weighs state only. Entries in order of first
// appearance; `tally` is cleared first (a unit's members rarely spanned more than a few devices).
inline void TallyPreviousDevices(const Model& model, const OpId* begin, const OpId* end, int64_t per_op,
                                 std::vector<std::pair<DeviceId, int64_t>>& tally) {
  tally.clear();
  for (const OpId* m = begin; m != end; ++m) {
    const DeviceId previous = model.PreviousDeviceOf(*m);
    const int64_t weight = model.persistent_bytes[*m] + per_op;
    if (previous < 0 || weight == 0) continue;
    auto it = std::find_if(tally.begin(), tally.end(),
                           [previous](const auto& entry) { return entry.first == previous; });
    if (it == tally.end()) {
      tally.emplace_back(previous, 0);
      it = tally.end() - 1;
    }
    it->second += weight;
  }
}

// The moves' price in ns of step: round(move_weight_ns_per_byte × BytesMoved), capped at 1e18 (the
// largest step validation allows), so that step + price never overflows.
// With another weight (re-placement's search adds its keep-in-place price, ../replace/).
inline int64_t MoveCostNs(const Model& model, const Assignment& assignment, double ns_per_byte) {
  if (ns_per_byte == 0.0) return 0;
  const double cost = ns_per_byte * static_cast<double>(BytesMoved(model, assignment));
  return cost >= 1e18 ? int64_t{1'000'000'000'000'000'000} : std::llround(cost);
}
inline int64_t MoveCostNs(const Model& model, const Assignment& assignment) {
  return MoveCostNs(model, assignment, model.move_weight_ns_per_byte);
}

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_MODEL_MODEL_H_
