// heft.h — HEFT (Topcuoglu, Hariri and Wu, IEEE TPDS 2002) with a memory check, on heterogeneous devices
// (speeds) and per-pair links.
//
// 1. Upward rank: rank(v) = mean run time of v over the devices it may use + max over consumers s of
//    (mean transfer time of the edge over all device pairs + rank(s)).
// 2. Ops in decreasing rank (ties: earlier in the topological order, which keeps the order topological
//    even with zero costs); each goes to the device giving the earliest finish time, with insertion: it
//    may fill an idle gap between two ops already scheduled there if the gap is long enough
//    (free_slots.h keeps this O(log V)).
// 3. Memory check (the memory-aware HEFT variant): a device is a candidate only if the bytes the op adds
//    fit in what is left of its capacity. Bytes are held as the schedule is built: a colocation group's
//    persistent bytes from its first placement, an op's output until all its consumers are placed, a
//    received copy until all consumers of its producer are placed, temp bytes only while being checked.
//    If no allowed device has room, the op goes to the one with the most (the simulator reports the
//    overflow).
// Colocation groups are fixed to the device of their first placed member; pins and kinds restrict the
// candidate devices.
//
// Cost O(E * D + V * D * log V).
//
// Example:
//   std::unique_ptr<Partitioner> heft = MakeHeftPartitioner();
//   absl::StatusOr<PartitionResult> result = heft->Partition(model, context);
//
// Faithful to the published method, and where it is extended:
//
// HEFT's memory check is the memory-aware list-scheduling variant: a device is a candidate only when the
// bytes the op adds fit what is left; bytes are held as the schedule is built (outputs and received
// copies until every consumer is placed).
#ifndef PLACEMENT_SERVICE_ENGINE_BASELINES_HEFT_H_
#define PLACEMENT_SERVICE_ENGINE_BASELINES_HEFT_H_

#include <memory>

#include "service/engine/partition/partitioner.h"

namespace placement::engine {

// api.md name "heft".
std::unique_ptr<Partitioner> MakeHeftPartitioner();

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_BASELINES_HEFT_H_
