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
#include "service/engine/plans/window_search.h"
#include "service/engine/replace/replacement.h"
#include "service/engine/repair/repair_each.h"
#include "service/engine/repair/memory_repair.h"
#include "service/engine/sim/constraints.h"
#include "service/engine/sim/placement_score.h"
#include "service/engine/sim/simulator.h"

namespace placement::engine {
namespace portfolio {
namespace {

PortfolioScore Score(Simulator& simulator, const Model& model, const Assignment& assignment,
                     int32_t member_index) {
  const PlacementScore simulated = ScoreSimulation(model, simulator.Run(assignment, ScoringSimOptions(model)));
  return ScoreFromMember(model, assignment, {simulated.overflow_bytes, simulated.makespan_ns}, member_index);
}

}  // namespace

PortfolioScore ScoreFromMember(const Model& model, const Assignment& assignment,
                               const PartitionResult::SimulatedScore& simulated, int32_t member_index) {
  PortfolioScore score;
  score.member_index = member_index;
  score.constraint_violations = static_cast<int32_t>(CheckConstraints(model, assignment).size());
  score.overflow_bytes = simulated.overflow_bytes;
  score.makespan_ns = simulated.makespan_ns;
  score.feasible = score.constraint_violations == 0 && score.overflow_bytes == 0;
  return score;
}

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
  // A member's own answer whose member chose its window by a window search (PartitionResult::windowed):
  // that choice, taken as it is by the window stage.
  std::optional<WindowChoice> member_window;
  // The answer's own lower bound (AssignedLowerBoundNs) once computed, so that it is computed once; -1 = not yet.
  int64_t own_bound_ns = -1;
};

class PortfolioPartitioner final : public Partitioner {
 public:
  PortfolioPartitioner(std::vector<const Partitioner*> members, PortfolioOptions options,
                       std::vector<const Partitioner*> replacement_members)
      : members_(std::move(members)), options_(options), replacement_members_(std::move(replacement_members)) {
    if (replacement_members_.empty() && !members_.empty()) {
      // Every member but the first (pardnn, the slow one) offers a fresh answer to compare with.
      replacement_members_.assign(members_.begin() + 1, members_.end());
    }
    version_ = "7";
    for (const Partitioner* member : members_) {
      absl::StrAppend(&version_, member == members_.front() ? ":" : ",", std::string(member->name()), "@",
                      std::string(member->version()));
    }
    absl::StrAppend(&version_, ";replace@4");
    for (const Partitioner* member : replacement_members_) {
      absl::StrAppend(&version_, member == replacement_members_.front() ? ":" : ",", std::string(member->name()),
                      "@", std::string(member->version()));
    }
  }

  std::string_view name() const override { return "auto"; }
  bool searches() const override { return true; }
  std::string_view version() const override { return version_; }
  std::string_view description() const override {
    return "Anytime portfolio (the default): pardnn first, every baseline's answer as a further seed, "
           "ParDNN's memory stage on those that overflow, then the simulator-guided critical-path search "
           "on the best (where memory binds, also on a runner-up) until it converges or the time limit "
           "ends; provenance names the winning seed";
  }

  absl::StatusOr<PartitionResult> Partition(const Model& model,
                                            const SolveContext& context) const override;

 private:
  std::vector<const Partitioner*> members_;
  PortfolioOptions options_;
  // The quick members a re-placement asks for fresh answers (replacement.h).
  std::vector<const Partitioner*> replacement_members_;
  std::string version_;
};

// One run of the portfolio on one model, in its stages (portfolio.h): seeds, memory, window (training
// plans whose window the solver chooses), search.
class PortfolioRun {
 public:
  PortfolioRun(const std::vector<const Partitioner*>& members, const PortfolioOptions& options,
               const Model& model, const SolveContext& context)
      : members_(members), options_(options), model_(model), context_(context), simulator_(model),
        seeds_(members.size()) {}

