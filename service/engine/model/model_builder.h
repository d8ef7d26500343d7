// model_builder.h — validates a PlaceRequest and builds the compact Model (model.h) from it, once.
//
// Validation reports *every* problem, each with the field path of the request, e.g.
//   graph.edges[2].dst: index 912 out of range (graph has 10 ops)
//   graph.ops[7].name: duplicate of graph.ops[3].name "conv1"
//   graph.edges: cycle through op "b" (graph.ops[1])
// The returned status is INVALID_ARGUMENT with the violations one per line; callers that need them as
// data (the gRPC BadRequest detail) pass `violations`.
//
// Example:
//   std::vector<FieldViolation> problems;
//   absl::StatusOr<Model> model = BuildModel(request, &problems);
//   if (!model.ok()) return model.status();
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

// Joins violations into the message used for INVALID_ARGUMENT ("path: reason" per line).
std::string FormatViolations(const std::vector<FieldViolation>& violations);

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_MODEL_MODEL_BUILDER_H_
