#include "service/engine/baselines/portfolio.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "service/engine/baselines/placement_units.h"
#include "service/engine/sim/constraints.h"
#include "service/engine/sim/simulator.h"

namespace placement::engine {
namespace baselines {
namespace {

PortfolioScore Score(Simulator& simulator, const Model& model, const Assignment& assignment,
                     int32_t member_index) {
  PortfolioScore score;
  score.member_index = member_index;
  score.constraint_violations = static_cast<int32_t>(CheckConstraints(model, assignment).size());
  const SimResult& simulated = simulator.Run(assignment);
  score.makespan_ns = simulated.makespan_ns;
  for (DeviceId d = 0; d < model.num_devices(); ++d) {
    const int64_t excess = simulated.peak_memory_bytes[d] - model.capacity_bytes[d];
    if (excess > 0) score.overflow_bytes = SaturatingAdd(score.overflow_bytes, excess);
  }
  score.feasible = score.constraint_violations == 0 && score.overflow_bytes == 0;
  return score;
}

}  // namespace

bool BetterScore(const PortfolioScore& a, const PortfolioScore& b) {
  // Feasible answers have no violations and no overflow, so one lexicographic key orders everything.
  return std::tie(a.constraint_violations, a.overflow_bytes, a.makespan_ns, a.member_index) <
         std::tie(b.constraint_violations, b.overflow_bytes, b.makespan_ns, b.member_index);
}

PortfolioScore ScoreForPortfolio(const Model& model, const Assignment& assignment, int32_t member_index) {
  Simulator simulator(model);
  return Score(simulator, model, assignment, member_index);
}

}  // namespace baselines

namespace {

using baselines::PortfolioScore;

// A member's answer must be a complete, in-range assignment before the simulator may look at it.
absl::Status CheckAssignment(const Model& model, const Assignment& assignment, std::string_view member) {
  if (static_cast<int32_t>(assignment.size()) != model.num_ops()) {
    return absl::InternalError(absl::StrCat("auto: member \"", std::string(member), "\" returned ", assignment.size(),
                                            " devices for ", model.num_ops(), " ops"));
  }
  for (DeviceId d : assignment) {
    if (d < 0 || d >= model.num_devices()) {
      return absl::InternalError(
          absl::StrCat("auto: member \"", std::string(member), "\" returned device ", d, " out of range"));
    }
  }
  return absl::OkStatus();
}

class PortfolioPartitioner final : public Partitioner {
 public:
  PortfolioPartitioner(std::vector<const Partitioner*> members, PortfolioOptions options)
      : members_(std::move(members)), options_(options) {
    version_ = "1";
    for (const Partitioner* member : members_) {
      absl::StrAppend(&version_, member == members_.front() ? ":" : ",", std::string(member->name()), "@",
                      std::string(member->version()));
    }
  }

  std::string_view name() const override { return "auto"; }
  std::string_view version() const override { return version_; }
  std::string_view description() const override {
    return "Portfolio: runs pardnn and the baselines within the time limit and returns the best feasible "
           "answer (smallest simulated makespan)";
  }

  absl::StatusOr<PartitionResult> Partition(const Model& model,
                                            const SolveContext& context) const override {
    const int32_t count = static_cast<int32_t>(members_.size());
    if (count == 0) return absl::FailedPreconditionError("auto: the portfolio has no members");

    std::vector<std::optional<absl::StatusOr<PartitionResult>>> results(count);
    std::vector<PortfolioScore> scores(count);
    std::vector<uint8_t> skipped(count, 0);
    std::atomic<int32_t> next{0};
    std::atomic<int64_t> best_feasible_makespan{0};

    auto work = [&](bool calling_thread) {
      Simulator simulator(model);
      for (;;) {
        const int32_t i = next.fetch_add(1);
        if (i >= count) return;
        const Partitioner& member = *members_[i];
        if (i > 0 && context.ShouldStop()) {
          skipped[i] = 1;
          continue;
        }
        SolveContext member_context;
        member_context.deadline = context.deadline;
        member_context.cancelled = context.cancelled;
        member_context.seed = context.seed;
        member_context.now = context.now;
        if (calling_thread && context.on_progress) {
          member_context.on_progress = [&, i](const Progress& progress) {
            const int64_t best = best_feasible_makespan.load();
            context.Report(members_[i]->name(), (i + progress.fraction) / count,
                           best != 0 ? best : progress.best_makespan_ns);
          };
        }
        absl::StatusOr<PartitionResult> result = member.Partition(model, member_context);
        if (result.ok()) {
          absl::Status valid = CheckAssignment(model, result->assignment, member.name());
          if (!valid.ok()) result = valid;
        }
        if (result.ok()) {
          scores[i] = baselines::Score(simulator, model, result->assignment, i);
          if (scores[i].feasible) {
            int64_t seen = best_feasible_makespan.load();
            while ((seen == 0 || scores[i].makespan_ns < seen) &&
                   !best_feasible_makespan.compare_exchange_weak(seen, scores[i].makespan_ns)) {
            }
          }
          if (calling_thread) context.Report("auto", static_cast<double>(i + 1) / count, best_feasible_makespan.load());
        }
        results[i] = std::move(result);
      }
    };

    const int32_t helpers = std::max(0, std::min(options_.threads, count) - 1);
    std::vector<std::thread> threads;
    threads.reserve(helpers);
    for (int32_t t = 0; t < helpers; ++t) threads.emplace_back(work, false);
    work(true);
    for (std::thread& thread : threads) thread.join();

    int32_t best = -1;
    bool any_time_limited = false;
    for (int32_t i = 0; i < count; ++i) {
      if (skipped[i]) any_time_limited = true;
      if (!results[i].has_value() || !results[i]->ok()) continue;
      if ((*results[i])->time_limited) any_time_limited = true;
      if (best == -1 || baselines::BetterScore(scores[i], scores[best])) best = i;
    }
    if (best == -1) {
      for (int32_t i = 0; i < count; ++i) {
        if (results[i].has_value()) return results[i]->status();
      }
      return absl::DeadlineExceededError("auto: no member ran before the deadline");
    }
    PartitionResult chosen = std::move(**results[best]);
    chosen.winner = std::string(members_[best]->name());
    chosen.time_limited = chosen.time_limited || any_time_limited;
    return chosen;
  }

 private:
  std::vector<const Partitioner*> members_;
  PortfolioOptions options_;
  std::string version_;
};

}  // namespace

std::unique_ptr<Partitioner> MakePortfolioPartitioner(std::vector<const Partitioner*> members,
                                                      PortfolioOptions options) {
  return std::make_unique<PortfolioPartitioner>(std::move(members), options);
}

}  // namespace placement::engine
