// model_builder.h — validates a PlaceRequest and builds the compact Model (model.h) from it, once.
//
// Validation reports *every* problem, each with the field path of the request, e.g.
//   graph.edges[2].dst: index 912 out of range (graph has 10 ops)
//   graph.ops[7].name: duplicate of graph.ops[3].name "conv1"
//   graph.edges: cycle through op "b" (graph.ops[1])
// The returned status is INVALID_ARGUMENT with the violations one per line, and the same violations as
// data in its BadRequest payload (ViolationsError); callers may also pass `violations`.
//
// Example:
//   std::vector<FieldViolation> problems;
//   absl::StatusOr<Model> model = BuildModel(request, &problems);
//   if (!model.ok()) return model.status();
//
// Validation rules, in detail (proto/README.md links here):
//
// `BuildModel` reports **every** problem as `FieldViolation{field, description}`; the status is
// `INVALID_ARGUMENT` whose message is `FormatViolations` (one `field: description` per line). Violations
// come grouped: `graph.ops…`, `graph.edges…`, `graph`, `cluster.devices…`, `cluster` (default links),
// `cluster.links…`, `options…`, `options.previous_placement…`; within a group in request order (the
// previous placement's keys in byte order). Each list (`graph.ops`, `graph.edges`,
// `cluster.devices`, `cluster.links`) stops being checked after `max_violations_per_list` (100)
// problems; one more violation, with the list's path as its field, says so.
//
// | field | problem (description fragment) |
// |---|---|
// | `graph.ops` | no ops; more ops than `max_ops` |
// | `graph.ops[i].name` | empty; longer than `max_name_bytes`; `duplicate of graph.ops[j].name "x"` (j = first occurrence) |
// | `graph.ops[i].type`, `.colocation_group` | longer than `max_name_bytes` |
// | `graph.ops[i].compute_ns` | `< 0`; `> max_time_ns` |
// | `graph.ops[i].output_bytes`, `.persistent_bytes`, `.temp_bytes` | `< 0`; `> max_bytes` |
// | `graph.ops[i].allowed_kinds` | no device has any of the allowed kinds |
// | `graph.ops[i].pinned_device` | unknown device; pinned device's kind not among the op's allowed kinds; pinned elsewhere than another member of its colocation group |
// | `graph.ops[i].colocation_group` | no kind allowed by two members of the group; the group's pinned device has a kind a member does not allow |
// | `graph.edges` | more edges than `max_edges`; `cycle through op "b" (graph.ops[1]): "b" -> "c" -> "b"` (only when no edge is otherwise broken) |
// | `graph.edges[i].src`, `.dst` | `index 912 out of range (graph has 10 ops)` |
// | `graph.edges[i].dst` | `self-loop: src and dst are both graph.ops[3] (op "x")` |
// | `graph.edges[i].bytes` | `< 0`; `> max_bytes` |
// | `graph` | the step's total bytes `> max_total_bytes`; the step's total work `> max_total_time_ns` (checked only on an otherwise valid request) |
// | `cluster.devices` | no devices; more than `max_devices`; more distinct kinds than `max_device_kinds` (≤ 64) |
// | `cluster.devices[d].name` | empty; too long; duplicate |
// | `cluster.devices[d].kind`, `.node` | too long |
// | `cluster.devices[d].memory_bytes` | `<= 0`; `> max_bytes` |
// | `cluster.devices[d].speed` | NaN/inf; `<= 0`; outside `[min_speed, max_speed]` |
// | `cluster.intra_node.bandwidth_bytes_per_second` (and `inter_node`) | `<= 0` while some device pair uses it (not overridden; one device or one node needs none) |
// | `cluster.intra_node.latency_ns` (and `inter_node`) | `< 0`; `> max_time_ns` |
// | `cluster.links[i].a`, `.b` | unknown device; `b` same device as `a` |
// | `cluster.links[i]` | duplicate of an earlier link for the same unordered pair |
// | `cluster.links[i].spec.bandwidth_bytes_per_second` | `<= 0` |
// | `cluster.links[i].spec.latency_ns` | `< 0`; `> max_time_ns` |
// | `options.memory_headroom` | NaN or outside `[0, 1)` |
// | `options.time_limit` | negative; not a valid Duration |
// | `options.microbatches` | `< 0`; `> max_microbatches`; microbatches × ops `> max_unrolled_ops` |
// | `options.max_in_flight` | `< 0`; `9 exceeds microbatches 8` |
// | `options.data_parallel` | `< 0`; `3 does not divide 8 devices` |
// | `options.move_weight_ns_per_byte` | NaN, inf or `< 0` |
// | `options.previous_placement["x"]` | `no op named "x"` (keys in byte order; a device name not in the cluster is a device that left, not an error; the list `options.previous_placement` stops after `max_violations_per_list`) |
// | `graph.ops[i].pinned_device` | with `data_parallel` D > 1: pinned outside replica group 0 (the first N/D devices) |
// | `graph.ops[i].allowed_kinds` | with D > 1: no device of replica group 0 has any of the allowed kinds |
// | `graph.ops[i].once_per_step` | a once op with a per-microbatch ancestor and a per-microbatch descendant (only on an otherwise valid graph) |
//
// Checks that would only echo an earlier problem are skipped: no pin/kind checks without usable devices,
// no cycle check beside a broken edge, no group check when a member's own pin or kinds are wrong.
// Quoted user strings are C-escaped and cut after 64 bytes.
//
// Limits (ModelLimits) and why:
//
// | limit | default | why |
// |---|---|---|
// | `max_ops` | 2,000,000 | op ids are int32; memory |
// | `max_edges` | 8,000,000 | memory |
// | `max_devices` | 1024 | the link matrix is D×D |
// | `max_device_kinds` | 64 | `allowed_kind_mask` is 64 bits |
// | `max_name_bytes` | 1024 | names, types, groups, kinds, nodes |
// | `max_time_ns` | 1e15 (~11.6 days) | any single compute or latency |
// | `max_bytes` | 2⁵⁰ (1 PiB) | any single byte count, including device memory |
// | `min_speed`, `max_speed` | 1e-6, 1e6 | |
// | `max_total_time_ns` | 1e18 | Σ compute / slowest speed + Σ over edges of the slowest transfer: bounds every simulated time, so no int64 overflow downstream |
// | `max_total_bytes` | 2⁶² | Σ op bytes + Σ edge bytes: bounds every memory total |
// | `max_violations_per_list` | 100 | bounded error messages |
// | `max_microbatches` | 1024 | api.md §2.1 |
// | `max_unrolled_ops` | 20,000,000 | microbatches × ops: the simulator keeps state per unrolled op |
#ifndef PLACEMENT_SERVICE_ENGINE_MODEL_MODEL_BUILDER_H_
#define PLACEMENT_SERVICE_ENGINE_MODEL_MODEL_BUILDER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "placement/v1/placement.pb.h"
#include "service/engine/model/model.h"

