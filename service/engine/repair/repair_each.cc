#include "service/engine/repair/repair_each.h"

#include <algorithm>

namespace placement::engine {

RepairEachResult RepairEachOverflowing(const Model& model, const SolveContext& context,
                                       const RepairEachOptions& options,
                                       const std::vector<ScoredCandidate>& candidates) {
  RepairEachResult result;
  std::vector<size_t> order;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].assignment == nullptr || candidates[i].score.Fits()) continue;
    bool duplicate = false;
    if (options.skip_duplicates) {
      for (const size_t j : order) duplicate |= *candidates[j].assignment == *candidates[i].assignment;
    }
    if (!duplicate) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return candidates[a].score.overflow_bytes < candidates[b].score.overflow_bytes;
  });
  RepairOptions to_the_brim = options.repair;
  to_the_brim.target_fill = 1.0;
  to_the_brim.max_stalled_rounds = std::max(options.repair.max_stalled_rounds, options.brim_stalled_rounds);
  for (size_t k = 0; k < order.size(); ++k) {
    if (context.ShouldStop()) {
      result.time_limited = true;
      break;
    }
    const SolveContext slice = context.WithShareOfTimeLeft(1.0 / static_cast<double>(order.size() - k));
    RepairedCandidate repaired;
    repaired.index = order[k];
    repaired.assignment = *candidates[order[k]].assignment;
    RepairOutcome outcome = RepairMemory(model, slice, options.repair, repaired.assignment);
    result.time_limited |= outcome.time_limited;
    if (options.retry_to_the_brim && !outcome.fits && !slice.ShouldStop()) {
      // Stalled: every device is nearly full, so no target keeps the usual safety margin below its
      // capacity (RepairOptions::target_fill). Go on from there filling targets to the brim.
      outcome = RepairMemory(model, slice, to_the_brim, repaired.assignment);
      result.time_limited |= outcome.time_limited;
    }
    repaired.score = PlacementScore{outcome.overflow_bytes, outcome.makespan_ns};
    result.candidates.push_back(std::move(repaired));
  }
  return result;
}

}  // namespace placement::engine
