#include "service/engine/stages/stages_partitioner.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/engine/baselines/baselines_test_util.h"
#include "service/engine/baselines/placement_units.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/partition/reported_score_check.h"
#include "service/engine/plans/plan_model.h"
#include "service/engine/sim/constraints.h"
#include "service/engine/sim/simulator.h"
#include "service/engine/stages/chain_problem.h"
#include "tests/testutil/random_graph.h"

namespace placement::engine {
namespace {

using baselines::PlaceWith;
using baselines::ProblemBuilder;
using stages::OrderKind;
using ::testing::ElementsAre;

// A chain of `n` ops of `compute` ns passing `bytes` along, on `devices` devices of 1 GiB.
ProblemBuilder Chain(int n, int64_t compute, int64_t bytes, int devices) {
  ProblemBuilder p;
  for (int i = 0; i < n; ++i) p.AddOp(compute, bytes);
  for (int i = 0; i + 1 < n; ++i) p.AddEdge(i, i + 1, bytes);
  p.AddDevices(devices, int64_t{1} << 30);
  return p;
}

void SetPlan(ProblemBuilder& p, int32_t microbatches, int32_t window = 0) {
  p.request().mutable_options()->set_microbatches(microbatches);
  p.request().mutable_options()->set_max_in_flight(window);
}

// Number of runs of equal values along `devices`: 1 per device when every device's ops are contiguous.
int32_t Runs(const std::vector<DeviceId>& devices) {
  int32_t runs = 0;
  for (size_t i = 0; i < devices.size(); ++i) runs += i == 0 || devices[i] != devices[i - 1];
  return runs;
}

TEST(StagesTest, SplitsAChainAtTheBalancedCuts) {
  ProblemBuilder p = Chain(6, 100, 10, 3);
  const Model model = p.Build();
  const Assignment a = PlaceWith(*MakeStagesPartitioner(), model);
  // Three stages of two ops, each device once, in chain order.
  EXPECT_EQ(a[0], a[1]);
  EXPECT_EQ(a[2], a[3]);
  EXPECT_EQ(a[4], a[5]);
  EXPECT_EQ((std::set<DeviceId>{a[0], a[2], a[4]}.size()), 3u);
}

TEST(StagesTest, ChoosesTheCutWithTheSmallTensor) {
  // Four equal ops on two devices over a slow link: the middle tensor is huge, the outer ones tiny.
  // With transfers charged the DP cuts at a tiny tensor (after op 0 or before op 3: both leave a
  // three-op stage), never through the huge one; with 8 microbatches it would be sent 8 times a step.
  ProblemBuilder p;
  for (int i = 0; i < 4; ++i) p.AddOp(1'000'000, 0);
  p.AddEdge(0, 1, 1000);
  p.AddEdge(1, 2, 1'000'000'000);  // 1 s at 1 GB/s
  p.AddEdge(2, 3, 1000);
  p.AddDevices(2, int64_t{1} << 40);
  SetPlan(p, 8);
  const Model model = p.Build();
  const stages::StagePlan plan = stages::PlanStages(model, OrderKind::kLevels, true, 1);
  const Assignment& a = plan.assignment;
  EXPECT_EQ(a[1], a[2]);
  EXPECT_NE(a[0], a[3]);
  EXPECT_EQ(plan.stages, 2);
  // The partitioner's answer (simulated) never sends the huge tensor either.
  const Assignment best = PlaceWith(*MakeStagesPartitioner(), model);
  EXPECT_EQ(best[1], best[2]);
}

TEST(StagesTest, MemoryForcesADifferentCut) {
  // Time alone splits 2 + 2; op 0's weights take 95% of a device, so it must be alone on its device.
  ProblemBuilder p;
  p.AddOp(100, 0, 950);
  for (int i = 1; i < 4; ++i) p.AddOp(100, 0, 100);
  for (int i = 0; i + 1 < 4; ++i) p.AddEdge(i, i + 1, 10);
  p.AddDevices(2, 1000);
  ProblemBuilder roomy = p;
  roomy.op(0)->set_persistent_bytes(100);
  const Assignment balanced = PlaceWith(*MakeStagesPartitioner(), roomy.Build());
  EXPECT_EQ(balanced[0], balanced[1]);
  EXPECT_NE(balanced[1], balanced[2]);
  const Model model = p.Build();
  const Assignment a = PlaceWith(*MakeStagesPartitioner(), model);
  EXPECT_NE(a[0], a[1]);
  EXPECT_EQ(a[1], a[2]);
  EXPECT_EQ(a[2], a[3]);
  Simulator simulator(model);
  EXPECT_TRUE(simulator.Run(a).MemoryFits(model));
}

TEST(StagesTest, KeepsAColocationGroupThatSpansTheNaturalCut) {
  // Six equal ops on two devices: the natural cut is between op 2 and op 3, but ops 2 and 3 are one
  // group; the stages stay contiguous and move the cut to either side of the group.
  ProblemBuilder p = Chain(6, 100, 10, 2);
  p.Colocate(2, "g");
  p.Colocate(3, "g");
  const Model model = p.Build();
  const Assignment a = PlaceWith(*MakeStagesPartitioner(), model);
  EXPECT_EQ(a[2], a[3]);
  EXPECT_TRUE(CheckConstraints(model, a).empty());
  EXPECT_EQ(Runs(std::vector<DeviceId>(a.begin(), a.end())), 2);
}

TEST(StagesTest, HonoursPinsAndKinds) {
  ProblemBuilder p;
  for (int i = 0; i < 6; ++i) p.AddOp(100, 10);
  for (int i = 0; i + 1 < 6; ++i) p.AddEdge(i, i + 1, 10);
  p.AddDevice(1 << 20, 1.0, "gpu");
  p.AddDevice(1 << 20, 1.0, "gpu");
  p.AddDevice(1 << 20, 1.0, "cpu");
  p.Pin(0, 1);           // the first op on dev1
  p.AllowKind(5, "cpu");  // the last op on the cpu
  const Model model = p.Build();
  const Assignment a = PlaceWith(*MakeStagesPartitioner(), model);
  EXPECT_TRUE(CheckConstraints(model, a).empty());
  EXPECT_EQ(a[0], 1);
  EXPECT_EQ(a[5], 2);
}

TEST(StagesTest, GivesTheFasterDeviceTheHeavierStage) {
  ProblemBuilder p;
  for (int i = 0; i < 6; ++i) p.AddOp(100);
  for (int i = 0; i + 1 < 6; ++i) p.AddEdge(i, i + 1, 10);
  p.AddDevice(int64_t{1} << 30, 1.0);
  p.AddDevice(int64_t{1} << 30, 2.0);
  SetPlan(p, 8);
  const Model model = p.Build();
  const Assignment a = stages::PlanStages(model, OrderKind::kLevels, true, 1).assignment;
  // 4 ops at speed 2 (200 ns) and 2 at speed 1 (200 ns) per microbatch.
  EXPECT_EQ(std::count(a.begin(), a.end(), 1), 4);
  EXPECT_EQ(Runs(std::vector<DeviceId>(a.begin(), a.end())), 2);
  // Whatever variant the simulator prefers, the fast device does two thirds of the work.
  const Assignment best = PlaceWith(*MakeStagesPartitioner(), model);
  EXPECT_EQ(std::count(best.begin(), best.end(), 1), 4);
}

TEST(StagesTest, NeverSlowerThanOneDeviceOnAPipeline) {
  // A 24-op chain with small tensors, 16 microbatches: the pipeline must beat one device clearly.
  for (int devices : {2, 4, 8}) {
    ProblemBuilder p = Chain(24, 1'000'000, 1000, devices);
    SetPlan(p, 16, devices);
    const Model model = p.Build();
    Simulator simulator(model);
    const int64_t one = simulator.Run(Assignment(model.num_ops(), 0)).makespan_ns;
    const int64_t staged = simulator.Run(PlaceWith(*MakeStagesPartitioner(), model)).makespan_ns;
    EXPECT_LT(staged, one) << devices << " devices";
    // A pipeline of K stages of 24/K ms takes M + K - 1 stage times; within 10 % of that.
    const int64_t pipeline = int64_t{16 + devices - 1} * (24 / devices) * 1'000'000;
    EXPECT_LE(staged, pipeline * 11 / 10) << devices << " devices";
  }
}

TEST(StagesTest, SearchesEveryContiguousSplitOfSmallGraphs) {
  // Two parallel branches s → a1 → a2 → t and s → b1 → b2 → t, each tensor inside a branch huge. By
  // layers the order is s a1 b1 a2 b2 t and every cut of it goes through a branch; the split by
  // branch ({s, a1, a2} | {b1, b2, t}) is contiguous in the partial order but in no layer order.
  ProblemBuilder p;
  const int s = p.AddOp(0), a1 = p.AddOp(1'000'000), b1 = p.AddOp(1'000'000), a2 = p.AddOp(1'000'000),
            b2 = p.AddOp(1'000'000), t = p.AddOp(0);
  p.AddEdge(s, a1, 10);
  p.AddEdge(s, b1, 10);
  p.AddEdge(a1, a2, 1'000'000'000);
  p.AddEdge(b1, b2, 1'000'000'000);
  p.AddEdge(a2, t, 10);
  p.AddEdge(b2, t, 10);
  p.AddDevices(2, int64_t{1} << 40);
  SetPlan(p, 4);
  const Model model = p.Build();
  const stages::StagePlan chain = stages::PlanStages(model, OrderKind::kLevels, true, 1);
  const stages::StagePlan every = stages::PlanStages(model, OrderKind::kLevels, true, 1, 1024, /*exact=*/true);
  EXPECT_TRUE(every.exact);
  EXPECT_LT(every.objective, chain.objective);
  const Assignment& a = every.assignment;
  EXPECT_EQ(a[a1], a[a2]);
  EXPECT_EQ(a[b1], a[b2]);
  EXPECT_NE(a[a1], a[b1]);
  // The simulator agrees: the partitioner's answer keeps both huge tensors at home.
  const Assignment best = PlaceWith(*MakeStagesPartitioner(), model);
  EXPECT_EQ(best[a1], best[a2]);
  EXPECT_EQ(best[b1], best[b2]);
  EXPECT_NE(best[a1], best[b1]);
  // Without the exact search (a re-placement's stages, exact_search off) the split by branch is out of
  // reach: every stage cut crosses a branch's huge tensor.
  StagesOptions chains;
  chains.exact_search = false;
  const std::unique_ptr<Partitioner> chains_only = MakeStagesPartitioner(chains);
  EXPECT_EQ(chains_only->version(), "1-chains");
  const Assignment cut = PlaceWith(*chains_only, model);
  EXPECT_TRUE(cut[a1] != cut[a2] || cut[b1] != cut[b2] || cut[a1] == cut[b1]);
}

TEST(StagesTest, InterleavedStagesCycleOverTheDevices) {
  ProblemBuilder p = Chain(16, 100, 10, 2);
  SetPlan(p, 8, 2);
  const Model model = p.Build();
  const stages::StagePlan plan = stages::PlanStages(model, OrderKind::kLevels, false, 2);
  EXPECT_EQ(plan.stages, 4);
  // Four stages of four ops alternating between the two devices.
  const Assignment& a = plan.assignment;
  EXPECT_EQ(Runs(std::vector<DeviceId>(a.begin(), a.end())), 4);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(a[i], a[(i / 4) % 2 * 4]) << i;
  EXPECT_NE(a[0], a[4]);
}

// A small training step: a chain of layers forward (with weights, a parameter op each), a loss, the
// mirrored backward chain reading saved activations, and once-per-step updates of the parameters.
ProblemBuilder TrainingStep(int layers, int devices) {
  ProblemBuilder p;
  std::vector<int> forward, backward, params;
  for (int l = 0; l < layers; ++l) {
    params.push_back(p.AddOp(0, 0, /*persistent_bytes=*/1000));
    p.Colocate(params.back(), "param" + std::to_string(l));
  }
  for (int l = 0; l < layers; ++l) {
    forward.push_back(p.AddOp(1000, 100));
    p.AddEdge(params[l], forward[l], 1000);
    if (l > 0) p.AddEdge(forward[l - 1], forward[l], 100);
  }
  const int loss = p.AddOp(100, 10);
  p.AddEdge(forward.back(), loss, 100);
  backward.assign(layers, 0);
  for (int l = layers - 1; l >= 0; --l) {
    backward[l] = p.AddOp(2000, 100);
    p.AddEdge(l == layers - 1 ? loss : backward[l + 1], backward[l], 100);
    p.AddEdge(forward[l], backward[l], 100);  // saved activation
    p.AddEdge(params[l], backward[l], 1000);
  }
  for (int l = 0; l < layers; ++l) {
    const int update = p.AddOp(500, 0);
    p.op(update)->set_once_per_step(true);
    p.Colocate(update, "param" + std::to_string(l));
    p.AddEdge(backward[l], update, 1000);  // the gradient
    p.AddEdge(params[l], update, 0);
  }
  p.AddDevices(devices, int64_t{1} << 30);
  SetPlan(p, 16, devices);
  return p;
}

TEST(StagesTest, FoldsATrainingStepSoThatLayersKeepTheirBackwardWork) {
  // With 8 layers on 4 devices, the folded order gives each device two layers forward and backward
  // with their parameters and updates; the level order would put the backward pass on the last
  // devices. The simulator must prefer the fold.
  const Model model = TrainingStep(8, 4).Build();
  const stages::StagePlan folded = stages::PlanStages(model, OrderKind::kFolded, false, 1);
  for (int l = 0; l < 8; ++l) {
    const DeviceId forward = folded.assignment[8 + l];
    const DeviceId backward = folded.assignment[8 + 8 + 1 + (7 - l)];
    EXPECT_EQ(forward, backward) << "layer " << l;
    EXPECT_EQ(folded.assignment[l], forward) << "parameter of layer " << l;
  }
  Simulator simulator(model);
  const int64_t one = simulator.Run(Assignment(model.num_ops(), 0)).makespan_ns;
  const Assignment best = PlaceWith(*MakeStagesPartitioner(), model);
  EXPECT_TRUE(CheckConstraints(model, best).empty());
  const int64_t step = simulator.Run(best).makespan_ns;
  EXPECT_LE(step, simulator.Run(folded.assignment).makespan_ns);
  EXPECT_LT(step * 2, one);  // at least 2x on 4 devices
}

TEST(StagesTest, RandomDagsGetCompleteContiguousAnswersThatHonourEveryConstraint) {
  for (int seed = 1; seed <= 12; ++seed) {
    testutil::RandomGraphOptions options;
    options.num_ops = 40 + 37 * seed;
    options.num_devices = 2 + seed % 5;
    options.num_nodes = 1 + seed % 2;
    options.colocation_fraction = 0.2;
    options.pinned_fraction = 0.02;
    options.kind_restricted_fraction = seed % 3 == 0 ? 0.05 : 0.0;
    options.device_kinds = seed % 3 == 0 ? std::vector<std::string>{"gpu", "cpu"} : std::vector<std::string>{"gpu"};
    options.heterogeneous_speeds = seed % 2 == 0;
    options.seed = seed;
    v1::PlaceRequest request = testutil::RandomLayeredRequest(options);
    request.mutable_options()->set_microbatches(1 + seed % 5);
    absl::StatusOr<Model> built = BuildModel(request);
    ASSERT_TRUE(built.ok()) << built.status();
    const Model& model = *built;
    const Assignment a = PlaceWith(*MakeStagesPartitioner(), model);
    ASSERT_EQ(static_cast<int32_t>(a.size()), model.num_ops());
    for (const DeviceId d : a) ASSERT_TRUE(d >= 0 && d < model.num_devices());
    EXPECT_TRUE(CheckConstraints(model, a).empty()) << "seed " << seed;
    // Each plan's stages are contiguous in its order: along the order, every device's units form one
    // run. Units with pins or kinds are left out: where contiguous stages cannot honour them they go
    // to an allowed device afterwards.
    const baselines::PlacementUnits units = baselines::BuildPlacementUnits(model);
    for (const OrderKind order : {OrderKind::kLevels, OrderKind::kFolded}) {
      const stages::StagePlan plan = stages::PlanStages(model, order, true, 1);
      const std::vector<ConstraintProblem> problems = CheckConstraints(model, plan.assignment);
      EXPECT_TRUE(problems.empty()) << "seed " << seed << ": " << (problems.empty() ? "" : problems[0].description);
      const stages::ChainElements chain = stages::BuildChainElements(model, units, order, 2048);
      std::vector<DeviceId> along;
      for (const int32_t u : chain.unit_order) {
        if (!units.Constrained(u)) along.push_back(plan.assignment[units.member[units.begin(u)]]);
      }
      std::set<DeviceId> distinct(along.begin(), along.end());
      EXPECT_EQ(Runs(along), static_cast<int32_t>(distinct.size())) << "seed " << seed;
      EXPECT_LE(static_cast<int32_t>(distinct.size()), model.num_devices());
    }
  }
}

TEST(StagesTest, SameProblemInAnyOpOrderGivesTheSameAnswer) {
  testutil::RandomGraphOptions options;
  options.num_ops = 300;
  options.num_devices = 4;
  options.colocation_fraction = 0.1;
  options.seed = 5;
  const v1::PlaceRequest request = testutil::RandomLayeredRequest(options);
  const v1::PlaceRequest shuffled = testutil::ShuffleRequest(request, 9);
  const Model a = *BuildModel(request);
  const Model b = *BuildModel(shuffled);
  const Assignment x = PlaceWith(*MakeStagesPartitioner(), a);
  const Assignment y = PlaceWith(*MakeStagesPartitioner(), b);
  EXPECT_EQ(x, y);  // canonical ids follow names, not the request order
}

// The score a stages result reports is what simulating its assignment gives: `auto` takes it.
TEST(StagesTest, ReportsTheScoreOfItsOwnSimulation) {
  int windowed = 0;
  ExpectReportedScoresMatchASimulation(*MakeStagesPartitioner(), &windowed);
  EXPECT_GT(windowed, 0);  // where the solver chooses W, stages chooses it and says with what score
}

// Candidates skipped because their own lower bound is above the best fitting step change nothing: on
// random DAGs and training steps with plans, the answer, its window and its scores are the same with
// and without the skip, and the cases include ones where some candidate's bound is above the answer.
TEST(StagesTest, SkippingCandidatesThatCannotWinChangesNothing) {
  StagesOptions no_skip;
  no_skip.skip_by_bound = false;
  const std::unique_ptr<Partitioner> with_skip = MakeStagesPartitioner();
  const std::unique_ptr<Partitioner> without_skip = MakeStagesPartitioner(no_skip);
  int cases_with_a_losing_bound = 0;
  for (int seed = 1; seed <= 12; ++seed) {
    v1::PlaceRequest request;
    if (seed % 3 == 0) {
      ProblemBuilder p = TrainingStep(6 + seed, 2 + seed % 4);
      request = p.request();
    } else {
      testutil::RandomGraphOptions options;
      options.num_ops = 60 + 31 * seed;
      options.num_devices = 2 + seed % 5;
      options.colocation_fraction = 0.1;
      options.heterogeneous_speeds = seed % 2 == 0;
      options.seed = seed;
      request = testutil::RandomLayeredRequest(options);
    }
    request.mutable_options()->set_microbatches(1 + seed % 6);
    request.mutable_options()->set_max_in_flight(0);  // the solver chooses W
    absl::StatusOr<Model> built = BuildModel(request);
    ASSERT_TRUE(built.ok()) << built.status();
    const PlanModel plan_model(*built, 1);
    const Model& model = plan_model.model();
    absl::StatusOr<PartitionResult> a = with_skip->Partition(model, SolveContext());
    absl::StatusOr<PartitionResult> b = without_skip->Partition(model, SolveContext());
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->assignment, b->assignment) << "seed " << seed;
    EXPECT_EQ(a->max_in_flight, b->max_in_flight) << "seed " << seed;
    ASSERT_TRUE(a->simulated && b->simulated);
    EXPECT_EQ(a->simulated->makespan_ns, b->simulated->makespan_ns) << "seed " << seed;
    const int64_t answer = a->simulated->makespan_ns;
    for (const OrderKind order : {OrderKind::kLevels, OrderKind::kFolded}) {
      for (const bool charge : {true, false}) {
        const stages::StagePlan plan = stages::PlanStages(model, order, charge, 1);
        if (AssignedLowerBoundNs(model, plan.assignment) > answer) {
          ++cases_with_a_losing_bound;
        }
      }
    }
  }
  EXPECT_GT(cases_with_a_losing_bound, 0);
}

}  // namespace
}  // namespace placement::engine
