#include "service/engine/plans/window_search.h"

#include <algorithm>
#include <vector>

namespace placement::engine {
namespace {

// Better: less overflow, then a shorter step, then a smaller window.
bool Better(const PlacementScore& a, int32_t wa, const PlacementScore& b, int32_t wb) {
  if (a.BetterThan(b)) return true;
  if (b.BetterThan(a)) return false;
  return wa < wb;
}

}  // namespace

PlacementScore ScoreWithWindow(const Model& model, const Assignment& assignment, Simulator& sim,
                               int32_t max_in_flight) {
  SimOptions options = ScoringSimOptions(model);
  options.max_in_flight = max_in_flight;
  return ScoreSimulation(model, sim.Run(assignment, options));
}

WindowChoice ChooseWindow(const Model& model, const Assignment& assignment, Simulator& sim,
                          const SolveContext& context, const WindowSearchOptions& options) {
  const int32_t m = std::max(1, model.plan.microbatches);
  WindowChoice best;
  best.score = PlacementScore::Worst();
  best.max_in_flight = m;
  std::vector<uint8_t> tried(static_cast<size_t>(m) + 1, 0);
  bool first = true;
  auto try_window = [&](int32_t w) {
    w = std::clamp(w, 1, m);
    if (tried[w]) return;
    tried[w] = 1;
    PlacementScore score = options.known_score;
    if (w != options.known_window) {
      score = ScoreWithWindow(model, assignment, sim, w);
      ++best.simulations;
    }
    if (first || Better(score, w, best.score, best.max_in_flight)) {
      first = false;
      best.score = score;
      best.max_in_flight = w;
    }
  };
  const auto stop = [&] {
    return context.ShouldStop() && (!options.stop_only_once_fitting || best.score.Fits());
  };
  if (m == 1) {
    try_window(1);
    return best;
  }
  // One device (per replica): it always runs the lowest microbatch that has a ready op (api.md §2.1's
  // priority), and with nothing to transfer one of that microbatch's ops is ready until it is done, so
  // the microbatches run one after another whatever the window: every W has the same schedule, step and
  // peak, and the smallest wins the tie (a sizing question asks this of every one-device candidate).
  if (model.num_devices() == 1) {
    try_window(1);
    return best;
  }
  // No window first: with memory to spare it is (almost always) the fastest, and it is the answer when
  // the search is stopped at once.
  try_window(m);
  // Told to stop already: no window if it fits, else the model's own window (a plan model's working
  // window, whose worst case fits most of the memory: plan_model.h), else W = 1, the least memory — when
  // even that overflows no window fits (memory grows with the window) and the least overflow stands.
  if (options.stop_only_once_fitting && context.ShouldStop()) {
    if (!best.score.Fits()) try_window(model.plan.Window());
    if (!best.score.Fits()) try_window(1);
    return best;
  }
  const int64_t size = model.num_ops() + model.num_edges();
  if (static_cast<int64_t>(m) * m * size <= options.exhaustive_budget) {
    for (int32_t w = m - 1; w >= 1 && !stop(); --w) try_window(w);
    return best;
  }
  // One and two microbatches in flight per device: a pipeline of that many stages keeps every stage
  // busy with 1F1B's memory.
  const int32_t stages = model.num_devices();
  if (!stop()) try_window(stages);
  if (!stop()) try_window(2 * stages);
  if (!best.score.Fits() && !stop()) {
    // Nothing fits yet: the largest window that fits, by bisection (memory grows with the window).
    int32_t low = 0;  // largest window known to fit (0: none)
    int32_t high = std::min(m, stages);  // smallest window known not to fit
    try_window(1);
    if (best.score.Fits()) {
      low = 1;
      while (high - low > 1 && !stop()) {
        const int32_t middle = low + (high - low) / 2;
        const PlacementScore score = ScoreWithWindow(model, assignment, sim, middle);
        ++best.simulations;
        tried[middle] = 1;
        if (Better(score, middle, best.score, best.max_in_flight)) {
          best.score = score;
          best.max_in_flight = middle;
        }
        if (score.Fits()) {
          low = middle;
        } else {
          high = middle;
        }
      }
    }
  }
  // One step to each side of the best.
  const int32_t centre = best.max_in_flight;
  if (!stop()) try_window(centre - 1);
  if (!stop()) try_window(centre + 1);
  return best;
}

}  // namespace placement::engine
