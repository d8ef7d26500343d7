#include "service/engine/stages/stage_dp.h"

#include <algorithm>

namespace placement::engine::stages {

std::optional<StateSpace> StateSpace::ClassCounts(const std::vector<StageClass>& classes,
                                                  int32_t max_states) {
  StateSpace space;
  int64_t states = 1;
  for (const StageClass& c : classes) {
    space.radix_.push_back(static_cast<int32_t>(states));
    states *= static_cast<int64_t>(c.count) + 1;
    if (states > max_states) return std::nullopt;
  }
  const int32_t n = static_cast<int32_t>(states);
  space.offset_.assign(static_cast<size_t>(n) + 1, 0);
  for (int32_t s = 0; s < n; ++s) {
    for (int32_t c = 0; c < static_cast<int32_t>(classes.size()); ++c) {
      const int32_t digit = (s / space.radix_[c]) % (classes[c].count + 1);
      if (digit > 0) space.transitions_.push_back({s - space.radix_[c], c});
    }
    space.offset_[s + 1] = static_cast<int32_t>(space.transitions_.size());
  }
  return space;
}

StateSpace StateSpace::Positions(const std::vector<int32_t>& class_of_slot) {
  StateSpace space;
  space.positions_ = true;
  const int32_t slots = static_cast<int32_t>(class_of_slot.size());
  space.offset_.assign(static_cast<size_t>(slots) + 2, 0);
  for (int32_t s = 1; s <= slots; ++s) {
    space.transitions_.push_back({s - 1, class_of_slot[s - 1]});
    space.offset_[s + 1] = s;
  }
  return space;
}

int32_t StateSpace::Slot(int32_t state, const Transition& t) const {
  if (positions_) return t.from;
  (void)state;
  // The count of this class's devices used before the stage; the classes' counts are not kept, but the
  // digit of `from` is the quotient by the radix modulo (count + 1), and the next radix is radix ×
  // (count + 1), so the digit is (from mod next) / radix.
  const int32_t c = t.klass;
  const int32_t radix = radix_[c];
  const int32_t next = c + 1 < static_cast<int32_t>(radix_.size()) ? radix_[c + 1] : num_states();
  return (t.from % next) / radix;
}

namespace {

// The DP table and the relaxation shared by both lattices.
class DpTable {
 public:
  DpTable(const StageProblem& problem, const StateSpace& states, int32_t num_ideals,
          const DpOptions& options)
      : problem_(problem),
        states_(states),
        num_states_(states.num_states()),
        upper_bound_(options.upper_bound),
        best_(static_cast<size_t>(num_ideals) * num_states_, kInfeasible),
        back_sub_(best_.size(), -1),
        back_transition_(best_.size(), -1),
        cost_(problem.num_classes(), kInfeasible) {
    // The empty prefix costs nothing whatever the devices.
    for (int32_t s = 0; s < num_states_; ++s) best_[s] = 0;
  }

  // True when no class can take the current stage or any stage containing it.
  bool Prunable(const StageCostEvaluator& eval) const {
    for (int32_t c = 0; c < problem_.num_classes(); ++c) {
      const int64_t bound = eval.LowerBound(c);
      if (bound != kInfeasible && bound <= upper_bound_) return false;
    }
    return true;
  }

  // The stage I \ J (held by `eval`, non-empty) after J.
  void Relax(int32_t ideal, int32_t sub, const StageCostEvaluator& eval) {
    ++pairs_;
    for (int32_t c = 0; c < problem_.num_classes(); ++c) cost_[c] = eval.Cost(c);
    const int64_t* from = best_.data() + static_cast<size_t>(sub) * num_states_;
    int64_t* to = best_.data() + static_cast<size_t>(ideal) * num_states_;
    for (int32_t s = 1; s < num_states_; ++s) {
      for (const StateSpace::Transition* t = states_.begin(s); t != states_.end(s); ++t) {
        const int64_t cost = cost_[t->klass];
        const int64_t before = from[t->from];
        if (cost == kInfeasible || before == kInfeasible) continue;
        const int64_t candidate = std::max(before, cost);
        if (candidate < to[s]) {
          to[s] = candidate;
          const size_t at = static_cast<size_t>(ideal) * num_states_ + s;
          back_sub_[at] = sub;
          back_transition_[at] = static_cast<int32_t>(t - states_.begin(0));
        }
      }
    }
  }

