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
#ifndef PLACEMENT_SERVICE_ENGINE_PARTITION_SIMPLE_PARTITIONERS_H_
#define PLACEMENT_SERVICE_ENGINE_PARTITION_SIMPLE_PARTITIONERS_H_

#include <memory>

#include "service/engine/partition/partitioner.h"

namespace placement::engine {

std::unique_ptr<Partitioner> MakeSingleDevicePartitioner();
std::unique_ptr<Partitioner> MakeRoundRobinPartitioner();

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_PARTITION_SIMPLE_PARTITIONERS_H_
