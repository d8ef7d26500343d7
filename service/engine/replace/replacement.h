// replacement.h — re-placement after the cluster changed: start from the previous placement instead of
// solving afresh, and trade step time against the bytes that move (PlacementOptions.previous_placement,
// move_weight_ns_per_byte; Model::previous_device).
//
// `auto` calls Replace when the model carries a previous placement, instead of its fresh portfolio:
//   1. **seed** (ReplacementSeed): every unit (colocation group, or a single op) stays on its previous
//      device when that device is still in the cluster and allowed for the whole unit; the others — ops of
//      departed devices, new ops, units whose previous device breaks a pin or kind rule or that were split
//      across devices — are re-homed greedily, in topological order of their first op, to the allowed
//      device with the least (compute queued there + the unit's own time there + transfers from and to
//      neighbours already placed elsewhere), among those whose persistent bytes still fit (else the one
//      least over); the same with every re-homed unit handed to one device d (where allowed), for each d;
//      or split in two at a unit boundary, the first part to another device and the rest to the
//      best of those single devices (at most 12 points per device, within 2e5 simulated ops+edges);
//      the candidate that simulates best is the seed;
//      when the seed fits within skip_near_lower_bound of LowerBoundNs, nothing could gain more: the
//      members and the search below are skipped (small steps, where they would be most of the time);
//      else the quick members' fresh answers, renamed towards the previous placement (only among
//      devices alike in kind, speed, capacity and links, so a renamed answer simulates as the member's
//      own), compete with that seed, and so do each answer's two hybrids (the previous placement where
//      it survives and the member's devices for the units to re-home; the member's answer with the
//      kept state put back) and m-ETF drawn towards the previous devices at a few prices per byte
//      (MEtfTowardsPrevious, ../baselines/m_etf.h); every candidate is judged by step + moves priced
//      at the request's move weight plus the keep-in-place price (keep_in_place_tolerance of the
//      seed's step per device's worth of state moved), and so are the steps below;
//   2. **memory**: if the chosen start overflows, ParDNN's memory repair (../repair/);
//   3. **search**: the critical-path local search (../pardnn/refinement.h) judging step + that price ×
//      bytes moved (RefinementOptions::count_moves), with a simulation budget a quarter of `auto`'s,
//      then its wide polish (PolishAlongCriticalPath) at the same price, in a small share of it;
//   4. **pull-back**: units the answer moves but the step does not need moved (the search only touches
//      the critical path) go back to their previous device — a group test, largest saving first —
//      when step + priced moves gets no worse, or the step stays within pull_back_step_tolerance of the
//      searched answer's (and not above the start's, winner_makespan_ns);
// (When the request leaves W open, Solve then picks the answer's fastest window that fits.)
// Deterministic for a model and seed (the search's restarts draw from the context's seed).
//
// Example:
//   absl::StatusOr<PartitionResult> r = Replace(model, context);   // model.has_previous_placement()
#ifndef PLACEMENT_SERVICE_ENGINE_REPLACE_REPLACEMENT_H_
#define PLACEMENT_SERVICE_ENGINE_REPLACE_REPLACEMENT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "service/engine/model/model.h"
#include "service/engine/partition/partitioner.h"