  absl::StatusOr<PartitionResult> Run() {
    if (members_.empty()) return absl::FailedPreconditionError("auto: the portfolio has no members");
    if (model_.num_devices() == 1) return OneDevice();
    if (MemoryCannotFit(model_)) {
      std::optional<PartitionResult> quick = NothingFits();
      if (quick) return *std::move(quick);
    }
    if (options_.stop_at_bound) {
      const int64_t bound = ProvenLowerBoundNs(model_);
      const double gap = UnrolledSize() >= options_.near_optimal_min_unrolled ? options_.near_optimal_gap : 0.0;
      stop_at_ns_ = bound + static_cast<int64_t>(static_cast<double>(bound) * gap);
    }
    const absl::Status seeded = RunSeeds();
    if (!seeded.ok()) return seeded;
    // At the bound (PortfolioOptions::stop_at_bound) no step is shorter: no memory stage, no search. The
    // window, where the solver chooses it, is still chosen: the smallest W at the best step holds least.
    if (!AtTheBound()) RepairOverflowingSeeds();
    ChooseTheWindow();
    Search();
    if (context_.ShouldStop()) out_.time_limited = true;
    context_.Report("done", 1.0);
    return std::move(out_);
  }

 private:
  // One device has one placement, every op on it: what every member would answer, without running
  // them (a sizing question asks this of every candidate with one device per replica). Its window, when
  // the solver chooses it, is chosen here as for any answer.
  absl::StatusOr<PartitionResult> OneDevice() {
    out_.assignment.assign(model_.num_ops(), 0);
    out_.winner = std::string(members_.front()->name());
    for (const Partitioner* member : members_) {
      if (member->name() == "single_device") out_.winner = "single_device";
    }
    if (model_.solver_chooses_window) {
      const WindowChoice choice = ChooseWindow(model_, out_.assignment, simulator_, context_);
      out_.max_in_flight = choice.max_in_flight;
      out_.winner_makespan_ns = choice.score.makespan_ns;
    } else {
      out_.winner_makespan_ns = portfolio::Score(simulator_, model_, out_.assignment, 0).makespan_ns;
    }
    context_.Report("done", 1.0);
    return std::move(out_);
  }

  // No placement fits (placement_score.h's MemoryCannotFit: the persistent bytes exceed the devices'
  // memory together, or one op's own bytes the largest device): every answer is INFEASIBLE whatever
  // the later stages do, so the portfolio answers at once rather than spend its time limit on a step
  // that cannot run (a sizing question asks this of every count too small for the model). The answer:
  // of the members that take no time of their own (not those that search: Partitioner::searches),
  // the one with the fewest constraint violations, then the least persistent bytes above capacity
  // (counted, not simulated), then member order; the window that holds least, W = 1, when the solver
  // chooses it. One simulation, for its step. None when no such member answers (then the stages run as
  // ever, and report the members' errors).
  std::optional<PartitionResult> NothingFits() {
    std::optional<Candidate> chosen;
    for (int32_t i = 0; i < static_cast<int32_t>(members_.size()); ++i) {
      if (members_[i]->searches()) continue;
      absl::StatusOr<PartitionResult> result = members_[i]->Partition(model_, context_);
      if (!result.ok() || !CheckAssignmentComplete(model_, result->assignment, members_[i]->name()).ok()) {
        continue;
      }
      const PortfolioScore score = portfolio::ScoreFromMember(
          model_, result->assignment, {PersistentBytesAboveCapacity(model_, result->assignment), 0}, i);
      Candidate c{std::move(result->assignment), score, std::nullopt};
      if (!chosen || portfolio::BetterScore(c.score, chosen->score)) chosen = std::move(c);
    }
    if (!chosen) return std::nullopt;
    out_.winner = std::string(members_[chosen->score.member_index]->name());
    out_.assignment = std::move(chosen->assignment);
    SimOptions scoring = ScoringSimOptions(model_);
    if (model_.solver_chooses_window) {
      out_.max_in_flight = 1;
      scoring.max_in_flight = 1;
    }
    out_.winner_makespan_ns = ScoreSimulation(model_, simulator_.Run(out_.assignment, scoring)).makespan_ns;
    context_.Report("done", 1.0);
    return std::move(out_);
  }

  void NoteFeasible(const PortfolioScore& s) {
    if (s.feasible && (best_feasible_ == 0 || s.makespan_ns < best_feasible_)) {
      best_feasible_ = s.makespan_ns;
    }
  }
  void Consider(const Candidate& c) {
    if (!best_ || portfolio::BetterScore(c.score, best_->score)) best_ = c;
  }

