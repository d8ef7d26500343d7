// linear_clustering.h — ParDNN stage 1, slicing: cuts the graph into linear clusters (paths).
//
//  * K primary clusters: the communication-weighted critical path, then successively the heaviest path
//    of the not-yet-clustered subgraph (bottom levels recomputed over the unclustered ops only).
//  * Secondary clusters: the remaining ops as chains, started in decreasing weighted level
//    (top level + bottom level, edges inside a primary free) and extended along the critical successor
//    while it is still unclustered.
//  * Afterwards top/bottom levels are recomputed with every cluster's internal edges free; secondaries
//    are numbered in decreasing weighted level of their first op (the mapping's processing order).
//
// Costs are those of a "typical" device and link of the cluster (SlicingCosts): op time at the mean
// speed, edge time at the mean latency and mean inverse bandwidth over device pairs. The mapping
// (cluster_mapping.h) then uses each device's own speed and each pair's own link.
//
// Every op ends in exactly one cluster (the reference leaves zero-duration ops unclustered, §8.7), ties
// are broken by op id, and nothing reads an empty queue (§8.1).
//
// Example:
//   SlicingCosts costs = ComputeSlicingCosts(model);
//   LinearClusters clusters = SliceIntoLinearClusters(model, costs, model.num_devices());
//   for (OpId v : clusters.Ops(0)) ...   // the critical path
#ifndef PLACEMENT_SERVICE_ENGINE_PARDNN_LINEAR_CLUSTERING_H_
#define PLACEMENT_SERVICE_ENGINE_PARDNN_LINEAR_CLUSTERING_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "service/engine/model/model.h"

namespace placement::engine::pardnn {

struct SlicingCosts {
  std::vector<int64_t> op_ns;       // per op: compute_ns / mean speed
  std::vector<int64_t> out_edge_ns;  // per out-edge (CSR index): transfer time on the mean link
  std::vector<int64_t> in_edge_ns;   // per in-edge (CSR index), same values seen from the consumer
  double mean_speed = 1.0;
  int64_t total_work_ns = 0;  // sum of op_ns
  int64_t total_comm_ns = 0;  // sum of edge times
};

SlicingCosts ComputeSlicingCosts(const Model& model);

// The graph renumbered in topological order with the slicing costs attached: position i holds op
// op_at[i], every edge goes from a smaller to a larger position. Canonical op ids follow names, so a
// level sweep over them jumps around memory; over positions it walks mostly forwards (several times
// faster on large graphs). Ties are still broken by op id.
struct TopoGraph {
  std::vector<OpId> op_at;      // position -> op
  std::vector<int32_t> pos_of;  // op -> position
  std::vector<int64_t> op_ns;   // by position
  std::vector<int64_t> out_offset, in_offset;  // CSR by position
  std::vector<int32_t> out_dst, in_src;         // positions
  std::vector<int64_t> out_ns, in_ns;           // edge times
  std::vector<int64_t> out_bytes, in_bytes;     // edge bytes (the mapping's memory estimate)
  int32_t size() const { return static_cast<int32_t>(op_at.size()); }
};

TopoGraph BuildTopoGraph(const Model& model, const SlicingCosts& costs);

struct LinearClusters {
  int32_t num_primaries = 0;
  // Cluster id per op: primaries 0..num_primaries-1, then secondaries.
  std::vector<int32_t> cluster_of;
  // Ops of each cluster (CSR, path order for chains).
  std::vector<int32_t> offset;
  std::vector<OpId> ops;
  // Levels with each cluster's internal edges free: earliest start on unlimited devices, and own time +
  // longest path to the end.
  std::vector<int64_t> top_level;
  std::vector<int64_t> bottom_level;
  // Graph statistics (reference §2.3): degree of parallelism = total work / work of the critical path;
  // communication-to-computation ratio = total edge time / total work.
  double dop = 0.0;
  double ccr = 0.0;
  // The topologically renumbered graph the slicing ran on (reused by the mapping).
  TopoGraph topo;

  int32_t num_clusters() const { return static_cast<int32_t>(offset.size()) - 1; }
  absl::Span<const OpId> Ops(int32_t cluster) const {
    return absl::MakeConstSpan(ops.data() + offset[cluster],
                               static_cast<size_t>(offset[cluster + 1] - offset[cluster]));
  }
};

// Slices `model` into at most `num_primaries` primaries plus secondaries. O(K (V + E) + V log V).
LinearClusters SliceIntoLinearClusters(const Model& model, const SlicingCosts& costs,
                                       int32_t num_primaries);

// Top and bottom levels (by op id) where an edge costs nothing when both ends share a cluster id in
// `cluster_of` (by op id; kNone never matches). Exposed for the mapping, which recomputes them after
// re-clustering.
void ComputeClusteredLevels(const TopoGraph& graph, const std::vector<int32_t>& cluster_of,
                            std::vector<int64_t>* top_level, std::vector<int64_t>* bottom_level);
// Same with everything indexed by topological position, and edges between clusters charged
// cross_edge_weight x their time (1 = in full, 0 = free).
void ComputePositionLevels(const TopoGraph& graph, const std::vector<int32_t>& cluster_by_position,
                           std::vector<int64_t>* top_level, std::vector<int64_t>* bottom_level,
                           double cross_edge_weight = 1.0);

}  // namespace placement::engine::pardnn

#endif  // PLACEMENT_SERVICE_ENGINE_PARDNN_LINEAR_CLUSTERING_H_
