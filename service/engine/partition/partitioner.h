// partitioner.h — the narrow interface every placement algorithm implements (OR-tools shaped:
// model + parameters in, assignment + outcome data out).
//
// A partitioner receives a SolveContext with a deadline, a cancellation flag and a progress callback; it
// checks ShouldStop() at loop boundaries and returns its best answer so far when told to stop (with
// PartitionResult::time_limited set). Outcomes such as "does not fit" are data, not errors: a partitioner
// returns an assignment whenever it can produce one at all (the caller simulates it and reports
// INFEASIBLE), and an error status only for broken preconditions.
//
// Determinism: the result must depend only on the model and `seed` (never on pointer values, hash-map
// iteration order or thread timing), as long as the deadline does not cut the run short.
//
// Example:
//   SolveContext context;
//   context.deadline = absl::Now() + absl::Seconds(5);
//   absl::StatusOr<PartitionResult> result = partitioner.Partition(model, context);
#ifndef PLACEMENT_SERVICE_ENGINE_PARTITION_PARTITIONER_H_
#define PLACEMENT_SERVICE_ENGINE_PARTITION_PARTITIONER_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "service/engine/model/model.h"

namespace placement::engine {

struct Progress {
  std::string_view stage;        // e.g. "slicing", "mapping", "memory", "refinement"
  double fraction = 0.0;         // of the whole algorithm, in [0, 1]
  int64_t best_makespan_ns = 0;  // best feasible so far; 0 = none yet
};

struct SolveContext {
  // Hard stop: return the best answer so far once Now() passes it.
  absl::Time deadline = absl::InfiniteFuture();
  // Set by another thread to cancel (may be null).
  const std::atomic<bool>* cancelled = nullptr;
  // Called from the solving thread, at most every few milliseconds (may be empty).
  std::function<void(const Progress&)> on_progress;
  uint64_t seed = 0;
  // Injectable clock for tests; null = absl::Now().
  std::function<absl::Time()> now;

  absl::Time Now() const { return now ? now() : absl::Now(); }
  bool Cancelled() const {
    return cancelled != nullptr && cancelled->load(std::memory_order_relaxed);
  }
  bool ShouldStop() const { return Cancelled() || Now() >= deadline; }
  // A copy whose deadline is `fraction` of the time left from now (the same when there is no deadline):
  // how a stage hands a part of its budget to one of several steps, so one cannot starve the others.
  SolveContext WithShareOfTimeLeft(double fraction) const {
    SolveContext share = *this;
    if (deadline != absl::InfiniteFuture()) {
      const absl::Time start = Now();
      share.deadline = std::min(deadline, start + (deadline - start) * fraction);
    }
    return share;
  }
  void Report(std::string_view stage, double fraction, int64_t best_makespan_ns = 0) const {
    if (on_progress) on_progress(Progress{stage, fraction, best_makespan_ns});
  }
};

struct PartitionResult {
  Assignment assignment;  // device per canonical op id
  bool time_limited = false;
  // Graph statistics some algorithms compute (pardnn): communication-to-computation ratio and degree of
  // parallelism. 0 = not computed.
  double ccr = 0.0;
  double dop = 0.0;
  // For portfolios: the member whose answer the final assignment grew from (empty = this partitioner
  // itself), and that answer's makespan before the portfolio's own search improved it.
  std::string winner;
  int64_t winner_makespan_ns = 0;
  // Training plans (api.md §2.1): the window W the algorithm chose for its assignment when the model's
  // plan leaves W open (0 = it did not choose; the caller's window search does).
  int32_t max_in_flight = 0;
  // What the algorithm's own simulation of `assignment` on this model gave (with the plan's working
  // window, api.md §2.1, whatever max_in_flight says), when it simulated it: a portfolio then need not
  // simulate the same assignment again (an unrolled step of 100K ops costs ~0.3 s a simulation).
  struct SimulatedScore {
    int64_t overflow_bytes = 0;
    int64_t makespan_ns = 0;
  };
  std::optional<SimulatedScore> simulated;
  // With max_in_flight > 0 and `simulated`: the score of `assignment` at that window, from the window
  // search that chose it (plans/window_search.h, seeded with `simulated` at the working window). A
  // portfolio then takes the choice as it is instead of searching the same assignment's windows again.
  std::optional<SimulatedScore> windowed;
};

class Partitioner {
 public:
  virtual ~Partitioner() = default;
  virtual std::string_view name() const = 0;  // api.md name, e.g. "pardnn"
  virtual std::string_view version() const = 0;  // bump whenever the output may change
  virtual std::string_view description() const = 0;
  // Whether the algorithm searches with the time it is given (its answer improves with the time limit:
  // pardnn's refinement, stages' exact search) rather than answering in a time of its own. A portfolio
  // asks only the others where no answer can fit anyway (portfolio.h).
  virtual bool searches() const { return false; }
  // Computes an assignment for `model`. Must be thread-safe (const, no shared mutable state).
  virtual absl::StatusOr<PartitionResult> Partition(const Model& model,
                                                    const SolveContext& context) const = 0;
};

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_PARTITION_PARTITIONER_H_