  // 1. Seeds, in member order; progress [0, 0.5). The first member always runs, so there is always an
  // answer. Each member gets a share of the time left: the first (pardnn) weighs first_member_weight,
  // every other member 1, and one more share is kept for the later stages; a slow member cannot starve
  // the others, and unused time flows on to the next.
  absl::Status RunSeeds() {
    const int32_t count = static_cast<int32_t>(members_.size());
    absl::Status first_error;
    std::vector<int32_t> unscored;  // members whose answer the portfolio simulates itself
    for (int32_t i = 0; i < count; ++i) {
      if (i > 0 && context_.ShouldStop()) {
        out_.time_limited = true;
        break;
      }
      const Partitioner& member = *members_[i];
      const double weight = i == 0 ? options_.first_member_weight : 1.0;
      SolveContext member_context =
          context_.WithShareOfTimeLeft(weight / (weight + static_cast<double>(count - i - 1) + 1.0));
      member_context.on_progress = nullptr;
      if (context_.on_progress) {
        member_context.on_progress = [this, i, count](const Progress& progress) {
          context_.Report(members_[i]->name(), 0.5 * (i + progress.fraction) / count,
                          best_feasible_ != 0 ? best_feasible_ : progress.best_makespan_ns);
        };
      }
      absl::StatusOr<PartitionResult> result = member.Partition(model_, member_context);
      if (result.ok()) {
        absl::Status valid = CheckAssignmentComplete(model_, result->assignment, member.name());
        if (!valid.ok()) result = valid;
      }
      if (!result.ok()) {
        if (first_error.ok()) first_error = result.status();
        continue;
      }
      out_.time_limited |= result->time_limited;
      if (i == 0) {
        out_.ccr = result->ccr;
        out_.dop = result->dop;
      }
      Candidate c{std::move(result->assignment), PortfolioScore(), std::nullopt};
      bool scored = false;
      if (result->simulated) {
        c.score = portfolio::ScoreFromMember(model_, c.assignment, *result->simulated, i);
        NoteFeasible(c.score);
        scored = true;
        if (result->max_in_flight > 0 && result->windowed) {
          c.member_window = WindowChoice{result->max_in_flight,
                                         PlacementScore{result->windowed->overflow_bytes,
                                                        result->windowed->makespan_ns},
                                         0};
        }
      } else if (stop_at_ns_ >= 0) {
        c.own_bound_ns = AssignedLowerBoundNs(model_, c.assignment, &bound_scratch_);
        if (c.own_bound_ns <= stop_at_ns_) {
          // It may be at the bound: scored now, not after every member (an answer whose own bound is
          // this low would be scored then anyway: no fitting step so far is below it).
          c.score = portfolio::Score(simulator_, model_, c.assignment, i);
          NoteFeasible(c.score);
          scored = true;
        }
      }
      if (!scored) unscored.push_back(i);
      const bool ends_the_run = scored && EndsTheRun(c.score);
      context_.Report("auto", 0.5 * (i + 1) / count, best_feasible_);
      seeds_[i] = std::move(c);
      if (ends_the_run) break;  // PortfolioOptions::stop_at_bound: the later members cannot gain
    }
    ScoreTheOthers(unscored);
    for (const std::optional<Candidate>& seed : seeds_) {
      if (seed) Consider(*seed);
    }
    if (best_) return absl::OkStatus();
    if (!first_error.ok()) return first_error;
    return absl::DeadlineExceededError("auto: no member ran before the deadline");
  }

  // The answers of members that did not simulate them, scored once every member has run, in member
  // order. Where memory cannot bind, an answer whose own lower bound (AssignedLowerBoundNs) is above the
  // best fitting step so far cannot win with any window, needs no memory stage, and is not simulated:
  // it leaves the table (on a 100K-op step at M = 16 a simulation costs ~0.3 s; single_device, heft and
  // m_etf usually end here). Where memory can bind, every answer is scored: the memory stage may
  // turn one that overflows into the winner.
  void ScoreTheOthers(const std::vector<int32_t>& unscored) {
    const bool may_skip = options_.skip_by_bound && !MemoryCanBind(model_);
    for (const int32_t i : unscored) {
      Candidate& c = *seeds_[i];
      // best_feasible_: the best fitting step among the answers scored so far (NoteFeasible).
      if (may_skip && best_feasible_ != 0) {
        if (c.own_bound_ns < 0) c.own_bound_ns = AssignedLowerBoundNs(model_, c.assignment, &bound_scratch_);
        if (c.own_bound_ns > best_feasible_) {
          seeds_[i].reset();
          continue;
        }
      }
      c.score = portfolio::Score(simulator_, model_, c.assignment, i);
      NoteFeasible(c.score);
    }
  }

