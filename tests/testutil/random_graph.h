// random_graph.h — deterministic random PlaceRequests for tests and benchmarks.
//
// `RandomLayeredRequest` builds a layered random DAG (every op of layer l > 0 has a producer in layer l-1,
// further edges skip forward a few layers) with random costs and memory, a cluster of devices spread over
// nodes, optional colocation groups, pins and kind restrictions that are always satisfiable, so the result
// passes BuildModel. The same options and seed give the same request on every platform (own PRNG, no
// std::*_distribution). 1M ops / 3M edges take well under a second.
//
// `ShuffleRequest` permutes ops (remapping edge indices), edges, links and allowed kinds: the shuffled
// request describes the same problem, so canonical models and digests must not change.
//
// Example:
//   RandomGraphOptions options;
//   options.num_ops = 1000;
//   options.avg_out_degree = 3.0;
//   options.num_devices = 8;
//   options.seed = 42;
//   v1::PlaceRequest request = RandomLayeredRequest(options);
//   v1::PlaceRequest same_problem = ShuffleRequest(request, /*seed=*/7);
#ifndef PLACEMENT_TESTS_TESTUTIL_RANDOM_GRAPH_H_
#define PLACEMENT_TESTS_TESTUTIL_RANDOM_GRAPH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "placement/v1/placement.pb.h"

namespace placement::testutil {

// Small, fast, platform-independent PRNG (xoshiro256** seeded through splitmix64).
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t Next();
  // Uniform in [lo, hi] (inclusive); lo <= hi.
  int64_t Uniform(int64_t lo, int64_t hi);
  // Uniform in [0, 1).
  double UniformDouble();
  // True with probability p.
  bool Bernoulli(double p) { return p > 0 && UniformDouble() < p; }

 private:
  uint64_t s_[4];
};

struct LinkOptions {
  int64_t bandwidth_bytes_per_second;
  int64_t latency_ns;
};

struct RandomGraphOptions {
  // ---- Shape ----
  int32_t num_ops = 100;
  // Edges ≈ avg_out_degree * num_ops (before parallel duplicates).
  double avg_out_degree = 2.0;
  // Number of layers; 0 = num_ops / layer_width, or about sqrt(num_ops) when layer_width is 0 too.
  int32_t num_layers = 0;
  int32_t layer_width = 0;
  // An edge from layer l goes to a layer in (l, l + max_layer_skip].
  int32_t max_layer_skip = 3;
  // Fraction of edges that are control dependencies (bytes = 0).
  double control_edge_fraction = 0.0;
  // Each edge is followed by a parallel copy (same src and dst) with this probability; the model merges
  // them and sums their bytes.
  double parallel_edge_fraction = 0.0;
  // Names are name_prefix + zero-padded number. With scramble_names the numbers are a random permutation,
  // so canonical (name) order is unrelated to the topological generation order; otherwise they follow it.
  bool scramble_names = true;
  std::string name_prefix = "op";

  // ---- Costs (ranges are inclusive) ----
  int64_t min_compute_ns = 1'000;
  int64_t max_compute_ns = 1'000'000;
  int64_t min_output_bytes = 1 << 10;
  int64_t max_output_bytes = 64 << 20;
  // Edge bytes = the producer's output_bytes (what a consumer reads); otherwise drawn from the range.
  bool edge_bytes_from_output = true;
  int64_t min_edge_bytes = 0;
  int64_t max_edge_bytes = 1 << 20;
  // Fraction of ops with weights (persistent bytes) / scratch (temp bytes), and their ranges.
  double persistent_fraction = 0.3;
  int64_t min_persistent_bytes = 1 << 10;
  int64_t max_persistent_bytes = 16 << 20;
  double temp_fraction = 0.3;
  int64_t min_temp_bytes = 1 << 10;
  int64_t max_temp_bytes = 16 << 20;

  // ---- Cluster ----
  int32_t num_devices = 4;
  // Devices are spread over nodes in contiguous blocks ("node0" gets the first ones).
  int32_t num_nodes = 1;
  int64_t device_memory_bytes = int64_t{16} << 30;
  // Speeds: unset (1.0) unless heterogeneous; then multiples of 0.25 in [min_speed, max_speed].
  bool heterogeneous_speeds = false;
  double min_speed = 0.5;
  double max_speed = 2.0;
  // Device d has kind device_kinds[d % size] and is named kind + d ("gpu0", "cpu1", ...).
  std::vector<std::string> device_kinds = {"gpu"};
  LinkOptions intra_node = {300'000'000'000, 2'000};  // 300 GB/s, 2 us
  LinkOptions inter_node = {25'000'000'000, 10'000};  // 25 GB/s, 10 us
  // Number of Cluster.links overrides on random distinct device pairs.
  int32_t num_link_overrides = 0;

  // ---- Constraints (always satisfiable) ----
  // Fraction of ops in colocation groups ("g0", "g1", ...) of up to colocation_group_size members.
  double colocation_fraction = 0.0;
  int32_t colocation_group_size = 4;
  // Fraction of ops (or of groups, for grouped ops) pinned to a random device.
  double pinned_fraction = 0.0;
  // Fraction of ops (or of groups) restricted to one or two device kinds (one of them compatible with
  // the op's pin and group).
  double kind_restricted_fraction = 0.0;

  // ---- PlacementOptions ----
  std::string algorithm;
  double memory_headroom = 0.0;

  uint64_t seed = 1;
};

// A layered random DAG and its cluster, as a request.
v1::PlaceRequest RandomLayeredRequest(const RandomGraphOptions& options);
// Same, written into `request` (which may live on an arena: everything is allocated where it lives).
void FillRandomLayeredRequest(const RandomGraphOptions& options, v1::PlaceRequest* request);
// Only the cluster part of the options.
v1::Cluster RandomCluster(const RandomGraphOptions& options);

// A copy of `request` with ops, edges, links and each op's allowed kinds permuted, link ends swapped at
// random, and edge indices remapped to the new op order (out-of-range indices are kept as they are).
v1::PlaceRequest ShuffleRequest(const v1::PlaceRequest& request, uint64_t seed);
// Same, in place (pointer swaps only: cheap even for a million ops).
void ShuffleRequestInPlace(v1::PlaceRequest* request, uint64_t seed);

// The device of every op, by op name: what two orderings of one problem (see ShuffleRequest) must agree
// on, since their op indices differ.
absl::flat_hash_map<std::string, int32_t> DevicesByName(const v1::PlaceRequest& request,
                                                        const v1::Placement& placement);

}  // namespace placement::testutil

#endif  // PLACEMENT_TESTS_TESTUTIL_RANDOM_GRAPH_H_
