// cluster_mapping.h — ParDNN stage 1, mapping: puts the linear clusters of linear_clustering.h onto
// devices.
//
//  1. Colocation groups become indivisible: every group is pulled into one cluster (the one holding
//     most of its work; ties to the lowest id, i.e. a primary before a secondary).
//  2. Primaries are matched to devices, heaviest first: each takes the device on which most of its work
//     is allowed, then the fastest, then the one with the cheapest links to the others. Units of a
//     primary (or of a secondary) that pins or kinds forbid on every device its cluster could use become
//     clusters of their own, so constraints hold by construction (nothing is patched afterwards).
//  3. Secondaries are placed one by one in decreasing weighted level. For each allowed device k the
//     estimated cost is, first, the memory-estimate overflow the placement adds, then
//         max(0, load_k(span) + work_k - |span|)            (queueing inside the cluster's window)
//       + sum_{j != k} comm(cluster, j) * link_factor(j, k)  (transfers to already placed neighbours)
//     where load_k(span) comes from per-device Fenwick trees over the top-level time slots, work_k is
//     the cluster's work at device k's speed and comm(cluster, j) is summed from the cluster's edges to
//     placed ops (each cluster is evaluated once here, so the row is computed on demand). The span
//     starts at the latest parent finish and ends at the earliest start of an outside child (reference
//     §8.8 corrected); every edge is counted once, against the device its other end is on (§8.9).
//  4. A worklist improvement pass keeps a dense cluster x device communication table, updated
//     incrementally on every move, re-evaluates clusters with everything placed and moves a cluster to
//     the device with the fewest transfers when it queues and overflows no more there; only the
//     neighbours of a moved cluster are re-queued (no sweeping until nothing changes) and every move
//     shrinks the cut, so it cannot cycle. Its length is bounded by MappingOptions.
//
// Everything per op is indexed by topological position (LinearClusters::topo) for locality.
//
// Example:
//   absl::StatusOr<ClusterMapping> mapping =
//       MapClustersToDevices(model, costs, clusters, MappingOptions(), context);
//   Assignment assignment = mapping->assignment;
#ifndef PLACEMENT_SERVICE_ENGINE_PARDNN_CLUSTER_MAPPING_H_
#define PLACEMENT_SERVICE_ENGINE_PARDNN_CLUSTER_MAPPING_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "service/engine/model/model.h"
#include "service/engine/pardnn/linear_clustering.h"
#include "service/engine/partition/partitioner.h"