  // 2. The memory stage for every distinct seed that overflows (repair_each.h); progress [0.5, 0.6).
  void RepairOverflowingSeeds() {
    std::vector<ScoredCandidate> table;
    std::vector<int32_t> member_of;
    for (int32_t i = 0; i < static_cast<int32_t>(seeds_.size()); ++i) {
      if (!seeds_[i] || seeds_[i]->score.constraint_violations != 0) continue;
      table.push_back({&seeds_[i]->assignment,
                       PlacementScore{seeds_[i]->score.overflow_bytes, seeds_[i]->score.makespan_ns}});
      member_of.push_back(i);
    }
    RepairEachOptions each;
    each.repair.progress_from = each.repair.progress_to = -1.0;  // silent; the portfolio reports
    const RepairEachResult repaired = RepairEachOverflowing(model_, context_, each, table);
    out_.time_limited |= repaired.time_limited;
    for (size_t k = 0; k < repaired.candidates.size(); ++k) {
      const RepairedCandidate& r = repaired.candidates[k];
      Candidate c{r.assignment, PortfolioScore(), std::nullopt};
      c.score = portfolio::Score(simulator_, model_, c.assignment, member_of[r.index]);
      NoteFeasible(c.score);
      Consider(c);
      repaired_.push_back(std::move(c));
      context_.Report("memory", 0.5 + 0.1 * static_cast<double>(k + 1) / repaired.candidates.size(),
                      best_feasible_);
    }
  }

  // 3. Training plans whose window W the solver chooses (api.md §2.1): the seeds were judged with the
  // working window; the best few distinct answers now get their own fastest W that fits, and the best
  // of those goes on to the search with it.
  void ChooseTheWindow() {
    window_ = model_.plan.Window();
    if (!model_.solver_chooses_window || context_.ShouldStop()) return;
    std::vector<const Candidate*> ranked;
    for (const std::optional<Candidate>& seed : seeds_) {
      if (seed && seed->score.constraint_violations == 0) ranked.push_back(&*seed);
    }
    if (best_->score.constraint_violations == 0) ranked.push_back(&*best_);
    std::stable_sort(ranked.begin(), ranked.end(), [](const Candidate* a, const Candidate* b) {
      return portfolio::BetterScore(a->score, b->score);
    });
    // Each window search costs several unrolled simulations: on large steps only the best answer gets one.
    const int64_t unrolled = UnrolledSize();
    // Every distinct answer on small steps: a member run alone gets its own window search, so auto,
    // never worse than a member, must look at each answer's best window too.
    const int32_t wanted = unrolled > options_.window_candidates_max_unrolled
                               ? 1
                               : std::max<int32_t>(options_.window_candidates,
                                                   static_cast<int32_t>(seeds_.size()) + 1);
    std::vector<const Candidate*> distinct;
    for (const Candidate* c : ranked) {
      bool seen = false;
      for (const Candidate* d : distinct) seen |= d->assignment == c->assignment;
      if (!seen) distinct.push_back(c);
    }
    // The best `wanted` answers, and further ones in rank order while none fits yet: an answer that
    // overflows with the working window may fit with a smaller one (a member run alone would find it, and
    // auto is never worse than a member).
    std::optional<Candidate> chosen;
    for (size_t k = 0; k < distinct.size() && !context_.ShouldStop(); ++k) {
      if (static_cast<int32_t>(k) >= wanted && chosen && chosen->score.feasible) break;
      const size_t left = std::max<size_t>(1, std::min<size_t>(distinct.size(), wanted) - std::min<size_t>(k, wanted));
      WindowChoice choice;
      if (distinct[k]->member_window) {
        // The member searched this very assignment's windows the same way: its choice stands.
        choice = *distinct[k]->member_window;
      } else {
        const SolveContext share = context_.WithShareOfTimeLeft(0.5 / static_cast<double>(left));
        WindowSearchOptions search;
        search.known_window = model_.plan.Window();  // every candidate was scored with it
        search.known_score =
            PlacementScore{distinct[k]->score.overflow_bytes, distinct[k]->score.makespan_ns};
        choice = ChooseWindow(model_, distinct[k]->assignment, simulator_, share, search);
      }
      Candidate c{distinct[k]->assignment, distinct[k]->score, std::nullopt};
      c.score.overflow_bytes = choice.score.overflow_bytes;
      c.score.makespan_ns = choice.score.makespan_ns;
      c.score.feasible = c.score.constraint_violations == 0 && c.score.overflow_bytes == 0;
      if (!chosen || portfolio::BetterScore(c.score, chosen->score)) {
        chosen = std::move(c);
        window_ = choice.max_in_flight;
      }
    }
    if (chosen) best_ = std::move(chosen);
    out_.max_in_flight = window_;
  }

