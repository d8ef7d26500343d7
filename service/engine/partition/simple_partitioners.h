// simple_partitioners.h — the two trivial reference points every comparison starts from.
//
//   single_device: every op on one device (the fastest, then the largest, then the first), except what
//                  pins, kinds and colocation force elsewhere.
//   round_robin:   the k-th op of the canonical topological order on device k mod D (adjusted for
//                  constraints as above).
//
// Example:
//   std::unique_ptr<Partitioner> p = MakeRoundRobinPartitioner();
//   absl::StatusOr<PartitionResult> r = p->Partition(model, SolveContext());
//   Assignment serial = SingleDeviceAssignment(model);  // the same answer as single_device, directly
#ifndef PLACEMENT_SERVICE_ENGINE_PARTITION_SIMPLE_PARTITIONERS_H_
#define PLACEMENT_SERVICE_ENGINE_PARTITION_SIMPLE_PARTITIONERS_H_

#include <memory>

#include "service/engine/partition/partitioner.h"

namespace placement::engine {

std::unique_ptr<Partitioner> MakeSingleDevicePartitioner();
std::unique_ptr<Partitioner> MakeRoundRobinPartitioner();

// Their answers, for algorithms that start from one (pardnn's last resort is the single-device one).
// The device single_device prefers: the fastest, then the one with the most memory, then the first.
DeviceId FastestDevice(const Model& model);
// single_device's assignment: every op on FastestDevice, then pins, kinds and colocation enforced.
Assignment SingleDeviceAssignment(const Model& model);
// round_robin's assignment: the k-th op of model.topo_order on device k mod D, constraints enforced.
Assignment RoundRobinAssignment(const Model& model);

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_PARTITION_SIMPLE_PARTITIONERS_H_
