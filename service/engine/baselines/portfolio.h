// portfolio.h — `auto`: runs several algorithms on the same model within one deadline, scores every answer
// with the simulator (the same judge as everywhere else) and returns the best one, naming the winner in
// PartitionResult::winner.
//
// Best = FEASIBLE first (memory fits and every pin, kind and colocation holds), then the smallest
// makespan, then the earlier member in the list; among infeasible answers the one that overflows least
// (sum over devices of the bytes above capacity, constraint violations counting as worse than any
// overflow), then makespan, then member order. The choice never depends on which member finished first,
// so the answer is deterministic whenever the deadline cuts nothing short.
//
// Members run in list order (put pardnn first: it is the default and gets the head start) on up to
// `threads` threads: the calling thread plus helpers, each taking the next member not yet started. A
// member is not started once the deadline has passed, except the first, so there is always an answer.
// Only members run on the calling thread report progress (SolveContext::on_progress is called from the
// solving thread only).
//
// Example:
//   std::unique_ptr<Partitioner> pardnn = ..., heft = MakeHeftPartitioner(), ...;
//   std::unique_ptr<Partitioner> portfolio = MakePortfolioPartitioner({pardnn.get(), heft.get()});
//   absl::StatusOr<PartitionResult> best = portfolio->Partition(model, context);
//   // best->winner == "pardnn" or "heft"
#ifndef PLACEMENT_SERVICE_ENGINE_BASELINES_PORTFOLIO_H_
#define PLACEMENT_SERVICE_ENGINE_BASELINES_PORTFOLIO_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "service/engine/model/model.h"
#include "service/engine/partition/partitioner.h"

namespace placement::engine {

struct PortfolioOptions {
  // Threads running members at once, the calling thread included (>= 1).
  int32_t threads = 2;
};

// api.md name "auto". `members` must outlive the returned partitioner.
std::unique_ptr<Partitioner> MakePortfolioPartitioner(std::vector<const Partitioner*> members,
                                                      PortfolioOptions options = PortfolioOptions());

namespace baselines {

// How an answer ranks in the portfolio (exposed for tests and for the compare tool). Smaller is better.
struct PortfolioScore {
  bool feasible = false;
  int32_t constraint_violations = 0;
  int64_t overflow_bytes = 0;  // sum over devices of max(0, peak - capacity)
  int64_t makespan_ns = 0;
  int32_t member_index = 0;
};
bool BetterScore(const PortfolioScore& a, const PortfolioScore& b);

// Scores `assignment` with the simulator and the constraint checker.
PortfolioScore ScoreForPortfolio(const Model& model, const Assignment& assignment, int32_t member_index);

}  // namespace baselines
}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_BASELINES_PORTFOLIO_H_