  // 4. The search, from the best answer on the table (with its window), on the unrolled simulation, and
  // where memory can bind on moderate steps also from other members' best answers
  // (PortfolioOptions::runner_up_searches); the best end wins. Progress [0.6, 1]. A training plan's
  // budget counts the unrolled step.
  void Search() {
    const int32_t winner = best_->score.member_index;
    out_.winner = std::string(members_[winner]->name());
    out_.winner_makespan_ns = best_->score.makespan_ns;
    Assignment assignment = std::move(best_->assignment);
    if (options_.search && model_.num_devices() > 1 && best_->score.constraint_violations == 0 &&
        !AtTheBound() && !context_.ShouldStop()) {
      const std::vector<const Candidate*> runners_up = RunnersUp(assignment);
      // The search judges with the chosen window: a copy of the model that carries it (the memory stage
      // inside the search simulates the model it is given).
      std::optional<Model> windowed;
      std::optional<Simulator> windowed_simulator;
      if (window_ != model_.plan.Window()) {
        windowed.emplace(model_);
        windowed->plan.max_in_flight = window_;
        simulator_.ReleaseScratch();  // the windowed simulator takes its buffers
        windowed_simulator.emplace(*windowed);
      }
      const Model& search_model = windowed ? *windowed : model_;
      Simulator& search_simulator = windowed_simulator ? *windowed_simulator : simulator_;
      const int64_t copies = std::max(1, model_.plan.microbatches);
      pardnn::RefinementOptions search;
      search.max_simulations =
          PortfolioSearchBudget(options_, model_.num_ops() * copies, model_.num_edges() * copies);
      search.max_restarts_without_improvement = options_.search_restarts_without_improvement;
      search.memory_can_bind = MemoryCanBind(search_model);
      search.progress_stage = "search";
      search.progress_from = 0.6;
      search.progress_to = runners_up.empty() ? 1.0 : 0.8;
      pardnn::RefinementResult r = pardnn::RefineAlongCriticalPath(
          search_model, search, context_, search_simulator, assignment);
      out_.time_limited |= r.time_limited;
      bool moved = r.moves > 0;
      for (size_t k = 0; k < runners_up.size() && !context_.ShouldStop(); ++k) {
        Assignment other = runners_up[k]->assignment;
        search.progress_from = search.progress_to;
        search.progress_to = 0.8 + 0.2 * static_cast<double>(k + 1) / static_cast<double>(runners_up.size());
        const pardnn::RefinementResult s = pardnn::RefineAlongCriticalPath(
            search_model, search, context_, search_simulator, other);
        out_.time_limited |= s.time_limited;
        if (PlacementScore{s.overflow_bytes, s.makespan_ns}.BetterThan(
                PlacementScore{r.overflow_bytes, r.makespan_ns})) {
          r = s;
          moved = true;  // its window was chosen for another answer
          assignment = std::move(other);
          out_.winner = std::string(members_[runners_up[k]->score.member_index]->name());
          out_.winner_makespan_ns = runners_up[k]->score.makespan_ns;
        }
      }
      if (options_.polish && !context_.ShouldStop()) {
        search.progress_from = search.progress_to;
        const pardnn::RefinementResult p =
            pardnn::PolishAlongCriticalPath(search_model, search, context_, search_simulator, assignment);
        out_.time_limited |= p.time_limited;
        moved |= p.moves > 0;
      }
      if (model_.solver_chooses_window && moved && !context_.ShouldStop()) {
        // The moves were judged at the chosen window; the answer gets its own best window.
        out_.max_in_flight = ChooseWindow(model_, assignment, simulator_, context_).max_in_flight;
      }
    }
    out_.assignment = std::move(assignment);
  }

