// memory_repair.h — ParDNN stage 2, shared by every algorithm that needs it (pardnn, metis, ...):
// moves ops (colocation groups as units) off devices whose simulated peak memory exceeds their capacity,
// choosing the candidates that free the most bytes at the overflow point for the least estimated makespan
// increase, to devices with room, until every device fits or no move can help.
//
// How (in detail below): simulate with memory intervals; per device keep the memory timeline in a
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
//
// The method in detail:
//
// The judge is the simulator (`sim/simulator.h`); the repair never invents its own memory model, it
// re-simulates after every batch of moves.
//
// 1. **Simulate** with `record_memory_intervals`. Total overflow = Σ over devices of max(0, peak − capacity).
//    Keep the best assignment seen (least overflow, then makespan). Done when nothing overflows.
// 2. **Timeline per device**: slots at the distinct interval starts (the maximum of a piecewise-constant
//    function whose rises all happen at interval starts is attained at one of them); initial values by a
//    difference array; a `RangeAddMaxTree` over the slots. A tentative interval charge is an `Add(l, r, ±bytes)`,
//    O(log T); the device's peak is `Max()`, O(1); where it is, `ArgMax()`, O(log T).
// 3. For each overflowing device, largest overflow first, **at its peak slot t**:
//    * **Candidates** = units (colocation groups, or single ops) that hold bytes at t: their persistent and
//      temp buffers, their output (unless consumers staying on the device keep it alive after the producer
//      finished), and received copies / outputs whose remaining holders at t all belong to one unit.
//      Each candidate gets the bytes it would free at t.
//    * **Cost of moving unit U from D to E**, estimated from the simulated schedule: new input arrivals over
//      the (D, E) or (other, E) links, queueing on E (busy time of E in the window, from prefix sums over E's
//      ops sorted by start), the speed difference, and the arrival delays it causes to consumers left
//      behind — each measured against the op's **slack** (makespan − start − bottom level). The slack a move
//      consumes is recorded, so a batch does not spend the same slack twice. A small weight on the transfer
//      time created keeps cut edges few when several moves look free.
//    * **Order**: cost per *useful* byte (min(freed, still needed)), in a heap; after each move the keys of
//      the moved unit's neighbours are recomputed (a neighbour that follows it creates fewer transfers), so a
//      batch grows contiguous regions instead of scattering single ops.
//    * **Target**: an allowed device whose tree, after charging the unit's buffers (same times), the copies
//      it now needs, and on D the copies left behind (and the shorter lifetimes of its producers' buffers),
//      stays at or below `target_fill` × capacity; least estimated cost, then most room. If no target has
//      room, a move that lowers the total overflow (a later step fixes the target); if still stuck for a
//      whole round, one forced move per device to the roomiest device. A unit may not move straight back to
//      the device it left for `tabu_rounds` rounds.
//    * Apply charges until the peak fits, rescan when the peak moves (bounded by
//      `max_peak_scans_per_device`).
// 4. **Re-simulate** (next round). Stop when everything fits, after `max_rounds`, after `max_stalled_rounds`
//    rounds without a new best, when no move is possible, or when the context says stop. Return the best
//    assignment seen; `reason` names the worst device of it, the time of its peak and the bytes short.
//
// It never loops forever: rounds are bounded, each unit moves at most once per round, peak rescans are
// bounded.
//
// Compared with the reference (../shared/docs/pardnn-reference.md §3, §8.14):
//
// | reference (Python v5 / C++) | here |
// |---|---|
// | overflow detected at a hard-coded 28 GiB while the limit is 30 GiB | each device's `capacity_bytes` (memory × (1 − headroom)) |
// | dense K × L timeline, every tentative move rewrites slices and recomputes a max over the matrix | one segment tree per device, O(log T) per charge, O(1) peak |
// | makespan impact not estimated (comm per byte proxy); normal ops only chosen when every other heap is empty (mixed-sign keys) | cost = estimated makespan increase from slack, queueing, speed and transfers, per useful byte, one ordering for all units |
// | a moved op's own output bytes are not moved | every buffer of the unit moves; copies left behind and created are charged |
// | `exit()` when an overflow cannot be addressed | `INFEASIBLE` reason as data, best assignment kept |
// | C++ `handle_memory` ignores capacity and time | time-resolved, capacity-driven |
//
// Complexity:
//
// Per round: one simulation O((V + E) log V); indexing O(I log I) for I memory intervals; per examined peak
// a scan of the device's intervals O(I_d) and, per candidate and target, O(deg(U)) for the estimate and
// O(|charges| log T) for the room check. Rounds ≤ `max_rounds` (200).
//
// Two shortcuts keep large graphs cheap without changing a single move (RepairOptions turns them off,
// and the tests compare both ways). On a 20K-op transformer step at K = 2 a peak holds ~1,000 units, a
// scan usually moves one of them before the peak shifts to a neighbouring slot, and the target is
// nearly full, so nearly every try fails its room check:
//   * **Estimates are reused.** A unit's estimated cost per target stays valid until a move changes
//     what the estimate reads (a neighbour's device, the slack an earlier move consumed on one of its
//     ops or consumers); a move drops exactly those units' entries. Re-keying a peak's candidates then
//     costs O(1) for most of them.
//   * **Hopeless tries are ruled out by bounds.** Charges on a target only add bytes (when the unit's
//     buffers are non-negative), so the target's peak after a move is at least its current peak, and at
//     least each added interval on top of its range's current maximum (a range query, no update); the
//     source's peak falls by at most the bytes removed there (bounded per unit before its charges are
//     built, and by the charges after). A try whose target surely ends above `target_fill` and whose
//     total overflow surely does not fall below the best spill so far is skipped without charging the
//     trees and rolling back. Stuck rounds (where the forced move takes the roomiest target) are not
//     bounded.
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
  // Work done (what RepairOptions' shortcuts save): move costs estimated, and tentative moves charged
  // to the trees and rolled back to check a target's room.
  int64_t move_estimates = 0;
  int64_t room_checks = 0;
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
  // Shortcuts that change nothing in the answer (tests turn them off to check that): keep each
  // candidate's estimated move costs until a move changes what they read, and skip the room check of a
  // target whose bounds (its peak cannot fall, the source's falls by at most the bytes removed) already
  // show no room and no lower total overflow than the best spill so far.
  bool reuse_move_estimates = true;
  bool bound_room_checks = true;
  // Progress reports go out under this stage name with fractions mapped into [from, to].
  const char* progress_stage = "memory";
  double progress_from = 0.0;
  double progress_to = 1.0;
};

// Precondition: `assignment` satisfies pins, kinds and colocation; repair keeps them satisfied.
RepairOutcome RepairMemory(const Model& model, const SolveContext& context, Assignment& assignment);
// A short repair inside a search (a move or a batch of moves that overflows): at most `max_rounds`
// rounds, giving up after two that do not reduce the overflow, reporting no progress.
RepairOutcome RepairFewRounds(const Model& model, const SolveContext& context, int32_t max_rounds,
                              Assignment& assignment);
RepairOutcome RepairMemory(const Model& model, const SolveContext& context,
                           const RepairOptions& options, Assignment& assignment);

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_REPAIR_MEMORY_REPAIR_H_
