#include "service/engine/stages/stages_partitioner.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "service/engine/baselines/pipeline.h"
#include "service/engine/baselines/placement_units.h"
#include "service/engine/plans/window_search.h"
#include "service/engine/sim/placement_score.h"
#include "service/engine/sim/simulator.h"
#include "service/engine/stages/ideal_lattice.h"
#include "service/engine/stages/stage_dp.h"

namespace placement::engine {
namespace stages {
namespace {

// The cost of splitting the chain into one piece of about equal compute per slot, each on its slot's
// class: a split the DP can also make, so an upper bound of its optimum (kInfeasible when a piece does
// not fit its class: then only memory and forbidden devices prune the DP).
int64_t EqualSplitCost(const StageProblem& problem, const std::vector<int32_t>& class_of_slot) {
  const int32_t n = problem.num_elements;
  const int32_t slots = static_cast<int32_t>(class_of_slot.size());
  if (slots == 0) return kInfeasible;
  __int128 total = 0;
  for (int32_t e = 0; e < n; ++e) total += problem.Compute(e, 0);
  StageCostEvaluator eval(problem);
  int64_t worst = 0;
  int32_t e = 0;
  __int128 done = 0;
  for (int32_t slot = 0; slot < slots; ++slot) {
    const __int128 target = total * (slot + 1) / slots;
    const int32_t first = e;
    while (e < n && (done < target || slot == slots - 1)) {
      done += problem.Compute(e, 0);
      eval.Add(e++);
    }
    if (e == first) continue;
    const int64_t cost = eval.Cost(class_of_slot[slot]);
    if (cost == kInfeasible) return kInfeasible;
    worst = std::max(worst, cost);
    for (int32_t k = e - 1; k >= first; --k) eval.Remove(k);
  }
  return worst;
}

// The exact search (every contiguous split, SolveIdeals) on the forward-anchored elements
// (BuildAnchoredElements): only for small graphs, whose lattice of ideals stays small.
constexpr int32_t kMaxExactElements = 2048;
constexpr int64_t kMaxExactIdeals = 20000;
constexpr int64_t kMaxExactPairs = 4'000'000;

class Planner {
 public:
  Planner(const Model& model, int32_t max_elements, const SolveContext& context)
      : model_(model),
        context_(context),
        units_(baselines::BuildPlacementUnits(model)),
        max_elements_(max_elements) {
    std::vector<DeviceId> all(model.num_devices());
    for (DeviceId d = 0; d < model.num_devices(); ++d) all[d] = d;
    device_chain_ = baselines::PipelineDeviceChain(model, all);
  }

  int32_t num_elements(OrderKind order) { return Get(order).chain.num_elements; }
  // True when the exact search applies: few enough elements, with a small lattice.
  bool CanSearchIdeals() { return Exact() != nullptr; }

