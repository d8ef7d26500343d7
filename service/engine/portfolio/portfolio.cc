#include "service/engine/portfolio/portfolio.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "service/engine/pardnn/refinement.h"
#include "service/engine/repair/memory_repair.h"
#include "service/engine/sim/constraints.h"
#include "service/engine/sim/placement_score.h"
#include "service/engine/sim/simulator.h"

namespace placement::engine {
namespace portfolio {
namespace {

PortfolioScore Score(Simulator& simulator, const Model& model, const Assignment& assignment,
                     int32_t member_index) {
  PortfolioScore score;
  score.member_index = member_index;
  score.constraint_violations = static_cast<int32_t>(CheckConstraints(model, assignment).size());
  const PlacementScore simulated = ScoreSimulation(model, simulator.Run(assignment));
  score.overflow_bytes = simulated.overflow_bytes;
  score.makespan_ns = simulated.makespan_ns;
  score.feasible = score.constraint_violations == 0 && score.overflow_bytes == 0;
  return score;
}

}  // namespace

bool BetterScore(const PortfolioScore& a, const PortfolioScore& b) {
  // Feasible answers have no violations and no overflow, so one lexicographic key orders everything:
  // violations, then the simulated score every algorithm uses, then the earlier member.
  if (a.constraint_violations != b.constraint_violations) {
    return a.constraint_violations < b.constraint_violations;
  }
  const PlacementScore as{a.overflow_bytes, a.makespan_ns}, bs{b.overflow_bytes, b.makespan_ns};
  if (as.BetterThan(bs)) return true;
  if (bs.BetterThan(as)) return false;
  return a.member_index < b.member_index;
}

PortfolioScore ScoreForPortfolio(const Model& model, const Assignment& assignment, int32_t member_index) {
  Simulator simulator(model);
  return Score(simulator, model, assignment, member_index);
}

}  // namespace portfolio

int64_t PortfolioSearchBudget(const PortfolioOptions& options, int64_t num_ops, int64_t num_edges) {
  return pardnn::SimulationBudget(options.search_scale, options.search_exponent, num_ops + num_edges,
                                  options.search_min_simulations, options.search_max_simulations);
}

namespace {

using portfolio::PortfolioScore;

// One answer on the table: a member's own, or the same after the memory stage.
struct Candidate {
  Assignment assignment;
  PortfolioScore score;
};

class PortfolioPartitioner final : public Partitioner {
 public:
  PortfolioPartitioner(std::vector<const Partitioner*> members, PortfolioOptions options)
      : members_(std::move(members)), options_(options) {
    version_ = "2";
    for (const Partitioner* member : members_) {
      absl::StrAppend(&version_, member == members_.front() ? ":" : ",", std::string(member->name()), "@",
                      std::string(member->version()));
    }
  }

  std::string_view name() const override { return "auto"; }
  std::string_view version() const override { return version_; }
  std::string_view description() const override {
    return "Anytime portfolio (the default): pardnn first, every baseline's answer as a further seed, "
           "ParDNN's memory stage on those that overflow, then the simulator-guided critical-path search "
           "on the best until it converges or the time limit ends; provenance names the winning seed";
  }

  absl::StatusOr<PartitionResult> Partition(const Model& model,
                                            const SolveContext& context) const override;