  // Leaving a device unused: best[s][I] <= best[s'][I] for every transition s' → s.
  void RelaxSkips(int32_t ideal) {
    int64_t* row = best_.data() + static_cast<size_t>(ideal) * num_states_;
    for (int32_t s = 1; s < num_states_; ++s) {
      for (const StateSpace::Transition* t = states_.begin(s); t != states_.end(s); ++t) {
        if (row[t->from] < row[s]) {
          row[s] = row[t->from];
          const size_t at = static_cast<size_t>(ideal) * num_states_ + s;
          back_sub_[at] = ideal;  // J = I: nothing on this device
          back_transition_[at] = static_cast<int32_t>(t - states_.begin(0));
        }
      }
    }
  }

  // Walks back from (full, last state); `elements_between(I, J)` lists I \ J.
  int64_t pairs() const { return pairs_; }

  // Non-empty stages on the way back from (full, state).
  int32_t StageCount(int32_t full, int32_t state) const {
    int32_t count = 0;
    for (int32_t ideal = full; ideal != 0;) {
      const size_t at = static_cast<size_t>(ideal) * num_states_ + state;
      const int32_t sub = back_sub_[at];
      count += sub != ideal;
      ideal = sub;
      state = (states_.begin(0) + back_transition_[at])->from;
    }
    return count;
  }

  // The split of the state with every device; with `bubble_microbatches` M > 0 also the one of the
  // state whose objective × (M + stages − 1) is smallest, when it has fewer stages.
  template <typename ElementsBetween>
  StageSplit Extract(int32_t full, int32_t bubble_microbatches, ElementsBetween elements_between) const {
    const int32_t last = num_states_ - 1;
    StageSplit split = ExtractState(full, last, elements_between);
    if (bubble_microbatches <= 0 || split.objective == kInfeasible) return split;
    int32_t best_state = last;
    __int128 best_step = static_cast<__int128>(split.objective) *
                         (bubble_microbatches + static_cast<int64_t>(split.stages.size()) - 1);
    int32_t best_count = static_cast<int32_t>(split.stages.size());
    for (int32_t s = last - 1; s >= 1; --s) {
      const int64_t objective = best_[static_cast<size_t>(full) * num_states_ + s];
      if (objective == kInfeasible) continue;
      const int32_t count = StageCount(full, s);
      const __int128 step = static_cast<__int128>(objective) * (bubble_microbatches + count - 1);
      if (step < best_step) {
        best_step = step;
        best_state = s;
        best_count = count;
      }
    }
    if (best_count < static_cast<int32_t>(split.stages.size())) {
      StageSplit fewer = ExtractState(full, best_state, elements_between);
      split.fewer_objective = fewer.objective;
      split.fewer_stages = std::move(fewer.stages);
    }
    return split;
  }

  template <typename ElementsBetween>
  StageSplit ExtractState(int32_t full, int32_t state, ElementsBetween elements_between) const {
    StageSplit split;
    split.pairs_visited = pairs_;
    split.objective = best_[static_cast<size_t>(full) * num_states_ + state];
    if (split.objective == kInfeasible) return split;
    int32_t ideal = full;
    while (ideal != 0) {
      const size_t at = static_cast<size_t>(ideal) * num_states_ + state;
      const int32_t sub = back_sub_[at];
      const StateSpace::Transition& t = *(states_.begin(0) + back_transition_[at]);
      if (sub != ideal) {
        StageSplit::Stage stage;
        stage.klass = t.klass;
        stage.slot = states_.Slot(state, t);
        stage.elements = elements_between(ideal, sub);
        split.stages.push_back(std::move(stage));
      }
      ideal = sub;
      state = t.from;
    }
    std::reverse(split.stages.begin(), split.stages.end());
    // Stage costs, recomputed (the table keeps only maxima).
    StageCostEvaluator eval(problem_);
    for (StageSplit::Stage& stage : split.stages) {
      for (int32_t e : stage.elements) eval.Add(e);
      stage.cost = eval.Cost(stage.klass);
      for (auto it = stage.elements.rbegin(); it != stage.elements.rend(); ++it) eval.Remove(*it);
    }
    return split;
  }

