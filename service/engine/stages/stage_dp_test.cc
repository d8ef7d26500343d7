#include "service/engine/stages/stage_dp.h"

#include <algorithm>
#include <functional>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/engine/stages/ideal_lattice.h"
#include "service/engine/stages/stage_problem.h"
#include "tests/testutil/random_graph.h"

namespace placement::engine::stages {
namespace {

using ::testing::ElementsAre;

// A problem written by hand: elements with compute, memory and predecessors; senders added with
// AddSender; one class of `devices` devices unless classes are set.
struct Builder {
  std::vector<int64_t> compute, memory;
  std::vector<std::vector<int32_t>> preds;
  struct Sender {
    int32_t element;
    int64_t cost;
    std::vector<int32_t> consumers;
  };
  std::vector<Sender> senders;
  std::vector<StageClass> classes;

  int32_t Add(int64_t c, int64_t m = 0, std::vector<int32_t> p = {}) {
    compute.push_back(c);
    memory.push_back(m);
    preds.push_back(std::move(p));
    return static_cast<int32_t>(compute.size()) - 1;
  }
  // A chain: every element after the first depends on the one before.
  static Builder Chain(const std::vector<int64_t>& costs) {
    Builder b;
    for (size_t i = 0; i < costs.size(); ++i) {
      b.Add(costs[i], 0, i == 0 ? std::vector<int32_t>{} : std::vector<int32_t>{static_cast<int32_t>(i) - 1});
    }
    return b;
  }
  StageProblem Build() const {
    StageProblem p;
    const int32_t n = static_cast<int32_t>(compute.size());
    p.Resize(n, 1);
    for (int32_t e = 0; e < n; ++e) {
      p.compute[e] = compute[e];
      p.memory[e] = memory[e];
      for (int32_t u : preds[e]) p.pred.push_back(u);
      p.pred_offset[e + 1] = static_cast<int32_t>(p.pred.size());
    }
    for (const Sender& s : senders) {
      p.sender_element.push_back(s.element);
      p.sender_cost.push_back(s.cost);
      for (int32_t c : s.consumers) p.sender_consumer.push_back(c);
      p.sender_consumer_offset.push_back(static_cast<int32_t>(p.sender_consumer.size()));
    }
    p.classes = classes;
    p.Finish();
    return p;
  }
};

StageClass Devices(int32_t count, double speed = 1.0, int64_t capacity = INT64_MAX) {
  StageClass c;
  c.count = count;
  c.speed = speed;
  c.capacity = capacity;
  return c;
}

std::vector<int32_t> Sizes(const StageSplit& split) {
  std::vector<int32_t> sizes;
  for (const StageSplit::Stage& s : split.stages) sizes.push_back(static_cast<int32_t>(s.elements.size()));
  return sizes;
}

TEST(StageDpTest, ChainWithAKnownOptimalCut) {
  // 4 1 1 | 4 1 1: the only split into two stages of 6.
  Builder b = Builder::Chain({4, 1, 1, 4, 1, 1});
  b.classes = {Devices(2)};
  const StageProblem p = b.Build();
  const StageSplit split = SolveChain(p, *StateSpace::ClassCounts(p.classes), DpOptions());
  EXPECT_EQ(split.objective, 6);
  EXPECT_THAT(Sizes(split), ElementsAre(3, 3));
  EXPECT_THAT(split.stages[1].elements, ElementsAre(3, 4, 5));
}

TEST(StageDpTest, TransfersMoveTheCutToACheapBoundary) {
  // Compute 2 2 2 2. The balanced cut (after element 1) carries a 10-unit tensor: 4 + 10 on both sides.
  // Cutting after element 2 costs 6 + 1 | 2 + 1 = 7, after element 0: 2 + 2 | 6 + 2 = 8, one device 8.
  Builder b = Builder::Chain({2, 2, 2, 2});
  b.senders = {{0, 2, {1}}, {1, 10, {2}}, {2, 1, {3}}};
  b.classes = {Devices(2)};
  const StageProblem p = b.Build();
  const StageSplit split = SolveChain(p, *StateSpace::ClassCounts(p.classes), DpOptions());
  EXPECT_EQ(split.objective, 7);
  EXPECT_THAT(Sizes(split), ElementsAre(3, 1));
  // When transfers overlap compute, the balanced cut wins.
  Builder free = b;
  free.classes[0].charges_transfers = false;
  const StageProblem q = free.Build();
  const StageSplit balanced = SolveChain(q, *StateSpace::ClassCounts(q.classes), DpOptions());
  EXPECT_EQ(balanced.objective, 4);
  EXPECT_THAT(Sizes(balanced), ElementsAre(2, 2));
}

TEST(StageDpTest, MemoryForcesADifferentCut) {
  // Time alone: 1 1 | 1 1. Element 0 holds 3 bytes, the others 1, devices 3: element 0 must be alone.
  Builder b = Builder::Chain({1, 1, 1, 1});
  b.memory = {3, 1, 1, 1};
  b.classes = {Devices(2)};
  StageProblem p = b.Build();
  EXPECT_THAT(Sizes(SolveChain(p, *StateSpace::ClassCounts(p.classes), DpOptions())), ElementsAre(2, 2));
  p.classes[0].capacity = 3;
  const StageSplit fits = SolveChain(p, *StateSpace::ClassCounts(p.classes), DpOptions());
  EXPECT_EQ(fits.objective, 3);
  EXPECT_THAT(Sizes(fits), ElementsAre(1, 3));
  p.classes[0].capacity = 2;  // element 0 fits nowhere
  EXPECT_EQ(SolveChain(p, *StateSpace::ClassCounts(p.classes), DpOptions()).objective, kInfeasible);
}

TEST(StageDpTest, FasterDevicesTakeHeavierStages) {
  // One device twice as fast as the other: 6 units of work split 4 (fast) + 2 (slow) → 2.
  Builder b = Builder::Chain({1, 1, 1, 1, 1, 1});
  b.classes = {Devices(1, 1.0), Devices(1, 2.0)};
  const StageProblem p = b.Build();
  const StageSplit split = SolveChain(p, *StateSpace::ClassCounts(p.classes), DpOptions());
  EXPECT_EQ(split.objective, 2);
  ASSERT_EQ(split.stages.size(), 2u);
  for (const StageSplit::Stage& stage : split.stages) {
    EXPECT_EQ(stage.klass, stage.elements.size() == 4 ? 1 : 0);
  }
}

TEST(StageDpTest, ForbiddenClassesAreNeverUsed) {
  Builder b = Builder::Chain({1, 1, 1, 1});
  b.classes = {Devices(1), Devices(1)};
  StageProblem p = b.Build();
  p.forbidden_classes[0] = 1 << 1;  // element 0 may only use class 0
  p.forbidden_classes[3] = 1 << 0;  // element 3 may only use class 1
  const StageSplit split = SolveChain(p, *StateSpace::ClassCounts(p.classes), DpOptions());
  ASSERT_EQ(split.stages.size(), 2u);
  EXPECT_EQ(split.stages[0].klass, 0);
  EXPECT_EQ(split.stages[1].klass, 1);
  EXPECT_EQ(split.objective, 2);
}

TEST(StageDpTest, FixedSlotsFollowTheirClasses) {
  // Interleaved: 4 slots over 2 devices (slot p on device p mod 2).
  Builder b = Builder::Chain({1, 1, 1, 1, 1, 1, 1, 1});
  b.classes = {Devices(1), Devices(1)};
  const StageProblem p = b.Build();
  const StageSplit split = SolveChain(p, StateSpace::Positions({0, 1, 0, 1}), DpOptions());
  EXPECT_EQ(split.objective, 2);
  ASSERT_EQ(split.stages.size(), 4u);
  for (int32_t s = 0; s < 4; ++s) {
    EXPECT_EQ(split.stages[s].klass, s % 2);
    EXPECT_EQ(split.stages[s].slot, s);
  }
}

TEST(StageDpTest, OffersAShorterPipelineWhenTheBubbleOutweighsADevice) {
  // 5 | 1 1 1 1 1 on up to four devices: the slowest stage is 5 whatever the split, so with 4
  // microbatches two stages (5 × (4 + 1)) beat four (5 × (4 + 3)).
  Builder b = Builder::Chain({5, 1, 1, 1, 1, 1});
  b.classes = {Devices(4)};
  const StageProblem p = b.Build();
  DpOptions options;
  options.bubble_microbatches = 4;
  const StageSplit split = SolveChain(p, *StateSpace::ClassCounts(p.classes), options);
  EXPECT_EQ(split.objective, 5);
  const std::vector<StageSplit::Stage>& shortest = split.fewer_stages.empty() ? split.stages : split.fewer_stages;
  EXPECT_EQ(shortest.size(), 2u);
  if (!split.fewer_stages.empty()) {
    EXPECT_EQ(split.fewer_objective, 5);
    EXPECT_GT(split.stages.size(), 2u);
  }
  // Without microbatches to weigh, no alternative.
  EXPECT_TRUE(SolveChain(p, *StateSpace::ClassCounts(p.classes), DpOptions()).fewer_stages.empty());
}

// Brute force over every monotone assignment of elements to K ordered stages (stage(u) <= stage(v) on
// every edge: exactly the contiguous splits), one class of K devices.
int64_t BruteForce(const StageProblem& p, int32_t k) {
  const int32_t n = p.num_elements;
  std::vector<int32_t> stage(n, 0);
  int64_t best = kInfeasible;
  std::function<void(int32_t)> go = [&](int32_t e) {
    if (e == n) {
      int64_t worst = 0;
      for (int32_t s = 0; s < k && worst != kInfeasible; ++s) {
        StageCostEvaluator eval(p);
        for (int32_t x = 0; x < n; ++x) {
          if (stage[x] == s) eval.Add(x);
        }
        if (!eval.Empty()) worst = std::max(worst, eval.Cost(0));
      }
      best = std::min(best, worst);
      return;
    }
    int32_t lowest = 0;
    for (int32_t i = p.pred_offset[e]; i < p.pred_offset[e + 1]; ++i) lowest = std::max(lowest, stage[p.pred[i]]);
    for (int32_t s = lowest; s < k; ++s) {
      stage[e] = s;
      go(e + 1);
    }
  };
  go(0);
  return best;
}

TEST(StageDpTest, IdealsMatchBruteForceOnRandomDags) {
  testutil::Rng rng(11);
  for (int trial = 0; trial < 60; ++trial) {
    Builder b;
    const int32_t n = static_cast<int32_t>(rng.Uniform(1, 8));
    for (int32_t e = 0; e < n; ++e) {
      std::vector<int32_t> preds;
      for (int32_t u = 0; u < e; ++u) {
        if (rng.Bernoulli(0.3)) preds.push_back(u);
      }
      b.Add(rng.Uniform(0, 20), rng.Uniform(0, 5), preds);
    }
    for (int32_t e = 0; e < n; ++e) {
      std::vector<int32_t> consumers;
      for (int32_t v = e + 1; v < n; ++v) {
        if (std::find(b.preds[v].begin(), b.preds[v].end(), e) != b.preds[v].end()) consumers.push_back(v);
      }
      if (!consumers.empty()) b.senders.push_back({e, rng.Uniform(0, 6), consumers});
    }
    const int32_t k = static_cast<int32_t>(rng.Uniform(1, 3));
    b.classes = {Devices(k, 1.0, rng.Bernoulli(0.5) ? 12 : INT64_MAX)};
    const StageProblem p = b.Build();
    const std::optional<IdealLattice> lattice = IdealLattice::Enumerate(p, 1 << 20);
    ASSERT_TRUE(lattice.has_value());
    const StageSplit split = SolveIdeals(p, *lattice, *StateSpace::ClassCounts(p.classes), DpOptions());
    ASSERT_EQ(split.objective, BruteForce(p, k)) << "trial " << trial;
    if (split.objective == kInfeasible) continue;
    // The split is a partition into stages whose costs are at most the objective, in order.
    std::vector<int32_t> stage_of(n, -1);
    for (size_t s = 0; s < split.stages.size(); ++s) {
      EXPECT_LE(split.stages[s].cost, split.objective);
      for (int32_t e : split.stages[s].elements) {
        EXPECT_EQ(stage_of[e], -1);
        stage_of[e] = static_cast<int32_t>(s);
      }
    }
    for (int32_t e = 0; e < n; ++e) {
      ASSERT_NE(stage_of[e], -1);
      for (int32_t i = p.pred_offset[e]; i < p.pred_offset[e + 1]; ++i) EXPECT_LE(stage_of[p.pred[i]], stage_of[e]);
    }
    // A chain is a partial order too: both solvers agree on it.
    Builder chain = b;
    for (int32_t e = 0; e < n; ++e) chain.preds[e] = e == 0 ? std::vector<int32_t>{} : std::vector<int32_t>{e - 1};
    const StageProblem c = chain.Build();
    const std::optional<IdealLattice> chain_lattice = IdealLattice::Enumerate(c, 1 << 20);
    ASSERT_EQ(chain_lattice->num_ideals(), n + 1);
    EXPECT_EQ(SolveChain(c, *StateSpace::ClassCounts(c.classes), DpOptions()).objective,
              SolveIdeals(c, *chain_lattice, *StateSpace::ClassCounts(c.classes), DpOptions()).objective);
  }
}

TEST(StageDpTest, AnUpperBoundAtTheOptimumKeepsIt) {
  Builder b = Builder::Chain({3, 1, 4, 1, 5, 9, 2, 6});
  b.senders = {{1, 2, {2}}, {4, 1, {5}}};
  b.classes = {Devices(3)};
  const StageProblem p = b.Build();
  const StateSpace states = *StateSpace::ClassCounts(p.classes);
  const StageSplit free = SolveChain(p, states, DpOptions());
  DpOptions bounded;
  bounded.upper_bound = free.objective;
  const StageSplit pruned = SolveChain(p, states, bounded);
  EXPECT_EQ(pruned.objective, free.objective);
  EXPECT_LT(pruned.pairs_visited, free.pairs_visited);
}

TEST(StageDpTest, EvaluatorChargesEachCrossingSenderOnce) {
  // Sender 0 (in element 0) feeds elements 1 and 2; sender 1 (in element 1) feeds element 2.
  Builder b = Builder::Chain({0, 0, 0});
  b.senders = {{0, 5, {1, 2}}, {1, 7, {2}}};
  b.classes = {Devices(1)};
  const StageProblem p = b.Build();
  StageCostEvaluator eval(p);
  eval.Add(1);  // {1}: sender 0 comes in (5), sender 1 goes out (7)
  EXPECT_EQ(eval.transfers(), 12);
  eval.Add(2);  // {1, 2}: sender 0 comes in once (5), sender 1 is internal
  EXPECT_EQ(eval.transfers(), 5);
  eval.Add(0);  // everything inside: nothing crosses
  EXPECT_EQ(eval.transfers(), 0);
  eval.Remove(0);
  eval.Remove(2);
  EXPECT_EQ(eval.transfers(), 12);
  eval.Remove(1);
  EXPECT_EQ(eval.transfers(), 0);
  EXPECT_TRUE(eval.Empty());
}

TEST(IdealLatticeTest, CountsTheIdealsOfSmallOrders) {
  Builder antichain;
  for (int i = 0; i < 3; ++i) antichain.Add(1);
  EXPECT_EQ(IdealLattice::Enumerate(antichain.Build(), 100)->num_ideals(), 8);
  // A diamond a → b, a → c, b → d, c → d: {}, a, ab, ac, abc, abcd.
  Builder diamond;
  diamond.Add(1);
  diamond.Add(1, 0, {0});
  diamond.Add(1, 0, {0});
  diamond.Add(1, 0, {1, 2});
  const std::optional<IdealLattice> lattice = IdealLattice::Enumerate(diamond.Build(), 100);
  ASSERT_TRUE(lattice.has_value());
  EXPECT_EQ(lattice->num_ideals(), 6);
  EXPECT_TRUE(lattice->Contains(lattice->full(), 3));
  EXPECT_FALSE(IdealLattice::Enumerate(antichain.Build(), 7).has_value());
}

}  // namespace
}  // namespace placement::engine::stages
