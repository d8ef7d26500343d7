// refinement.h — the last ParDNN stage: local search along the simulated critical path.
//
// Each round simulates the current assignment, walks its critical path (simulator.h CriticalPath) and
// proposes moves where the path pays for a placement decision:
//   * a cross-device edge a -> b on the path: move b's unit to a's device, a's unit to b's device, or the
//     whole run of path ops around the edge that shares a device (so a chain does not just shift its cut);
//   * a wait for the device (b waited for the previous op a on its device): move b's or a's unit to
//     another allowed device;
//   * a path op on a slower device than the fastest allowed one: move it there;
//   * (RefinementOptions::branch_moves) a stretch of the path on one device made of independent chains
//     (parallel branches the device runs interleaved): each chain, whole, to another device.
// Candidates are tried in order of the time the path spends on them (the transfer or the wait), each
// judged by a full simulation (on large graphs first many at once, see RefinementOptions::batch_moves); the first one that shortens the step without breaking memory (a
// feasible assignment stays feasible; an infeasible one may not overflow more) is kept. A move that
// shortens the step but overflows gets a few rounds of memory repair before it is judged. At a local
// optimum the search restarts from the best assignment kicked along its critical path (iterated local
// search, seeded by the context's seed). It ends when the simulation budget is spent or the context
// says stop; the best assignment seen is returned.
//
// Example:
//   Simulator sim(model);
//   RefinementOptions options;
//   options.max_simulations = 500;
//   RefinementResult r = RefineAlongCriticalPath(model, options, context, sim, assignment);
#ifndef PLACEMENT_SERVICE_ENGINE_PARDNN_REFINEMENT_H_
#define PLACEMENT_SERVICE_ENGINE_PARDNN_REFINEMENT_H_

#include <cstdint>

#include "service/engine/model/model.h"
#include "service/engine/partition/partitioner.h"
#include "service/engine/sim/simulator.h"

namespace placement::engine::pardnn {

struct RefinementOptions {
  // Simulations at most (the deterministic budget; the deadline may cut it shorter).
  int64_t max_simulations = 1000;
  // Candidates tried per critical path before giving up on it.
  int32_t max_candidates_per_round = 48;
  // A move that shortens the step but overflows memory gets this many memory-repair rounds to fit
  // again (each costs a simulation); false = such moves are simply rejected.
  bool repair_after_move = true;
  int32_t repair_rounds = 4;
  // Iterated local search: at a local optimum, kick the best assignment (a random stretch of its
  // critical path to another device, drawn from the context's seed) and search again, this many times
  // at most while the budget lasts.
  int32_t max_restarts = 1000;
  // ... and stops after this many restarts in a row that did not improve the best assignment.
  int32_t max_restarts_without_improvement = 60;
  // Batched moves (large graphs, where a simulation is expensive): each round first applies up to this
  // many candidates that touch different ops at once and judges them with one simulation; when the
  // batch does not improve, its better-ranked half is tried, and so on down to two (log2(batch)
  // simulations at most), before the one-candidate-per-simulation search of that round. A batch that
  // improves doubles the next one (up to this size). 0 or 1 = off.
  int32_t batch_moves = 0;
  // Branch moves: where the critical path runs on one device for a stretch that holds several chains
  // of ops joined by data edges among them but not to each other (they only waited for the device:
  // parallel branches the device runs interleaved), each chain of two or more ops is also a candidate
  // to move whole to another device (with batch_moves: the least busy one). One at a time, a chain's
  // ops would each pay a transfer in and out for the little they take off the device. Ranked by this
  // fraction of the work they take off the path (the chain still runs, now beside the path, and its
  // entry and exit edges cross devices). pardnn turns them on; off here, as the search of `auto` and
  // the re-placement have them.
  bool branch_moves = false;
  double branch_gain_fraction = 0.5;
  // False when no assignment can overflow (MemoryCanBind): simulations then skip the memory
  // bookkeeping (about a third of their cost) and every score fits.
  bool memory_can_bind = true;
  // A move's simulation stops as soon as the move is certain not to shorten the step
  // (SimOptions::stop_at_ns, where the current assignment fits). The moves made and the
  // answer are the same either way; off: every simulation runs in full (tests).
  bool stop_trials_early = true;
  // Re-placement (model.has_previous_placement()): judge every assignment by step + MoveCostNs (the
  // model's move weight × the persistent bytes it moves away from the previous placement) instead of
  // the step alone. RefinementResult::makespan_ns is then that sum.
  bool count_moves = false;
  // With count_moves: the ns of step one byte moved costs; < 0: the model's move_weight_ns_per_byte
  // (re-placement passes the model's plus its keep-in-place price).
  double move_weight_ns_per_byte = -1.0;
  // Progress reports: stage name and the fraction range this stage covers.
  const char* progress_stage = "refinement";
  double progress_from = 0.0;
  double progress_to = 1.0;
};

struct RefinementResult {
  int64_t simulations = 0;
  int64_t stopped_early = 0;  // of those, cut short (RefinementOptions::stop_trials_early)
  int64_t moves = 0;          // accepted moves
  int64_t makespan_ns = 0;    // of the returned assignment
  int64_t overflow_bytes = 0;  // sum over devices of max(0, peak - capacity)
  bool local_optimum = false;  // reached at least once
  int32_t restarts = 0;
  bool time_limited = false;
};

// A simulation budget that shrinks with the graph: floor(scale * (1e4 / (ops + edges))^exponent), clamped
// to [min_simulations, max(min_simulations, max_simulations)]. Used by pardnn's refinement and auto's search.
int64_t SimulationBudget(double scale, double exponent, int64_t ops_plus_edges, int64_t min_simulations,
                         int64_t max_simulations);

// Improves `assignment` in place. Precondition: constraints hold; they still hold afterwards.
RefinementResult RefineAlongCriticalPath(const Model& model, const RefinementOptions& options,
                                         const SolveContext& context, Simulator& sim,
                                         Assignment& assignment);

// The wide polish, after a search (auto's, the re-placement's): from `assignment`, try every unit on
// the critical path on every other allowed device and keep the first move that improves the score
// (RefinementOptions' objective: step, with count_moves plus the priced moves), then again on the new
// critical path, until no such move improves (local_optimum), options.max_simulations are spent or
// the context says stop. The search's candidates only move path ops where the path crosses devices
// or waits for one; a path op inside a run on one device may gain elsewhere too (NASNet-A mobile
// re-placed on 7 devices: the search's answer was 2 % above where these moves end). Only an
// assignment that fits is polished; the result is never worse than the start. Uses max_simulations,
// memory_can_bind, count_moves, move_weight_ns_per_byte, stop_trials_early and the progress fields.
RefinementResult PolishAlongCriticalPath(const Model& model, const RefinementOptions& options,
                                         const SolveContext& context, Simulator& sim,
                                         Assignment& assignment);

}  // namespace placement::engine::pardnn

#endif  // PLACEMENT_SERVICE_ENGINE_PARDNN_REFINEMENT_H_
