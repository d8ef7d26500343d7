// repair_each.h — the memory stage over several candidate answers, as pardnn's stage 2 and `auto`'s
// memory step both run it: every candidate that overflows goes through RepairMemory, least overflow
// first (the likeliest to fit soon), each with an equal share of the time left so that one slow repair
// cannot starve the rest; optionally a repair that stalls is retried filling targets to the brim.
//
// Example:
//   std::vector<ScoredCandidate> table = ...;  // assignments with their simulated scores
//   const RepairEachResult repaired = RepairEachOverflowing(model, context, options, table);
//   for (const RepairedCandidate& r : repaired.candidates) Consider(r.assignment, r.score);
#ifndef PLACEMENT_SERVICE_ENGINE_REPAIR_REPAIR_EACH_H_
#define PLACEMENT_SERVICE_ENGINE_REPAIR_REPAIR_EACH_H_

#include <cstddef>
#include <vector>

#include "service/engine/model/model.h"
#include "service/engine/partition/partitioner.h"
#include "service/engine/repair/memory_repair.h"
#include "service/engine/sim/placement_score.h"

namespace placement::engine {

// A candidate answer and its simulated score.
struct ScoredCandidate {
  const Assignment* assignment = nullptr;
  PlacementScore score;
};

struct RepairedCandidate {
  size_t index = 0;  // into the candidates given
  Assignment assignment;
  PlacementScore score;  // the repair's outcome (overflow, makespan)
};

struct RepairEachResult {
  std::vector<RepairedCandidate> candidates;  // in the order they were repaired
  bool time_limited = false;
};

struct RepairEachOptions {
  RepairOptions repair;
  // A repair that stalls (every device nearly full) is retried with targets filled to the brim
  // (RepairOptions::target_fill = 1) and at least this many stalled rounds.
  bool retry_to_the_brim = false;
  int32_t brim_stalled_rounds = 30;
  // Candidates with the same assignment are repaired once.
  bool skip_duplicates = true;
};

RepairEachResult RepairEachOverflowing(const Model& model, const SolveContext& context,
                                       const RepairEachOptions& options,
                                       const std::vector<ScoredCandidate>& candidates);

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_REPAIR_REPAIR_EACH_H_
