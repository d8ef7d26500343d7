// memory_repair.h — ParDNN stage 2, shared by every algorithm that needs it (pardnn, metis, ...):
// moves ops (colocation groups as units) off devices whose simulated peak memory exceeds their capacity,
// choosing the candidates that free the most bytes at the overflow point for the least estimated makespan
// increase, to devices with room, until every device fits or no move can help.
//
// How (details in README.md): simulate with memory intervals; per device keep the memory timeline in a
// range-add/range-max tree (range_max_tree.h); at the peak of an overflowing device list the units that
// hold bytes there, estimate per target device the makespan increase (new transfers, queueing on the
// target, speed difference, each against the op's slack in the simulated schedule) and check the target's
// room by charging the unit's intervals to the target's tree (O(log T) per interval, rolled back when it
// does not fit); move the cheapest per useful byte until the peak fits; after the batch re-simulate. The
// loop is bounded (rounds, stalled rounds, moves) and returns the assignment with the least overflow.
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
  // Extra detail (0 when not computed).
  int32_t rounds = 0;               // simulate-and-move rounds run
  int64_t overflow_bytes = 0;       // sum over devices of max(0, peak - capacity) of the result
  int64_t makespan_ns = 0;          // simulated makespan of the returned assignment
};

struct RepairOptions {
  // Simulate-and-move rounds at most.
  int32_t max_rounds = 200;
  // Give up after this many consecutive rounds that did not reduce the total overflow.
  int32_t max_stalled_rounds = 10;
  // A target has room for a move when its timeline stays at or below this fraction of its capacity
  // (the re-simulated schedule drifts; a target filled to the brim tends to overflow next round).
  double target_fill = 0.98;
  // Peak re-examinations per overflowing device per round (each rescans that device's intervals).
  int32_t max_peak_scans_per_device = 64;
  // At one peak, only the units holding the most bytes there are costed (huge graphs).
  int64_t max_candidates_per_scan = 2048;
  // A unit may not move back to the device it left for this many rounds (stops ping-pong).
  int32_t tabu_rounds = 3;
  // Weight of the transfer time a move creates, relative to its estimated makespan increase, in the
  // candidate order (keeps cut edges few when several moves look free).
  double transfer_weight = 1.0 / 16;
  // Progress reports go out under this stage name with fractions mapped into [from, to].
  const char* progress_stage = "memory";
  double progress_from = 0.0;
  double progress_to = 1.0;
};

// Precondition: `assignment` satisfies pins, kinds and colocation; repair keeps them satisfied.
RepairOutcome RepairMemory(const Model& model, const SolveContext& context, Assignment& assignment);
RepairOutcome RepairMemory(const Model& model, const SolveContext& context,
                           const RepairOptions& options, Assignment& assignment);

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_REPAIR_MEMORY_REPAIR_H_
