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
//      the candidate that simulates best is the seed (D + 1 simulations);
//      when the seed fits within skip_near_lower_bound of LowerBoundNs, nothing could gain more: the
//      members and the search below are skipped (small steps, where they would be most of the time);
//      else the quick members' fresh answers, renamed towards the previous placement (only among
//      devices alike in kind, speed, capacity and links, so a renamed answer simulates as the member's
//      own), compete with that seed on step + move cost, and so does each answer's hybrid (the previous
//      placement where it survives, the member's devices for the units to re-home); a candidate moving
//      more bytes than the best so far must beat it by keep_in_place_tolerance of its step for every
//      device's worth of state it moves beyond that one (at least once);
//   2. **memory**: if the chosen start overflows, ParDNN's memory repair (../repair/);
//   3. **search**: the critical-path local search (../pardnn/refinement.h) judging step + move weight ×
//      bytes moved (RefinementOptions::count_moves), with a simulation budget a quarter of `auto`'s;
//   4. **pull-back**: units the answer moves but the step does not need moved (the search only touches
//      the critical path) go back to their previous device — a group test, largest saving first —
//      when step + move cost gets no worse, or the step stays within pull_back_step_tolerance of the
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
  // Random restarts in a row without improvement that end the search (6: where a search gains, it
  // gains within the first few restarts; the rest were a quarter of a re-placement's time on the
  // bench's steps for no step gained).
  int32_t search_restarts_without_improvement = 6;
  // Off: seed and memory repair only (tests, measurements).
  bool search = true;
  // Step 1's choice among the re-homed seed, the members' fresh answers and their hybrids: a
  // candidate that moves more persistent bytes than the best so far must be better on step + move
  // cost by more than this fraction of that one's step for every device's worth of state it moves
  // beyond it (a device's worth: what the seed must move, the departed devices' state, or a device's
  // share of all state when that is more; at least once). The step the search then starts from is
  // within this of the faster candidate's; the search recovers most of it, the bytes stay put. Scaled
  // by the bytes (2026-12-05) because a fresh answer that re-balances everything can be a few per cent
  // faster while moving 7-10 devices' worth (MobileNet-v2, a wide transformer, GPT-24 on the
  // replace bench), moves that a small move weight (1e-3 ns/byte there) prices below that gain.
  double keep_in_place_tolerance = 0.02;
  // When the seed fits and its step is within (1 + this) × LowerBoundNs (simulator.h), the members'
  // fresh answers and the search are skipped: none could gain more than this fraction.
  double skip_near_lower_bound = 0.01;
  // Step 4, the pull-back: units returned to their previous device while step + move cost gets no
  // worse, in at most min(this, the search's budget) simulations. Off: tests, measurements.
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
// was as possible, and its hybrid compete with the seed as step 1 says. PartitionResult::winner is "previous_placement", the member
// whose answer won, or "previous_placement+" and the member whose hybrid won; winner_makespan_ns is
// that start's step before memory repair, search and pull-back. Precondition:
// model.has_previous_placement().
absl::StatusOr<PartitionResult> Replace(const Model& model, const SolveContext& context,
                                        const ReplacementOptions& options = ReplacementOptions(),
                                        const std::vector<const Partitioner*>& fresh_members = {});

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_REPLACE_REPLACEMENT_H_
