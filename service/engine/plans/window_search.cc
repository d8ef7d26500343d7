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
  SimOptions options;
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
  auto try_window = [&](int32_t w) {
    w = std::clamp(w, 1, m);
    if (tried[w]) return;
    tried[w] = 1;
    const PlacementScore score = ScoreWithWindow(model, assignment, sim, w);
    ++best.simulations;
    if (best.simulations == 1 || Better(score, w, best.score, best.max_in_flight)) {
      best.score = score;
      best.max_in_flight = w;
    }
  };
  if (m == 1) {
    try_window(1);
    return best;
  }
  // No window first: with memory to spare it is (almost always) the fastest, and it is the answer when
  // the search is stopped at once.
  try_window(m);
  const int64_t unrolled = static_cast<int64_t>(m) * model.num_ops();
  if (static_cast<int64_t>(m) * unrolled <= options.exhaustive_budget) {
    for (int32_t w = m - 1; w >= 1 && !context.ShouldStop(); --w) try_window(w);
    return best;
  }
  // A spread: the small windows a pipeline of this many devices uses, then evenly over [1, M].
  for (int32_t w = 1; w <= std::min(m, model.num_devices() + 1) && !context.ShouldStop(); ++w) {
    try_window(w);
  }
  for (int32_t k = 1; k < options.sampled_windows && !context.ShouldStop(); ++k) {
    try_window(static_cast<int32_t>((static_cast<int64_t>(m) * k + options.sampled_windows - 1) /
                                    options.sampled_windows));
  }
  // Local descent around the best, in steps that halve.
  for (int32_t step = std::max(1, m / (2 * options.sampled_windows)); step >= 1 && !context.ShouldStop();
       step /= 2) {
    bool improved = true;
    while (improved && !context.ShouldStop()) {
      const int32_t centre = best.max_in_flight;
      try_window(centre - step);
      try_window(centre + step);
      improved = best.max_in_flight != centre;
    }
  }
  return best;
}

}  // namespace placement::engine