 private:
  const StageProblem& problem_;
  const StateSpace& states_;
  const int32_t num_states_;
  const int64_t upper_bound_;
  std::vector<int64_t> best_;
  std::vector<int32_t> back_sub_;
  std::vector<int32_t> back_transition_;
  std::vector<int64_t> cost_;
  int64_t pairs_ = 0;
};

}  // namespace

StageSplit SolveChain(const StageProblem& problem, const StateSpace& states, const DpOptions& options) {
  const int32_t n = problem.num_elements;
  DpTable table(problem, states, n + 1, options);
  StageCostEvaluator eval(problem);
  // Stages [begin, end) for every end. The evaluator's set carries over between ends: for one end it
  // grows to the left from empty until it is prunable; for the next, the new element is added and the
  // set shrinks from the left back to empty (every begin left of the first prunable one is prunable
  // for the next end too). Each element is added and removed about once per end it is in range of.
  int32_t begin = 0;
  for (int32_t end = 1; end <= n; ++end) {
    if (end % 2 == 1) {
      begin = end;
      while (begin > 0) {
        eval.Add(--begin);
        if (table.Prunable(eval)) break;
        table.Relax(end, begin, eval);
      }
    } else {
      eval.Add(end - 1);
      for (; begin < end; ++begin) {
        if (!table.Prunable(eval)) table.Relax(end, begin, eval);
        eval.Remove(begin);
      }
    }
    table.RelaxSkips(end);
  }
  return table.Extract(n, options.bubble_microbatches, [](int32_t ideal, int32_t sub) {
    std::vector<int32_t> elements;
    for (int32_t e = sub; e < ideal; ++e) elements.push_back(e);
    return elements;
  });
}

StageSplit SolveIdeals(const StageProblem& problem, const IdealLattice& lattice, const StateSpace& states,
                       const DpOptions& options) {
  const int32_t count = lattice.num_ideals();
  DpTable table(problem, states, count, options);
  StageCostEvaluator eval(problem);
  std::vector<int32_t> stamp(count, -1);
  struct Frame {
    int32_t ideal;
    int32_t added;  // the element whose addition to the stage reached this sub-ideal (-1 at the top)
    const IdealLattice::Child* next;
  };
  std::vector<Frame> stack;
  for (int32_t ideal = 1; ideal < count; ++ideal) {
    if ((options.max_pairs > 0 && table.pairs() > options.max_pairs) ||
        (options.should_stop && ideal % 64 == 0 && options.should_stop())) {
      StageSplit stopped;
      stopped.stopped = true;
      stopped.pairs_visited = table.pairs();
      return stopped;
    }
    stamp[ideal] = ideal;
    stack.push_back({ideal, -1, lattice.ChildrenBegin(ideal)});
    while (!stack.empty()) {
      Frame& top = stack.back();
      if (top.next == lattice.ChildrenEnd(top.ideal)) {
        if (top.added >= 0) eval.Remove(top.added);
        stack.pop_back();
        continue;
      }
      const IdealLattice::Child child = *top.next++;
      if (stamp[child.ideal] == ideal) continue;
      stamp[child.ideal] = ideal;
      eval.Add(child.removed);
      if (table.Prunable(eval)) {
        eval.Remove(child.removed);
        continue;
      }
      table.Relax(ideal, child.ideal, eval);
      stack.push_back({child.ideal, child.removed, lattice.ChildrenBegin(child.ideal)});
    }
    table.RelaxSkips(ideal);
  }
  return table.Extract(lattice.full(), options.bubble_microbatches, [&](int32_t ideal, int32_t sub) {
    std::vector<int32_t> elements;
    for (int32_t e = 0; e < problem.num_elements; ++e) {
      if (lattice.Contains(ideal, e) && !lattice.Contains(sub, e)) elements.push_back(e);
    }
    return elements;
  });
}

}  // namespace placement::engine::stages
