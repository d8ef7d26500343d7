// metis.h — the graph-partitioning baseline: a k-way partition from the real libmetis
// (METIS_PartGraphKway, Karypis and Kumar), then repaired for constraints and memory.
//
// The graph METIS sees: one vertex per colocation unit (a group, or a single op), weighted by its compute;
// one undirected edge per pair of units joined by data, weighted by the bytes between them (both
// directions summed; control edges count 1). k = number of devices, and the target weight of part d is
// speed(d) / total speed, so faster devices get more work. Weights are scaled to fit METIS's 32-bit
// integers. METIS's seed is the request's seed, which keeps the result deterministic.
// METIS knows nothing about pins, kinds, order or memory: units placed on a device they may not use move
// to the allowed device they share the most bytes with (ties: least work per speed), and then the shared
// memory repair (repair/memory_repair.h, ParDNN's stage 2) moves units off overflowing devices.
//
// Cost: METIS is O(V + E) per level of its multilevel scheme; the repair is RepairMemory's.
//
// Example:
//   std::unique_ptr<Partitioner> metis = MakeMetisPartitioner();
//   absl::StatusOr<PartitionResult> result = metis->Partition(model, context);
//
// Faithful to the published method, and where it is extended:
//
// METIS is partition-only, so constraint fix-up and the shared memory repair follow it, as the issue asks.
#ifndef PLACEMENT_SERVICE_ENGINE_BASELINES_METIS_H_
#define PLACEMENT_SERVICE_ENGINE_BASELINES_METIS_H_

#include <memory>

#include "service/engine/partition/partitioner.h"

namespace placement::engine {

// api.md name "metis".
std::unique_ptr<Partitioner> MakeMetisPartitioner();

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_BASELINES_METIS_H_