  // The plan of one candidate; with `fewer` also the plan on fewer devices whose pipeline the DP
  // expects to be shorter (StageSplit::fewer_stages), when there is one.
  // With `exact`, over every contiguous split of the forward-anchored elements (CanSearchIdeals()).
  StagePlan Plan(OrderKind order, bool charge_transfers, int32_t interleave,
                 std::optional<StagePlan>* fewer = nullptr, bool exact = false) {
    StagePlan plan;
    plan.order = order;
    plan.charge_transfers = charge_transfers;
    plan.interleave = interleave;
    plan.exact = exact;
    if (model_.num_devices() == 1) {
      plan.assignment.assign(model_.num_ops(), 0);
      plan.stages = 1;
      return plan;
    }
    Order& o = exact ? *Exact() : Get(order);
    // Devices: classes the DP may order freely, or fixed slots (interleaved; or when the classes are
    // too many to count).
    std::vector<DeviceClass> classes;
    std::optional<StateSpace> states;
    std::vector<int32_t> class_of_slot;
    bool fixed_slots = interleave > 1;
    if (!fixed_slots) {
      classes = GroupDevices(model_, units_, device_chain_);
      if (static_cast<int32_t>(classes.size()) <= kMaxClasses) {
        std::vector<StageClass> counts(classes.size());
        for (size_t c = 0; c < classes.size(); ++c) counts[c].count = static_cast<int32_t>(classes[c].devices.size());
        states = StateSpace::ClassCounts(counts);
      }
      if (states) {
        for (const DeviceId d : device_chain_) {
          for (size_t c = 0; c < classes.size(); ++c) {
            if (classes[c].representative == d ||
                std::find(classes[c].devices.begin(), classes[c].devices.end(), d) != classes[c].devices.end()) {
              class_of_slot.push_back(static_cast<int32_t>(c));
              break;
            }
          }
        }
      } else {
        fixed_slots = true;
      }
    }
    if (fixed_slots) {
      classes = OneClassPerDevice(device_chain_);
      const int32_t k = static_cast<int32_t>(classes.size());
      for (int32_t p = 0; p < k * interleave; ++p) class_of_slot.push_back(p % k);
      states = StateSpace::Positions(class_of_slot);
    }

    // Memory regimes, most faithful first; then the same without pins and kinds (when contiguous
    // stages cannot honour them, e.g. two units pinned to one device with another device's units
    // between them) and the units that are not allowed where their stage went move afterwards.
    const int32_t window = std::max(1, model_.plan.Window());
    const int32_t in_flight = std::min(window, static_cast<int32_t>(model_.num_devices()));
    const double share = 1.0 / interleave;
    const CostModel regimes[] = {{in_flight, true, charge_transfers, share, true},
                                 {1, true, charge_transfers, share, true},
                                 {0, true, charge_transfers, share, true},
                                 {0, false, charge_transfers, 1.0, true},
                                 {in_flight, true, charge_transfers, share, false},
                                 {0, false, charge_transfers, 1.0, false}};
    StageSplit split;
    for (const CostModel& cost : regimes) {
      o.problem->Configure(cost, classes);
      DpOptions options;
      options.upper_bound = EqualSplitCost(o.problem->problem(), class_of_slot);
      if (fewer != nullptr && model_.plan.microbatches > 1) options.bubble_microbatches = model_.plan.microbatches;
      split = SolveChain(o.problem->problem(), *states, options);
      if (split.objective == kInfeasible && options.upper_bound != kInfeasible) {
        options.upper_bound = kInfeasible;  // never expected; safe
        split = SolveChain(o.problem->problem(), *states, options);
      }
      if (exact && split.objective != kInfeasible) {
        // The chain's optimum bounds the exact search, which keeps it unless it finds better in time.
        options.upper_bound = split.objective;
        options.max_pairs = kMaxExactPairs;
        options.should_stop = [this] { return context_.ShouldStop(); };
        StageSplit every = SolveIdeals(o.problem->problem(), *o.lattice, *states, options);
        if (!every.stopped && every.objective <= split.objective) split = std::move(every);
      }
      if (split.objective != kInfeasible) break;
    }
    plan.objective = split.objective;
    plan.stages = static_cast<int32_t>(split.stages.size());
    plan.assignment = ToAssignment(o.chain, classes, fixed_slots, split.stages);
    if (fewer != nullptr && !split.fewer_stages.empty()) {
      StagePlan other = plan;
      other.objective = split.fewer_objective;
      other.stages = static_cast<int32_t>(split.fewer_stages.size());
      other.assignment = ToAssignment(o.chain, classes, fixed_slots, split.fewer_stages);
      *fewer = std::move(other);
    }
    return plan;
  }

 private:
  // Stages to devices (a class's k-th stage on its k-th device; a slot's class is its device), then
  // units to their stage's device, or the nearest allowed one.
  Assignment ToAssignment(const ChainElements& chain, const std::vector<DeviceClass>& classes, bool fixed_slots,
                          const std::vector<StageSplit::Stage>& stages) const {
    std::vector<DeviceId> device_of_element(chain.num_elements, device_chain_.front());
    for (const StageSplit::Stage& stage : stages) {
      const DeviceClass& c = classes[stage.klass];
      const DeviceId d = fixed_slots ? c.devices.front() : c.devices[stage.slot];
      for (const int32_t e : stage.elements) device_of_element[e] = d;
    }
    Assignment assignment(model_.num_ops(), 0);
    for (int32_t u = 0; u < units_.num_units(); ++u) {
      DeviceId d = device_of_element[chain.element_of_unit[u]];
      if (!units_.Allowed(model_, u, d)) d = NearestAllowed(u, d);
      for (int32_t i = units_.begin(u); i < units_.end(u); ++i) assignment[units_.member[i]] = d;
    }
    return assignment;
  }

  // The device unit `u` may use that is nearest to `d` along the device chain (ties: earlier).
  DeviceId NearestAllowed(int32_t u, DeviceId d) const {
    const int32_t at = static_cast<int32_t>(std::find(device_chain_.begin(), device_chain_.end(), d) -
                                            device_chain_.begin());
    DeviceId best = kNone;
    int32_t best_distance = 0;
    for (int32_t i = 0; i < static_cast<int32_t>(device_chain_.size()); ++i) {
      if (!units_.Allowed(model_, u, device_chain_[i])) continue;
      const int32_t distance = std::abs(i - at);
      if (best == kNone || distance < best_distance) {
        best = device_chain_[i];
        best_distance = distance;
      }
    }
    return best != kNone ? best : units_.FirstAllowed(model_, u);
  }