namespace placement::engine {

struct ReplacementOptions {
  // The search's simulation budget: floor(search_scale × (1e4 / (V + E))^search_exponent) over the
  // unrolled step, clamped to [search_min_simulations, search_max_simulations] (a quarter of auto's
  // defaults: a re-placement is asked to take at most a quarter of a fresh solve's time).
  double search_scale = 1000.0;
  double search_exponent = 2.0;
  int64_t search_min_simulations = 0;
  int64_t search_max_simulations = 5000;
  // Random restarts in a row without improvement that end the search (where a search gains, it gains
  // within the first few restarts). 3 since the refinement got quicker (2026-12-06): fresh solves of
  // the bench's small plan steps fell to 0.10-0.15 s, and with 6 a re-placement took up to 0.29 of
  // one; with 3, 0.25, for at most 0.14 % of step in 4 of 129 rows (replace_bench).
  int32_t search_restarts_without_improvement = 3;
  // ... and at most this many restarts in all (a search that keeps gaining a little, GPT-6 started
  // from a re-cut pipeline, took twice the time of one that stops here, for 0.1 % of step).
  int32_t search_max_restarts = 12;
  // Off: seed and memory repair only (tests, measurements).
  bool search = true;
  // After the search, its answer polished at the same price (pardnn::PolishAlongCriticalPath: every
  // unit on the critical path tried on every other device while a move improves), in at most
  // min(polish_max_simulations, an eighth of the search's budget) simulations. Off: tests,
  // measurements.
  bool polish = true;
  int64_t polish_max_simulations = 256;
  // The keep-in-place price: every device's worth of state moved costs this fraction of the re-homed
  // seed's step, on top of the request's move weight (a device's worth: what must move, the departed
  // devices' state; when nothing must move, a device's share of all state). Every step below prices
  // moves at the sum: step 1's choice, the search and the pull-back. A scheduler re-places to keep
  // state where it is, and a small move weight (1e-3 ns/byte on the replace bench) prices moving
  // seven devices' worth below a 1 % gain; linear in the bytes (2026-12-06; before: the whole price
  // for any move beyond the incumbent's, which let a fresh answer moving half a device's worth beat
  // one moving a tenth for 0.1 % of step).
  double keep_in_place_tolerance = 0.03;
  // m-ETF drawn towards the previous devices (MEtfTowardsPrevious) runs once per entry, at this
  // multiple of the move price above: the cheaper, the more it re-balances; the dearer, the more it
  // keeps. Empty: not run. Only with fresh members (auto's re-placement, not the tests' choices).
  std::vector<double> towards_previous_weights = {1, 2, 4, 8, 16};
  // When the seed fits and its step is within (1 + this) × LowerBoundNs (simulator.h), the members'
  // fresh answers and the search are skipped: none could gain more than this fraction.
  double skip_near_lower_bound = 0.01;
  // Step 4, the pull-back: units returned to their previous device while step + move cost gets no
  // worse, in at most min(this, an eighth of the search's budget) simulations (NASNet-A large at 8
  // devices: 256 of its 0.25 ms simulations were a fifth of its re-placement). Off: tests,
  // measurements.
  bool pull_back = true;
  int64_t pull_back_max_simulations = 256;
  // A unit is also returned when the step stays within (1 + this) × the step the pass started from
  // (the searched answer's), whatever the move weight says: a scheduler asks for re-placement to
  // keep state where it is, and a step within noise of the best is not worth gigabytes moved.
  double pull_back_step_tolerance = 0.005;
};

// The re-homed previous placement (step 1 above; the best of its candidates by simulation):
// constraints hold; ops that keep a valid previous device keep it. Precondition:
// model.has_previous_placement().
Assignment ReplacementSeed(const Model& model);

// Steps 1–4. `fresh_members` (quick algorithms; `auto` passes its members, pardnn without refinement
// and re-timing) each answer afresh within half the time left in turn (unless the seed is near the
// lower bound); each answer, its devices renamed (among alike devices) to keep as much state where it
// was as possible, and its hybrids compete with the seed as step 1 says. PartitionResult::winner is
// "previous_placement", the member whose answer won, "previous_placement+" or "previous_state+" and
// the member whose hybrid won, or "m_etf@previous"; winner_makespan_ns is that start's step before
// memory repair, search and pull-back. Precondition:
// model.has_previous_placement().
absl::StatusOr<PartitionResult> Replace(const Model& model, const SolveContext& context,
                                        const ReplacementOptions& options = ReplacementOptions(),
                                        const std::vector<const Partitioner*>& fresh_members = {});

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_REPLACE_REPLACEMENT_H_
