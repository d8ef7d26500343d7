// memory_repair.h — ParDNN stage 2, shared by every algorithm that needs it (pardnn, metis, ...):
// moves ops (colocation groups as units) off devices whose simulated peak memory exceeds their capacity,
// choosing the candidates that free the most bytes at the overflow point for the least estimated makespan
// increase, to devices with room, until every device fits or no move can help.
//
// Example:
//   RepairOutcome outcome = RepairMemory(model, context, assignment);  // assignment is updated in place
//   if (!outcome.fits) Report(outcome.reason);
#ifndef PLACEMENT_SERVICE_ENGINE_REPAIR_MEMORY_REPAIR_H_
#define PLACEMENT_SERVICE_ENGINE_REPAIR_MEMORY_REPAIR_H_

#include <cstdint>
#include <string>

#include "service/engine/model/model.h"
#include "service/engine/partition/partitioner.h"

namespace placement::engine {

struct RepairOutcome {
  bool fits = false;      // every device's peak <= capacity after repair
  int32_t moves = 0;      // ops moved
  std::string reason;     // when !fits: device, time and bytes short
  bool time_limited = false;
};

// Precondition: `assignment` satisfies pins, kinds and colocation; repair keeps them satisfied.
RepairOutcome RepairMemory(const Model& model, const SolveContext& context, Assignment& assignment);

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_REPAIR_MEMORY_REPAIR_H_