 private:
  struct Order {
    ChainElements chain;
    std::unique_ptr<ChainProblem> problem;
    std::optional<IdealLattice> lattice;  // the exact search's
  };
  Order* Exact() {
    // Units that ride along (parameters, updates) join a layer's element: a few times the limit in units
    // can still fit, far more cannot.
    if (!exact_tried_ && units_.num_units() <= 8 * kMaxExactElements) {
      exact_tried_ = true;
      Order order;
      order.chain = BuildAnchoredElements(model_, units_);
      if (order.chain.num_elements <= kMaxExactElements && order.chain.num_elements > 1) {
        exact_.emplace(std::move(order));
        exact_->problem = std::make_unique<ChainProblem>(model_, units_, exact_->chain, device_chain_);
        exact_->problem->SetPredecessors();
        exact_->lattice = IdealLattice::Enumerate(exact_->problem->problem(), kMaxExactIdeals);
        if (!exact_->lattice) exact_.reset();
      }
    }
    return exact_ ? &*exact_ : nullptr;
  }
  Order& Get(OrderKind kind) {
    std::optional<Order>& slot = kind == OrderKind::kLevels ? levels_ : folded_;
    if (!slot) {
      slot.emplace();
      slot->chain = BuildChainElements(model_, units_, kind, max_elements_);
      slot->problem = std::make_unique<ChainProblem>(model_, units_, slot->chain, device_chain_);
    }
    return *slot;
  }

  const Model& model_;
  const SolveContext& context_;
  const baselines::PlacementUnits units_;
  const int32_t max_elements_;
  std::vector<DeviceId> device_chain_;
  std::optional<Order> levels_, folded_, exact_;
  bool exact_tried_ = false;
};

}  // namespace

std::string StagePlan::Describe() const {
  return absl::StrCat(exact ? "every contiguous split" : order == OrderKind::kLevels ? "levels" : "folded",
                      charge_transfers ? ", transfers charged" : ", transfers overlapped",
                      interleave > 1 ? absl::StrCat(", ", interleave, " stages per device") : "", ", ",
                      stages, " stages");
}

StagePlan PlanStages(const Model& model, OrderKind order, bool charge_transfers, int32_t interleave,
                     int32_t max_elements, bool exact) {
  const SolveContext context;
  Planner planner(model, max_elements, context);
  if (exact && !planner.CanSearchIdeals()) exact = false;
  return planner.Plan(order, charge_transfers, interleave, nullptr, exact);
}

}  // namespace stages

namespace {

using stages::OrderKind;
using stages::StagePlan;

class StagesPartitioner final : public Partitioner {
 public:
  explicit StagesPartitioner(StagesOptions options) : options_(std::move(options)) {}
  std::string_view name() const override { return "stages"; }
  bool searches() const override { return true; }
  std::string_view version() const override { return options_.exact_search ? "1" : "1-chains"; }
  std::string_view description() const override {
    return "Stage planner (PipeDream / NeurIPS'20 DP): contiguous stages of a layer order chosen by "
           "dynamic programming to minimise the slowest stage (compute on heterogeneous devices, "
           "transfers in and out, memory of the microbatches in flight), one stage per device or "
           "interleaved (v stages per device); the simulator picks among the variants";
  }