  // An answer that fits at the proven lower bound, or within near_optimal_gap of it on a large step
  // (PortfolioOptions::stop_at_bound): nothing later can gain.
  bool EndsTheRun(const PortfolioScore& score) const {
    return stop_at_ns_ >= 0 && score.feasible && score.makespan_ns <= stop_at_ns_;
  }
  bool AtTheBound() const { return best_ && EndsTheRun(best_->score); }

  // Ops + edges of the unrolled step (microbatches x the one-microbatch graph; M >= 1).
  int64_t UnrolledSize() const {
    return static_cast<int64_t>(model_.plan.microbatches) * (model_.num_ops() + model_.num_edges());
  }

  // The other starts of the search (PortfolioOptions::runner_up_searches): per member other than the
  // winner's, its best answer on the table (its own or after the memory stage) that fits where the
  // winner fits and differs from it; the best runner_up_searches of those, best first.
  std::vector<const Candidate*> RunnersUp(const Assignment& winner_assignment) const {
    std::vector<const Candidate*> out;
    if (options_.runner_up_searches <= 0 || UnrolledSize() > options_.runner_up_max_unrolled ||
        !MemoryCanBind(model_)) {
      return out;
    }
    const int32_t winner = best_->score.member_index;
    std::vector<const Candidate*> per_member(members_.size(), nullptr);
    auto offer = [&](const Candidate& c) {
      const int32_t m = c.score.member_index;
      if (m == winner || c.score.constraint_violations != 0 || c.score.feasible != best_->score.feasible ||
          c.assignment == winner_assignment) {
        return;
      }
      if (per_member[m] == nullptr || portfolio::BetterScore(c.score, per_member[m]->score)) per_member[m] = &c;
    };
    for (const std::optional<Candidate>& seed : seeds_) {
      if (seed) offer(*seed);
    }
    for (const Candidate& c : repaired_) offer(c);
    for (const Candidate* c : per_member) {
      if (c != nullptr) out.push_back(c);
    }
    std::stable_sort(out.begin(), out.end(), [](const Candidate* a, const Candidate* b) {
      return portfolio::BetterScore(a->score, b->score);
    });
    if (out.size() > static_cast<size_t>(options_.runner_up_searches)) out.resize(options_.runner_up_searches);
    return out;
  }

  const std::vector<const Partitioner*>& members_;
  const PortfolioOptions& options_;
  const Model& model_;
  const SolveContext& context_;
  Simulator simulator_;
  LowerBoundScratch bound_scratch_;
  PartitionResult out_;
  std::vector<std::optional<Candidate>> seeds_;
  // The seeds that overflowed, after the memory stage (starts for RunnersUp).
  std::vector<Candidate> repaired_;
  std::optional<Candidate> best_;
  int64_t best_feasible_ = 0;  // best feasible makespan so far: progress reports, skips (0 = none)
  // A fitting step at or below this ends the portfolio (PortfolioOptions::stop_at_bound); -1 = off.
  int64_t stop_at_ns_ = -1;
  int32_t window_ = 1;
};

absl::StatusOr<PartitionResult> PortfolioPartitioner::Partition(const Model& model,
                                                                const SolveContext& context) const {
  // Re-placement: from the previous placement, not a fresh portfolio (a fraction of the time; moves
  // priced by the move weight).
  if (model.has_previous_placement()) {
    return Replace(model, context, ReplacementOptions(), replacement_members_);
  }
  return PortfolioRun(members_, options_, model, context).Run();
}

}  // namespace

std::unique_ptr<Partitioner> MakePortfolioPartitioner(std::vector<const Partitioner*> members,
                                                      PortfolioOptions options,
                                                      std::vector<const Partitioner*> replacement_members) {
  return std::make_unique<PortfolioPartitioner>(std::move(members), options, std::move(replacement_members));
}

}  // namespace placement::engine
