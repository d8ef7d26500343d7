// portfolio.h — `auto`, the service's default algorithm: an anytime portfolio around ParDNN.
//
// On one thread (the job's worker; nothing that admission does not see), in this order:
//   1. seeds: every member's own answer, in list order (put pardnn first: it is the method the service is
//      named for and the answer there is soonest), each scored with the simulator; under a deadline each
//      member gets a share of the time left (the first member a larger one, see PortfolioOptions), so
//      one slow member cannot starve the rest;
//   2. memory: every distinct seed that overflows a device goes through ParDNN's memory stage
//      (repair/memory_repair.h), least overflow first, each with an equal share of the time left;
//   3. window (training plans whose window W the solver chooses, api.md §2.1): every distinct answer
//      gets its own fastest W that fits (plans/window_search.h) — on large unrolled steps only the best
//      one, and the next ones while none fits —; the best of them goes on;
//   4. search: the best candidate so far (the "winner") is improved by the simulator-guided
//      critical-path local search (pardnn/refinement.h), on the unrolled step with the chosen window,
//      until it converges (a local optimum that a number of random restarts in a row did not improve) or
//      the deadline comes; where memory can bind on steps of moderate size, also the best answer of
//      another member (PortfolioOptions::runner_up_searches), and the better end wins; that end is
//      polished (every unit on its critical path tried on every other device: PortfolioOptions::polish);
//      PartitionResult::max_in_flight is the answer's window.
// The answer is never worse than any member's on the same request (the search only accepts improvements
// and starts from the best of them), and a longer deadline never makes it worse: every step is
// deterministic for a model and seed, and the deadline only cuts the sequence short.
//
// Best = no constraint violation, then least overflow (sum over devices of the bytes above capacity), then
// smallest makespan, then the earlier member. PartitionResult::winner names the member whose answer the
// winning search started from; winner_makespan_ns is that answer's makespan (after the memory stage
// where it overflowed), so the search's gain is winner_makespan_ns - final makespan.
//
// Example:
//   std::unique_ptr<Partitioner> pardnn = MakePardnnPartitioner(), heft = MakeHeftPartitioner();
//   std::unique_ptr<Partitioner> portfolio = MakePortfolioPartitioner({pardnn.get(), heft.get()});
//   absl::StatusOr<PartitionResult> best = portfolio->Partition(model, context);
//   // best->winner is "pardnn" or "heft"; best->assignment is at least as good as both
#ifndef PLACEMENT_SERVICE_ENGINE_PORTFOLIO_PORTFOLIO_H_
#define PLACEMENT_SERVICE_ENGINE_PORTFOLIO_PORTFOLIO_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "service/engine/model/model.h"
#include "service/engine/partition/partitioner.h"

namespace placement::engine {

struct PortfolioOptions {
  // Under a deadline, the first member's share of the time left weighs this much against 1 for every
  // other member and 1 for the memory stage and the search together (pardnn is the one that uses time;
  // the baselines answer in milliseconds).
  double first_member_weight = 6.0;
  // The search's simulation budget: floor(search_scale * (1e4 / (V + E))^search_exponent), clamped to
  // [search_min_simulations, search_max_simulations]; it also stops at convergence or the deadline.
  double search_scale = 4000.0;
  double search_exponent = 2.0;
  int64_t search_min_simulations = 0;
  int64_t search_max_simulations = 20000;
  // Random restarts in a row without improvement that mean "converged".
  int32_t search_restarts_without_improvement = 30;
  // Off: seeds and memory stage only (for measuring what the search adds).
  bool search = true;
  // After the search: its answer polished (pardnn/refinement.h PolishAlongCriticalPath: every unit on
  // the critical path tried on every other device, the first move that improves kept, until none
  // does), within the search's budget again. The search moves path ops only where the path crosses
  // devices or waits; on the shared workloads' steps up to 20K ops the polish shortened 110 of 279
  // answers, by 0.16 % in geomean and up to 3.3 %, for 1.18x the solve time (bench/README.md).
  // Off: the search's answer as it ends.
  bool polish = true;
  // Where memory can bind (MemoryCanBind) and the unrolled step (microbatches x (ops + edges)) is at
  // most runner_up_max_unrolled: the search also starts from the best answer of each of up to this
  // many other members (fitting where the winner fits, distinct from it), with the same budget, and
  // the best end wins. Where memory binds, the seeds' order after the memory stage says little about
  // where a search from them ends: DenseNet-121 at 8 GPUs over four hosts and 0.35 x its one-device
  // peak, pardnn's 20.29 ms ends at 20.24, heft's 21.07 at 19.47. 0 = off.
  int32_t runner_up_searches = 1;
  int64_t runner_up_max_unrolled = 200'000;
  // Where memory cannot bind: a member's answer whose own lower bound (AssignedLowerBoundNs) is above
  // the best fitting step so far is not simulated (it cannot win). Off only in tests that check the
  // answer does not change.
  bool skip_by_bound = true;
  // Training plans whose window the solver chooses: every distinct answer gets its own window search
  // (at least this many) before the best of them goes on to the search ...
  int32_t window_candidates = 3;
  // ... but just the best one (and the next ones while none fits) when the unrolled step (microbatches ×
  // (ops + edges)) is larger than this: each window search costs several unrolled simulations.
  int64_t window_candidates_max_unrolled = 1'000'000;
  // Stop at the bound: an answer that fits and whose step equals the step's proven lower bound
  // (ProvenLowerBoundNs: no placement is shorter) ends the portfolio where it is found: the later members
  // do not run, and the memory stage and the search are skipped (a window the solver chooses is still
  // chosen: the smallest W at that step). No later answer could
  // beat it, so "never worse than any member" holds exactly. Off only in tests.
  bool stop_at_bound = true;
  // Near-optimal stop: on a step whose unrolled size (microbatches x (ops + edges)) is at least
  // near_optimal_min_unrolled, the same within near_optimal_gap of that bound; "never worse than any
  // member" then holds to within the gap (1 ppm of the step: 60 us of a 60 s step). Large steps only:
  // there a member takes seconds (the layered 1M-op DAG: m_etf's answer is 1.4e-8 above the bound, and
  // the members after it and the search took 60 % of auto's time), and on small ones the guarantee stays
  // exact. 0 = the exact stop only.
  double near_optimal_gap = 1e-6;
  int64_t near_optimal_min_unrolled = 100'000;
};

// api.md name "auto". `members` (and `replacement_members`) must outlive the returned partitioner; the
// version string covers every member's name and version, so a cached answer never outlives a change of a
// member. `replacement_members`: the quick algorithms a re-placement (model.has_previous_placement(),
// ../replace/) asks for fresh answers; empty = every member but the first (pardnn).
std::unique_ptr<Partitioner> MakePortfolioPartitioner(std::vector<const Partitioner*> members,
                                                      PortfolioOptions options = PortfolioOptions(),
                                                      std::vector<const Partitioner*> replacement_members = {});

// The search budget the options give for a graph of this size.
int64_t PortfolioSearchBudget(const PortfolioOptions& options, int64_t num_ops, int64_t num_edges);

namespace portfolio {

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
// The same from a member's own simulation of its answer (PartitionResult::simulated), without simulating
// again; the constraints are checked here.
PortfolioScore ScoreFromMember(const Model& model, const Assignment& assignment,
                               const PartitionResult::SimulatedScore& simulated, int32_t member_index);

}  // namespace portfolio
}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_PORTFOLIO_PORTFOLIO_H_
