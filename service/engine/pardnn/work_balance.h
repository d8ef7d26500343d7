// work_balance.h — a pardnn stage for steps whose total work bounds them while memory binds: move
// compute-dense, memory-light units from the busiest device to the least busy one, in batches judged
// by simulation.
//
// Why: where memory binds, the mapping and the memory stage keep the devices within capacity, not
// their work in balance, and the critical-path refinement moves one unit per simulation along the
// path. A training step whose optimizer updates are most of its work (a GPT-96×256 step with Adam at
// two devices and 0.45 × its one-device peak each: 79 of its 114 ms of compute are updates, 46 ms of
// them the 768 updates of biases and norms, which hold 4 MB) can end with one device busy the whole
// step and the other half idle and full to the brim: no single move both shortens the step and fits.
// Hundreds of those small updates moved at once do (76.1 → ~61 ms there).
//
// How: simulate; when the busiest device A is busy for at least `work_bound_fraction` of the step and
// the least busy device B for less than `imbalance_fraction` of A's busy time, rank the units
// (colocation groups, or single ops) wholly on A that may run on B by compute time per byte they
// would bring to B (persistent, temporary and output bytes, plus `byte_floor`), leaving out those
// whose edges to A would cost more transfer time than they take; move the best ones worth half the
// difference of busy time at once, simulate, and keep the batch when the score improves (feasible
// first, then the step), after a few rounds of the memory repair when it overflows where the start
// fitted; else halve the batch, down to one unit. Repeat with the devices the new schedule makes
// busiest and idlest until a batch of one fails or the budget is spent. Deterministic (ties by op id).
//
// Example:
//   Simulator sim(model);
//   WorkBalanceResult r = BalanceWork(model, WorkBalanceOptions(), context, sim, assignment);
#ifndef PLACEMENT_SERVICE_ENGINE_PARDNN_WORK_BALANCE_H_
#define PLACEMENT_SERVICE_ENGINE_PARDNN_WORK_BALANCE_H_

#include <cstdint>

#include "service/engine/model/model.h"
#include "service/engine/partition/partitioner.h"
#include "service/engine/sim/simulator.h"

namespace placement::engine::pardnn {

struct WorkBalanceOptions {
  // Simulations at most (memory-repair rounds count as simulations).
  int64_t max_simulations = 64;
  // The busiest device bounds the step when its busy time is at least this fraction of the makespan.
  double work_bound_fraction = 0.95;
  // ... and moving work is tried while the least busy device is busy less than this fraction of it.
  double imbalance_fraction = 0.9;
  // Added to a unit's bytes in its rank (compute time per byte), so that units holding no bytes are
  // ranked by their time.
  int64_t byte_floor = 64 * 1024;
  // A batch that overflows memory where the start fitted gets this many memory-repair rounds on a
  // copy (0: such a batch is rejected).
  int32_t repair_rounds = 6;
  // False when no assignment can overflow (MemoryCanBind): simulations skip the memory bookkeeping.
  bool memory_can_bind = true;
};

struct WorkBalanceResult {
  int64_t simulations = 0;
  int64_t batches = 0;         // accepted batches
  int64_t units_moved = 0;     // in accepted batches
  int64_t makespan_ns = 0;     // of the returned assignment
  int64_t overflow_bytes = 0;  // sum over devices of max(0, peak − capacity)
  bool time_limited = false;
};

// Precondition: `assignment` is complete and keeps pins, kinds and colocation; so does the result,
// which is never worse (by PlacementScore) than the start.
WorkBalanceResult BalanceWork(const Model& model, const WorkBalanceOptions& options,
                              const SolveContext& context, Simulator& sim, Assignment& assignment);

}  // namespace placement::engine::pardnn

#endif  // PLACEMENT_SERVICE_ENGINE_PARDNN_WORK_BALANCE_H_
