// m_topo.h — Baechi's m-TOPO (Jeon et al., SoCC 2020): walk the ops in topological order and fill the
// devices one after another, moving to the next device when the next op would not fit.
//
// As published, an op's memory is the static sum of what it may ever hold (persistent + output + temp),
// and the "uniform" variant is used so that the load is spread instead of filling device 0 to the brim:
// device d accepts up to min(capacity(d), total memory * capacity(d) / total capacity + largest unit).
// Colocation groups are placed as one unit (all members' memory at once) when their first member comes up
// in the order. Units restricted by pins or kinds go to the first allowed device (from the current one
// onwards) with room, without closing the current device for the others. When nothing has room the unit
// goes to the allowed device with the most room left (the simulator then reports the overflow).
//
// Cost O(V + E + D) plus O(D) per constrained unit; no simulation.
//
// Example:
//   std::unique_ptr<Partitioner> m_topo = MakeMTopoPartitioner();
//   absl::StatusOr<PartitionResult> result = m_topo->Partition(model, context);
//
// Faithful to the published method, and where it is extended:
//
// m-TOPO uses Baechi's static memory per op (persistent + output + temp, all at once) and its "uniform"
// cap (total / devices + largest op), here proportional to each device's capacity for mixed clusters.
#ifndef PLACEMENT_SERVICE_ENGINE_BASELINES_M_TOPO_H_
#define PLACEMENT_SERVICE_ENGINE_BASELINES_M_TOPO_H_

#include <memory>

#include "service/engine/partition/partitioner.h"

namespace placement::engine {

// api.md name "m_topo".
std::unique_ptr<Partitioner> MakeMTopoPartitioner();

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_BASELINES_M_TOPO_H_