namespace placement::engine {

struct FieldViolation {
  std::string field;        // e.g. "graph.edges[17].dst"
  std::string description;  // e.g. "index 912 out of range (graph has 10 ops)"
};

// Hard limits on what one request may contain. Every limit is documented in proto/README.md.
struct ModelLimits {
  int64_t max_ops = 2'000'000;
  int64_t max_edges = 8'000'000;
  int32_t max_devices = 1024;
  int32_t max_device_kinds = 64;
  int64_t max_name_bytes = 1024;
  // Any single time (compute_ns, latency_ns) above this is rejected as absurd (about 11.6 days).
  int64_t max_time_ns = 1'000'000'000'000'000;  // 1e15 ns
  // Any single byte count above this is rejected as absurd (1 PiB).
  int64_t max_bytes = int64_t{1} << 50;
  // Speeds must lie in [min_speed, max_speed].
  double min_speed = 1e-6;
  double max_speed = 1e6;
  // Bound on the work of the whole step: sum over ops of compute_ns / (slowest speed), plus, with two or
  // more devices, sum over edges of the slowest transfer of their bytes. Every simulated time is below it,
  // so nothing downstream can overflow int64 nanoseconds.
  int64_t max_total_time_ns = 1'000'000'000'000'000'000;  // 1e18 ns
  // Bound on all bytes of the step (sum of every op's output, persistent and temp bytes plus every edge's
  // bytes): every memory total downstream stays below it.
  int64_t max_total_bytes = int64_t{1} << 62;
  // Training plans (api.md §2.1): at most this many microbatches, and microbatches × ops at most
  // max_unrolled_ops (the simulator keeps state per unrolled op).
  int32_t max_microbatches = 1024;
  int64_t max_unrolled_ops = 20'000'000;
  // Each list of the request (graph.ops, graph.edges, cluster.devices, cluster.links) stops being checked
  // after this many violations; one more violation then says so, to bound the message.
  int32_t max_violations_per_list = 100;
};

// Builds the model for `graph` + `cluster` with the given memory headroom (fraction of each device kept
// free, in [0, 1)). Returns INVALID_ARGUMENT listing every violation; fills `violations` if non-null.
absl::StatusOr<Model> BuildModel(const v1::Graph& graph, const v1::Cluster& cluster,
                                 double memory_headroom,
                                 std::vector<FieldViolation>* violations = nullptr,
                                 const ModelLimits& limits = ModelLimits());

// Same for a whole request (also checks options.memory_headroom and options.time_limit; the algorithm
// name is checked by the partition registry).
absl::StatusOr<Model> BuildModel(const v1::PlaceRequest& request,
                                 std::vector<FieldViolation>* violations = nullptr,
                                 const ModelLimits& limits = ModelLimits());

// Same with the options' plan fields and memory headroom checked and applied (Evaluate: no time limit).
absl::StatusOr<Model> BuildModel(const v1::Graph& graph, const v1::Cluster& cluster,
                                 const v1::PlacementOptions& options,
                                 std::vector<FieldViolation>* violations = nullptr,
                                 const ModelLimits& limits = ModelLimits());

// Joins violations into the message used for INVALID_ARGUMENT ("path: reason" per line).
std::string FormatViolations(const std::vector<FieldViolation>& violations);

// How every validation error leaves the engine: INVALID_ARGUMENT whose message is
// FormatViolations(violations) and whose BadRequest payload (service/status_payloads/status_payloads.h)
// carries the same violations as data, so that the service hands them on without parsing text.
absl::Status ViolationsError(const std::vector<FieldViolation>& violations);
// The violations an engine error carries (none when it carries no BadRequest payload).
std::vector<FieldViolation> ViolationsOf(const absl::Status& status);

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_MODEL_MODEL_BUILDER_H_
