// digest.h — canonical SHA-256 digests of a model: `graph_digest` and `request_digest` (api.md §1).
//
// Both are computed from the compact Model, never from serialized protobuf: ops in canonical (name) order,
// merged edges by (src name, dst name), fixed-width little-endian integers, length-prefixed strings,
// IEEE-754 bit patterns for the two doubles (device speed, memory headroom), and a format tag. They are
// therefore independent of the order of ops and edges in the request. Streaming: no big strings are built.
//
// Example:
//   std::string g = GraphDigestHex(model);
//   std::string r = RequestDigestHex(model, "pardnn", "3", /*seed=*/7);
//
// Digest format:
//
// SHA-256 over a byte stream (lower-case hex out). Integers are fixed-width little-endian (`u32`, `u64`,
// `i64` as two's complement); a string is `u64 length` + bytes; a double is its IEEE-754 bits as `u64`.
// Nothing depends on the order of ops, edges, links or allowed kinds in the request.
//
// `graph_digest`:
// str "placement.v1.graph_digest/1"
// u64 num_ops, u64 num_merged_edges
// per op, in canonical order:
//   str name, str type, i64 compute_ns, i64 output_bytes, i64 persistent_bytes, i64 temp_bytes,
//   str colocation_group ("" = none),
//   u32 count, str kind × count   (allowed kinds that some device has, in byte order; 0 = any)
//   str pinned_device ("" = none)
// per merged edge, in (src, dst) order: u32 src id, u32 dst id, i64 bytes
// only when some op is once_per_step (api.md §2.1): str "once_per_step", u64 count, u32 id × count (ascending)
// Parallel edges hash like their merged edge (same semantics). Allowed kinds are taken as resolved
// against the cluster (kinds no device has cannot matter).
//
// `request_digest`:
// str "placement.v1.request_digest/1"
// str graph_digest (hex)
// u32 num_devices
// per device, in cluster order: str name, str kind, str node, i64 memory_bytes, f64 speed
// per unordered pair a < b: i64 bandwidth_bytes_per_second, i64 latency_ns   (effective link matrix)
// f64 memory_headroom (−0.0 as 0.0)
// str algorithm, str algorithm_version, u64 seed
// only when the plan is not the default (M 1, W 0, D 1): str "plan", u32 microbatches, u32 max_in_flight,
//   u32 data_parallel — as requested (0 = the solver chooses)
// only with a previous placement (PlacementOptions.previous_placement not empty): str
//   "previous_placement", u64 count, per op with an entry in canonical order: u32 op id, i64 device
//   (cluster index, or −2 for a device that left), then f64 move_weight_ns_per_byte (−0.0 as 0.0)
// Plain requests (no plan, no once ops, no previous placement) therefore keep the digests they always had.
// Two clusters with the same effective links (e.g. an override equal to the default) hash alike;
// `request_id`, `skip_cache` and `time_limit` are not hashed. Bump the format tag whenever the stream
// changes.
#ifndef PLACEMENT_SERVICE_ENGINE_MODEL_DIGEST_H_
#define PLACEMENT_SERVICE_ENGINE_MODEL_DIGEST_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "service/engine/model/model.h"

namespace placement::engine {

// SHA-256 (lower-case hex) of the canonical graph: op names, types, costs, bytes, colocation groups,
// allowed kinds, pins, and the merged edges.
std::string GraphDigestHex(const Model& model);

// The request digest, the cache key of one answer: SHA-256 (lower-case hex) of the graph digest, the
// canonical cluster (devices in order, link matrix), the memory headroom, and what else changes the
// answer — the algorithm's canonical name ("pardnn", never empty), its version (bumped whenever its
// output may change) and the seed. Solve and the service reach it through one route,
// engine::RequestDigestFor (solve.h), so their keys cannot drift apart. `graph_digest_hex` =
// GraphDigestHex(model) when the caller has it already (empty: computed here).
std::string RequestDigestHex(const Model& model, std::string_view algorithm,
                             std::string_view algorithm_version, uint64_t seed,
                             std::string_view graph_digest_hex = {});

// The same inputs as one struct, for callers that keep them together (the client's routing key, tests).
struct DigestOptions {
  std::string algorithm;
  std::string algorithm_version;
  uint64_t seed = 0;
};
std::string RequestDigestHex(const Model& model, const DigestOptions& options);
std::string RequestDigestHex(const Model& model, const std::string& graph_digest_hex,
                             const DigestOptions& options);

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_MODEL_DIGEST_H_