 private:
  std::vector<const Partitioner*> members_;
  PortfolioOptions options_;
  std::string version_;
};

absl::StatusOr<PartitionResult> PortfolioPartitioner::Partition(const Model& model,
                                                                const SolveContext& context) const {
  const int32_t count = static_cast<int32_t>(members_.size());
  if (count == 0) return absl::FailedPreconditionError("auto: the portfolio has no members");
  PartitionResult out;
  Simulator simulator(model);

  // Progress: seeds take [0, 0.5), the memory stage [0.5, 0.6), the search [0.6, 1].
  int64_t best_feasible = 0;
  auto note_feasible = [&](const PortfolioScore& s) {
    if (s.feasible && (best_feasible == 0 || s.makespan_ns < best_feasible)) best_feasible = s.makespan_ns;
  };

  // 1. Seeds, in member order. The first member always runs, so there is always an answer.
  std::vector<std::optional<Candidate>> seeds(count);
  absl::Status first_error;
  for (int32_t i = 0; i < count; ++i) {
    if (i > 0 && context.ShouldStop()) {
      out.time_limited = true;
      break;
    }
    const Partitioner& member = *members_[i];
    // This member's share of the time left: the first member (pardnn) weighs first_member_weight, every
    // other member 1, and one more share is kept for the memory stage and the search. A slow member
    // cannot starve the others, and unused time flows on to the next.
    const double weight = i == 0 ? options_.first_member_weight : 1.0;
    SolveContext member_context =
        context.WithShareOfTimeLeft(weight / (weight + static_cast<double>(count - i - 1) + 1.0));
    member_context.on_progress = nullptr;
    if (context.on_progress) {
      member_context.on_progress = [&, i](const Progress& progress) {
        context.Report(members_[i]->name(), 0.5 * (i + progress.fraction) / count,
                       best_feasible != 0 ? best_feasible : progress.best_makespan_ns);
      };
    }
    absl::StatusOr<PartitionResult> result = member.Partition(model, member_context);
    if (result.ok()) {
      absl::Status valid = CheckAssignmentComplete(model, result->assignment, member.name());
      if (!valid.ok()) result = valid;
    }
    if (!result.ok()) {
      if (first_error.ok()) first_error = result.status();
      continue;
    }
    out.time_limited |= result->time_limited;
    if (i == 0) {
      out.ccr = result->ccr;
      out.dop = result->dop;
    }
    Candidate c{std::move(result->assignment), PortfolioScore()};
    c.score = portfolio::Score(simulator, model, c.assignment, i);
    note_feasible(c.score);
    context.Report("auto", 0.5 * (i + 1) / count, best_feasible);
    seeds[i] = std::move(c);
  }

  std::optional<Candidate> best;
  auto consider = [&](const Candidate& c) {
    if (!best || portfolio::BetterScore(c.score, best->score)) best = c;
  };
  for (const std::optional<Candidate>& seed : seeds) {
    if (seed) consider(*seed);
  }
  if (!best) {
    if (!first_error.ok()) return first_error;
    return absl::DeadlineExceededError("auto: no member ran before the deadline");
  }

  // 2. The memory stage for every distinct seed that overflows, least overflow first (the likeliest to
  // fit soon); each gets an equal share of the time left, so one slow repair cannot starve the rest.
  std::vector<int32_t> to_repair;
  for (int32_t i = 0; i < count; ++i) {
    if (!seeds[i] || seeds[i]->score.overflow_bytes == 0 || seeds[i]->score.constraint_violations != 0) {
      continue;
    }
    bool duplicate = false;
    for (const int32_t j : to_repair) duplicate |= seeds[j]->assignment == seeds[i]->assignment;
    if (!duplicate) to_repair.push_back(i);
  }
  std::stable_sort(to_repair.begin(), to_repair.end(), [&](int32_t a, int32_t b) {
    return seeds[a]->score.overflow_bytes < seeds[b]->score.overflow_bytes;
  });
  RepairOptions repair;
  repair.progress_from = repair.progress_to = -1.0;  // silent; the portfolio reports
  for (size_t k = 0; k < to_repair.size(); ++k) {
    if (context.ShouldStop()) {
      out.time_limited = true;
      break;
    }
    const int32_t i = to_repair[k];
    SolveContext slice = context.WithShareOfTimeLeft(1.0 / static_cast<double>(to_repair.size() - k));
    slice.on_progress = nullptr;
    Candidate repaired{seeds[i]->assignment, PortfolioScore()};
    const RepairOutcome outcome = RepairMemory(model, slice, repair, repaired.assignment);
    out.time_limited |= outcome.time_limited;
    repaired.score = portfolio::Score(simulator, model, repaired.assignment, i);
    note_feasible(repaired.score);
    consider(repaired);
    context.Report("memory", 0.5 + 0.1 * (k + 1) / to_repair.size(), best_feasible);
  }

  // 3. The search, from the best answer on the table.
  const int32_t winner = best->score.member_index;
  out.winner = std::string(members_[winner]->name());
  out.winner_makespan_ns = best->score.makespan_ns;
  Assignment assignment = std::move(best->assignment);
  if (options_.search && model.num_devices() > 1 && best->score.constraint_violations == 0 &&
      !context.ShouldStop()) {
    pardnn::RefinementOptions search;
    search.max_simulations = PortfolioSearchBudget(options_, model.num_ops(), model.num_edges());
    search.max_restarts_without_improvement = options_.search_restarts_without_improvement;
    search.progress_stage = "search";
    search.progress_from = 0.6;
    search.progress_to = 1.0;
    const pardnn::RefinementResult r =
        pardnn::RefineAlongCriticalPath(model, search, context, simulator, assignment);
    out.time_limited |= r.time_limited;
  }
  if (context.ShouldStop()) out.time_limited = true;
  out.assignment = std::move(assignment);
  context.Report("done", 1.0);
  return out;
}

}  // namespace

std::unique_ptr<Partitioner> MakePortfolioPartitioner(std::vector<const Partitioner*> members,
                                                      PortfolioOptions options) {
  return std::make_unique<PortfolioPartitioner>(std::move(members), options);
}

}  // namespace placement::engine