namespace placement::engine::pardnn {

struct MappingOptions {
  // Re-evaluations in the improvement pass, as a multiple of the number of secondaries (0 = none).
  double improvement_evaluations_per_cluster = 0.0;
  // ... and at most this many in all (large graphs: the pass is a polish, the first placement decides).
  int64_t max_improvement_evaluations = 50'000;
  // A cluster moves only when its estimated delay drops by more than this fraction of its own work
  // (and at least 1 ns): hysteresis against ping-pong between equally good devices.
  double min_relative_gain = 0.02;
  // Above this many cluster x device entries the communication rows are computed on demand from the
  // cluster's edges instead of being kept in the dense table (same results, less memory).
  int64_t max_dense_table_entries = int64_t{1} << 20;
  // The Fenwick trees have one slot per distinct top level, or this many equal time buckets when there
  // are more (large graphs: K small trees stay in cache).
  int64_t max_time_slots = 8192;
  // Where the critical path bounds the step and memory cannot bind (MemoryCanBind): up to this many
  // slots, and a window counts only the part of its first and last bucket it covers. A side op with
  // little slack beside a busy critical path is judged by the queue in its own window, not by whole
  // buckets wider than it; where the work bounds the step the coarser load was the better guide, and
  // where memory binds its timeline shares the slots (pardnn README, version 11).
  int64_t max_time_slots_where_the_path_bounds = 65536;
  // ... but no more than this many device x slot entries in the Fenwick trees (8 bytes each: 64 MiB),
  // and never fewer slots than max_time_slots: 65,536 slots up to 128 devices; with the model's
  // 1,024 devices 8,192 (as elsewhere), not 512 MiB.
  int64_t max_fine_load_entries = int64_t{1} << 23;
  // Memory: clusters are charged persistent bytes + half their output bytes (an output lives for part
  // of the step) and kept within capacity x capacity_scale[d] where possible (empty = 1.0 for every
  // device). The partitioner calibrates the scales against simulated peaks (pardnn_partitioner.cc).
  std::vector<double> capacity_scale;
  // Memory out of view (ParDNN's own first stage: its memory stage comes after the mapping): no
  // estimate, no budget, no critical path cut for memory.
  bool ignore_memory = false;
  // When the graph's bytes exceed some device's budget, memory is estimated over time (per device a
  // range-add/range-max tree over the spans' slots: outputs live until their last consumer finishes,
  // inputs from other devices are held as copies) instead of as a static sum; false = static only.
  bool memory_timeline = true;
  // A critical path that does not fit its device (static estimate): true = every unit of it becomes a
  // cluster of its own with the parameters it reads first, mapped in path order before the other
  // secondaries with the memory timeline in view, so a device fills with consecutive units, the
  // backward ops that read their activations follow them, and the path moves on where it fits;
  // false = contiguous pieces, each anchored on the next device in rank order and filled to the share
  // of memory the whole graph needs (the earlier way, pardnn's second family when memory binds).
  bool chunk_critical_path = true;
  // With chunk_critical_path false: the path's footprint counts the parameters its ops read (so a
  // path that fits alone but not with its parameters is segmented too); each piece carries the
  // parameters its ops read first and takes its device's share (budget / all budgets) of that whole
  // footprint; a path op whose largest input (but the path's previous op) comes from an earlier piece
  // joins it, so each backward op stays with the forward op whose activation it reads. A training
  // step then ends as a few contiguous stretches of layers with their weights, as a pipeline stage
  // holds them, found from the critical path alone (pardnn's third family when memory binds).
  bool segment_with_parameters = false;
  // Weight of the queueing term against the transfers in the first placement. 0 attaches every
  // cluster to the device it talks to most (memory permitting): few cut edges, as a min-cut
  // partitioner would give; the partitioner tries it as an extra seed when memory is tight.
  double load_weight = 1.0;
  // The time axis of the spans and loads: top levels where an edge between two clusters costs this
  // fraction of its transfer time. 0 (the default): compute only. Charging every edge between clusters in
  // full (the reference's clustered levels) stretches the axis by transfers that mostly vanish once
  // clusters share devices; on communication-heavy graphs (CCR 8 on Inception-v3) the windows then look
  // empty, nothing seems to queue, and the critical path's device takes 2.3x its share of the work.
  double span_comm_weight = 0.0;
  // When the critical path bounds the step (it is at least the total work / the devices' total speed),
  // work off the critical path has slack: a cluster's transfers cost only what exceeds the slack of the
  // longest path through their edge (the largest such delay, as transfers overlap, not their sum), and
  // queueing on a device other than the critical path's first uses up the cluster's slack. Otherwise
  // (or false) every edge costs its full time, summed, and every queueing counts. Without it, on a
  // graph whose critical path dominates (ResNet-32, 6K ops), hundreds of tiny ops join the critical
  // path's device to save transfers nobody waits for, and delay the step by 4 %.
  bool slack_aware = true;
  // With slack_aware: false = the slack costs only where the critical path bounds the step (above);
  // true = everywhere, each op's slack measured against the critical path's length. Where the total
  // work exceeds what the devices do in that time the step is longer than the path, so off the path
  // there is at least that much slack; full costs then see every transfer to a slower link as a delay
  // and keep the work near the path (GPT-96x256 at K = 4 on two hosts: every weight update stays on
  // the first host, 81 ms; with slack costs 36 ms). The partitioner's second cost model uses it where
  // the first mapping was work-bound, so that the two models differ there too.
  bool slack_beyond_critical_bound = false;
  // When both are set (by op id, e.g. a simulated schedule's start and finish times), they replace the
  // levels as the spans' time axis: queueing and transfers that the levels cannot see are then in it.
  const std::vector<int64_t>* schedule_start_ns = nullptr;
  const std::vector<int64_t>* schedule_finish_ns = nullptr;
};

struct ClusterMapping {
  Assignment assignment;
  // Device of each primary (kNone when the graph had fewer paths than devices).
  std::vector<DeviceId> primary_device;
  int32_t num_secondaries = 0;  // after colocation pulls and constraint splits
  int64_t improvement_moves = 0;
  // Memory could bind, and the time-resolved estimate was used (MappingOptions::memory_timeline).
  bool memory_timeline = false;
  // The critical path, not the total work over the devices' speed, bounds the step: where it does
  // not, slack_aware alone maps with plain costs (MappingOptions::slack_beyond_critical_bound).
  bool critical_path_bounds_step = false;
  bool time_limited = false;
};

// INVALID_ARGUMENT when some colocation group has no device that all its members allow.
absl::StatusOr<ClusterMapping> MapClustersToDevices(const Model& model, const SlicingCosts& costs,
                                                    const LinearClusters& clusters,
                                                    const MappingOptions& options,
                                                    const SolveContext& context);

}  // namespace placement::engine::pardnn

#endif  // PLACEMENT_SERVICE_ENGINE_PARDNN_CLUSTER_MAPPING_H_