  absl::StatusOr<PartitionResult> Partition(const Model& model,
                                            const SolveContext& context) const override {
    if (std::optional<PartitionResult> none = baselines::NothingToPlace(model)) return *std::move(none);
    stages::Planner planner(model, options_.max_elements, context);
    Simulator simulator(model);
    LowerBoundScratch bound_scratch;
    PartitionResult result;
    std::optional<StagePlan> best;
    PlacementScore best_score = PlacementScore::Worst();
    std::vector<std::pair<Assignment, PlacementScore>> seen;  // every candidate simulated, in order
    const SimOptions scoring = ScoringSimOptions(model);
    auto consider = [&](StagePlan plan) {
      for (const auto& other : seen) {
        if (other.first == plan.assignment) return;
      }
      // A candidate whose own lower bound is above a fitting best cannot win, with any window: not
      // simulated (on a 100K-op step at M = 16 a simulation costs ~0.3 s; the folded-order variants
      // usually end here).
      if (options_.skip_by_bound && best && best_score.Fits() &&
          AssignedLowerBoundNs(model, plan.assignment, &bound_scratch) > best_score.makespan_ns) {
        return;
      }
      const PlacementScore score = ScoreSimulation(model, simulator.Run(plan.assignment, scoring));
      seen.emplace_back(plan.assignment, score);
      if (!best || score.BetterThan(best_score)) {
        best_score = score;
        best = std::move(plan);
      }
    };
    auto stop = [&] {
      if (best && context.ShouldStop()) {
        result.time_limited = true;
        return true;
      }
      return false;
    };
    const OrderKind orders[] = {OrderKind::kLevels, OrderKind::kFolded};
    int32_t step = 0;
    const int32_t steps = 4 + static_cast<int32_t>(options_.interleave.size());
    for (const OrderKind order : orders) {
      // The folded order is only worth a try when it brings producers and consumers closer.
      if (order == OrderKind::kFolded &&
          stages::OrderSpan(model, OrderKind::kFolded) * 4 >= stages::OrderSpan(model, OrderKind::kLevels) * 3) {
        continue;
      }
      for (const bool charge : {true, false}) {
        if (stop()) break;
        std::optional<StagePlan> fewer;
        consider(planner.Plan(order, charge, 1, &fewer));
        if (fewer && !stop()) consider(*std::move(fewer));
        context.Report("stages", 0.9 * (++step) / steps);
      }
    }
    // Every contiguous split, when the graph is small enough to enumerate them.
    if (options_.exact_search && model.num_devices() > 1 && !stop() && planner.CanSearchIdeals()) {
      for (const bool charge : {true, false}) {
        if (stop()) break;
        std::optional<StagePlan> fewer;
        consider(planner.Plan(OrderKind::kLevels, charge, 1, &fewer, /*exact=*/true));
        if (fewer && !stop()) consider(*std::move(fewer));
      }
    }
    // Interleaving shrinks the bubble of a pipeline of microbatches; with one microbatch there is none.
    if (model.num_devices() > 1 && model.plan.microbatches > 1) {
      const OrderKind order = best->order;
      const bool charge = best->charge_transfers;
      for (const int32_t v : options_.interleave) {
        if (v <= 1 || stop()) continue;
        if (static_cast<int64_t>(v) * model.num_devices() > planner.num_elements(order)) continue;
        consider(planner.Plan(order, charge, v));
        context.Report("stages", 0.9 * (++step) / steps);
      }
    }
    result.assignment = std::move(best->assignment);
    result.simulated = PartitionResult::SimulatedScore{best_score.overflow_bytes, best_score.makespan_ns};
    ChooseTheWindow(model, simulator, context, seen, result, best_score);
    context.Report("stages", 1.0, best_score.Fits() ? best_score.makespan_ns : 0);
    return result;
  }

 private:
  // When the solver chooses W (api.md §2.1), the candidates were judged with the working window; the
  // best few now get their own fastest W that fits (plans/window_search.h), and the best of those is the
  // answer, with its W. One window search costs several unrolled simulations: on large steps only the
  // best candidate gets one.
  static void ChooseTheWindow(const Model& model, Simulator& simulator, const SolveContext& context,
                              const std::vector<std::pair<Assignment, PlacementScore>>& seen,
                              PartitionResult& result, PlacementScore& best_score) {
    if (!model.solver_chooses_window || model.plan.microbatches <= 1 || context.ShouldStop()) return;
    std::vector<size_t> ranked(seen.size());
    for (size_t i = 0; i < seen.size(); ++i) ranked[i] = i;
    std::stable_sort(ranked.begin(), ranked.end(),
                     [&](size_t a, size_t b) { return seen[a].second.BetterThan(seen[b].second); });
    const int64_t unrolled = static_cast<int64_t>(model.plan.microbatches) * (model.num_ops() + model.num_edges());
    const size_t wanted = std::min<size_t>(ranked.size(), unrolled > kWindowCandidatesMaxUnrolled ? 1 : 3);
    std::optional<WindowChoice> chosen;
    size_t chosen_index = 0;
    for (size_t k = 0; k < wanted && !context.ShouldStop(); ++k) {
      const auto& [assignment, score] = seen[ranked[k]];
      WindowSearchOptions search;
      search.known_window = model.plan.Window();  // the candidates were scored with it
      search.known_score = score;
      const WindowChoice choice = ChooseWindow(model, assignment, simulator,
                                               context.WithShareOfTimeLeft(1.0 / static_cast<double>(wanted - k)),
                                               search);
      if (!chosen || choice.score.BetterThan(chosen->score)) {
        chosen = choice;
        chosen_index = ranked[k];
      }
    }
    if (!chosen) return;
    result.assignment = seen[chosen_index].first;
    result.simulated = PartitionResult::SimulatedScore{seen[chosen_index].second.overflow_bytes,
                                                       seen[chosen_index].second.makespan_ns};
    result.max_in_flight = chosen->max_in_flight;
    result.windowed = PartitionResult::SimulatedScore{chosen->score.overflow_bytes, chosen->score.makespan_ns};
    best_score = chosen->score;
  }

 private:
  // As `auto`'s: above this many unrolled ops and edges, only the best candidate's window is searched.
  static constexpr int64_t kWindowCandidatesMaxUnrolled = 1'000'000;
  StagesOptions options_;
};

}  // namespace

std::unique_ptr<Partitioner> MakeStagesPartitioner(StagesOptions options) {
  return std::make_unique<StagesPartitioner>(std::move(options));
}

}  // namespace placement::engine
