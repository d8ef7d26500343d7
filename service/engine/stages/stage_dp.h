// stage_dp.h — the stage planner's dynamic programme: split a StageProblem into contiguous stages, one
// per device, minimising the cost of the slowest stage (stage_problem.h), as PipeDream's planner and
// the NeurIPS'20 DP (Tarnawski et al., "Efficient Algorithms for Device Placement of DNN Graph
// Operators") do.
//
//   best[s][I] = min over sub-ideals J ⊆ I and transitions (s' → s using class c) of
//                max(best[s'][J], cost_c(I \ J))            (J = I: the device is left unused)
//
// I runs over the ideals of the element order: the prefixes of a chain (`SolveChain`), or every ideal
// of a partial order (`SolveIdeals`, exact over all contiguous splits when the order is narrow enough
// to enumerate). The *state* s says which devices are used so far (`StateSpace`):
//   * `ClassCounts`: how many devices of each class — any order of classes along the pipeline, so
//     heavier stages can go to faster devices (heterogeneous clusters) and one CPU may sit anywhere in
//     a pipeline of accelerators (the NeurIPS'20 DP's [cpus][fpgas] table is this with two classes);
//   * `Positions`: a fixed sequence of device slots (the interleaved schedule: slot p on device p mod K).
//
// Sub-ideals are walked one element at a time with StageCostEvaluator; a walk stops growing a stage
// once every class's lower bound (compute, memory, forbidden elements — all grow with the stage) rules
// it out or exceeds `upper_bound` (the cost of a split known to exist: pruning above it cannot lose an
// optimum at or below it). Cost: O(pairs visited × (senders per element + transitions)); memory
// O(ideals × states). Deterministic: first strict improvement wins, walks in a fixed order.
//
// Example:
//   StateSpace devices = StateSpace::ClassCounts(problem.classes);
//   StageSplit split = SolveChain(problem, devices, DpOptions());
//   for (const StageSplit::Stage& s : split.stages) Use(s.klass, s.slot, s.elements);
#ifndef PLACEMENT_SERVICE_ENGINE_STAGES_STAGE_DP_H_
#define PLACEMENT_SERVICE_ENGINE_STAGES_STAGE_DP_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "service/engine/stages/ideal_lattice.h"
#include "service/engine/stages/stage_problem.h"

namespace placement::engine::stages {

class StateSpace {
 public:
  struct Transition {
    int32_t from;
    int32_t klass;
  };
  // States = vectors of per-class counts (mixed radix); nullopt when there would be more than
  // `max_states`.
  static std::optional<StateSpace> ClassCounts(const std::vector<StageClass>& classes,
                                               int32_t max_states = 4096);
  // States 0..P: slot p (0-based) runs on class `class_of_slot[p]`.
  static StateSpace Positions(const std::vector<int32_t>& class_of_slot);

  int32_t num_states() const { return static_cast<int32_t>(offset_.size()) - 1; }
  const Transition* begin(int32_t state) const { return transitions_.data() + offset_[state]; }
  const Transition* end(int32_t state) const { return transitions_.data() + offset_[state + 1]; }
  // Which device of its class (ClassCounts: the count used before; Positions: the slot) the stage
  // entered through transition `t` into `state` gets.
  int32_t Slot(int32_t state, const Transition& t) const;

 private:
  bool positions_ = false;
  std::vector<int32_t> radix_;  // ClassCounts: weight of each class's digit
  std::vector<int32_t> offset_;
  std::vector<Transition> transitions_;
};

struct StageSplit {
  struct Stage {
    int32_t klass = 0;
    int32_t slot = 0;  // StateSpace::Slot: which device of the class
    int64_t cost = 0;
    std::vector<int32_t> elements;  // ascending
  };
  // Max stage cost; kInfeasible when no split fits (then `stages` is empty).
  int64_t objective = kInfeasible;
  std::vector<Stage> stages;  // pipeline order: the stage holding the order's first elements first
  int64_t pairs_visited = 0;  // stages evaluated (for benchmarks)
  // With DpOptions::bubble_microbatches: the split using fewer devices whose pipeline would be shorter
  // (objective × (M + stages − 1) smaller, GPipe's bubble), when there is one; else empty.
  std::vector<Stage> fewer_stages;
  int64_t fewer_objective = kInfeasible;
  // SolveIdeals gave up (DpOptions::max_pairs or should_stop): no split.
  bool stopped = false;
};

struct DpOptions {
  int64_t upper_bound = kInfeasible;
  // M > 0: also find the device state whose split minimises objective × (M + stages − 1): with few
  // microbatches and coarse stages, a shorter pipeline can finish a step sooner than one more device
  // shortens its slowest stage (StageSplit::fewer_stages).
  int32_t bubble_microbatches = 0;
  // SolveIdeals only: give up after about this many stages evaluated (0 = never), or when
  // `should_stop` says so (polled every 64 ideals).
  int64_t max_pairs = 0;
  std::function<bool()> should_stop;
};

StageSplit SolveChain(const StageProblem& problem, const StateSpace& states, const DpOptions& options);
StageSplit SolveIdeals(const StageProblem& problem, const IdealLattice& lattice, const StateSpace& states,
                       const DpOptions& options);

}  // namespace placement::engine::stages

#endif  // PLACEMENT_SERVICE_ENGINE_STAGES_STAGE_DP_H_
