// window_search.h — the window W of a training plan (api.md §2.1) for a finished assignment: the fastest
// W that fits memory.
//
// A smaller window holds fewer microbatches' activations (1F1B-like memory at W = stages), a larger one
// lets the pipeline fill better (GPipe at W = M); neither the step nor the peak is exactly monotone in W
// under list scheduling, so the search simulates: every W when the plan is small enough, else a handful
// of telling windows (see WindowSearchOptions). Judged like every answer: less overflow first, then the
// shorter step, then the smaller W (less memory for the same step).
//
// Example:
//   Simulator sim(group_model);
//   const WindowChoice choice = ChooseWindow(group_model, assignment, sim);
//   placement = ScoreAssignment(group_model, assignment, nullptr, choice.max_in_flight);
#ifndef PLACEMENT_SERVICE_ENGINE_PLANS_WINDOW_SEARCH_H_
#define PLACEMENT_SERVICE_ENGINE_PLANS_WINDOW_SEARCH_H_

#include <cstdint>

#include "service/engine/model/model.h"
#include "service/engine/partition/partitioner.h"
#include "service/engine/sim/placement_score.h"
#include "service/engine/sim/simulator.h"

namespace placement::engine {

struct WindowChoice {
  int32_t max_in_flight = 1;
  PlacementScore score;
  int32_t simulations = 0;  // how many windows were simulated
};

// Options of the search. Exhaustive while M × M × (ops + edges) stays within `exhaustive_budget`;
// else a few telling windows (no window, one per device, two per device) and, when none of them fits, a
// bisection for the largest window that fits (memory grows with the window, so a fitting W is found in
// log M simulations), then one step to each side of the best.
struct WindowSearchOptions {
  int64_t exhaustive_budget = 2'000'000;
  // A score already known for one window (the working window an algorithm simulated with): not
  // simulated again. 0 = none.
  int32_t known_window = 0;
  PlacementScore known_score;
  // When true, a stop (the context's deadline or cancellation) ends the search only once some window
  // fits: what a solve past its time limit wants — its answer at once, but never an overflowing window
  // where a few more simulations would find one that fits. Told to stop before the search began, it
  // tries no window, then the model's own window (a plan model's working window), then W = 1, and
  // takes the first that fits (or the least overflow).
  bool stop_only_once_fitting = false;
};

// The best window for `assignment` on `model` (a plan model: group 0's devices). With a window fixed by
// the model's plan (plan.max_in_flight > 0 and `respect_fixed`), or M = 1, just that one. `sim` must be a
// simulator of `model`. Stops early (best so far) when `context` says so (see stop_only_once_fitting).
WindowChoice ChooseWindow(const Model& model, const Assignment& assignment, Simulator& sim,
                          const SolveContext& context = SolveContext(),
                          const WindowSearchOptions& options = WindowSearchOptions());

// The score of `assignment` simulated with window `max_in_flight`.
PlacementScore ScoreWithWindow(const Model& model, const Assignment& assignment, Simulator& sim,
                               int32_t max_in_flight);

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_PLANS_WINDOW_SEARCH_H_
