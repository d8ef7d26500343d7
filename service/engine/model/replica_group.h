// replica_group.h — the model of replica group 0 under data parallelism (api.md §2.1).
//
// With D data-parallel replicas the cluster's devices, in cluster order, form D equal groups of N/D; an
// answer places the ops on group 0 (device ids 0..N/D-1, the same ids as in the cluster) and every
// group runs the same assignment. Every algorithm and the simulator therefore work on a model whose
// devices are group 0's: `ReplicaGroupModel` builds it — the same ops, the first N/D devices with their
// links, and per device the slowest link of its all-reduce ring, which the simulator needs.
//
// Example:
//   absl::StatusOr<Model> full = BuildModel(request);           // plan.data_parallel as requested
//   for (int32_t d : ReplicaCountsToTry(*full)) {
//     const Model group = ReplicaGroupModel(*full, d);          // plan.data_parallel = d
//     Simulator sim(group); ...
//   }
#ifndef PLACEMENT_SERVICE_ENGINE_MODEL_REPLICA_GROUP_H_
#define PLACEMENT_SERVICE_ENGINE_MODEL_REPLICA_GROUP_H_

#include <cstdint>
#include <vector>

#include "service/engine/model/model.h"

namespace placement::engine {

// `model` on only `devices` (ids of `model`, in the order given, renumbered 0..n-1): the same ops, those
// devices with the links between them. Pins, cluster_devices, the plan and the ring links are left as
// they are: the caller's (ReplicaGroupModel keeps the prefix's pins; pardnn's fewer-hosts family
// renumbers them).
Model DeviceSubset(const Model& model, const std::vector<DeviceId>& devices);

// The model of replica group 0 for `data_parallel` replicas of `model` (a model of the whole cluster,
// as BuildModel returns it). Requires data_parallel >= 1 dividing model.num_devices(). With 1 the copy
// keeps every device and plan.data_parallel becomes 1. Ops pinned outside group 0 keep their pin (an id
// >= the group's size): callers only ask for counts that ReplicaCountsToTry (or validation) allows.
Model ReplicaGroupModel(const Model& model, int32_t data_parallel);

// The replica counts a solver may choose for `model` (plan.data_parallel 0): every divisor D of the
// device count for which every op can be placed in group 0 (its pin inside the group, some device of
// an allowed kind in it), ascending. A model with a fixed D gets just {D}. Never empty: 1 always fits
// a valid model.
std::vector<int32_t> ReplicaCountsToTry(const Model& model);

// The slowest link of the all-reduce ring through group-0 device `device` for `data_parallel` replicas
// of the whole-cluster `model`: over the links (d, d + G), (d + G, d + 2G), ..., (d + (D-1)G, d) with
// G = N / D, the one of lowest bandwidth, on a tie the one of highest latency.
LinkCost RingLink(const Model& model, int32_t data_parallel, DeviceId device);

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_MODEL_REPLICA_GROUP_H_
