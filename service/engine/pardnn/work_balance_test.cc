#include "service/engine/pardnn/work_balance.h"

#include <cstdint>

#include "gtest/gtest.h"
#include "service/engine/repair/test_model.h"
#include "service/engine/sim/placement_score.h"
#include "service/engine/sim/simulator.h"

namespace placement::engine::pardnn {
namespace {

// Device 0 runs 20 independent 1 ms ops that hold nothing and two that hold 1 MB each; device 1 holds
// eight 1 MB ops of 0.1 ms and has room for one more megabyte (capacity 9.5 MB). The step is the
// queue on device 0 (22 ms), device 1 is idle but nearly full.
struct Lopsided {
  Model model;
  Assignment assignment;
};
Lopsided LopsidedStep() {
  TestModel t;
  Assignment a;
  for (int i = 0; i < 20; ++i) {
    t.AddOp(1'000'000);
    a.push_back(0);
  }
  for (int i = 0; i < 2; ++i) {
    t.AddOp(1'000'000, 0, 1'000'000);
    a.push_back(0);
  }
  for (int i = 0; i < 8; ++i) {
    t.AddOp(100'000, 0, 1'000'000);
    a.push_back(1);
  }
  t.AddDevices(2, 9'500'000);
  return {t.Build(), a};
}

TEST(WorkBalanceTest, MovesMemoryLightWorkOffTheBusiestDevice) {
  Lopsided step = LopsidedStep();
  Simulator sim(step.model);
  const PlacementScore before = ScoreSimulation(step.model, sim.Run(step.assignment));
  ASSERT_TRUE(before.Fits());
  ASSERT_EQ(before.makespan_ns, 22'000'000);
  WorkBalanceOptions options;
  options.max_simulations = 16;
  const WorkBalanceResult r = BalanceWork(step.model, options, SolveContext(), sim, step.assignment);
  EXPECT_LE(r.simulations, 16);
  EXPECT_GE(r.batches, 1);
  EXPECT_EQ(r.overflow_bytes, 0);
  // Balanced within a unit: 22 + 0.8 ms of work over two devices.
  EXPECT_LE(r.makespan_ns, 12'000'000);
  const PlacementScore after = ScoreSimulation(step.model, sim.Run(step.assignment));
  EXPECT_EQ(after.makespan_ns, r.makespan_ns);
  EXPECT_TRUE(after.Fits());
  // The units holding state rank last (device 1 has room for one of them only): they stay.
  EXPECT_EQ(step.assignment[20], 0);
  EXPECT_EQ(step.assignment[21], 0);
}

TEST(WorkBalanceTest, IsDeterministicAndRespectsTheBudget) {
  Lopsided first = LopsidedStep(), second = LopsidedStep();
  Simulator sim(first.model);
  WorkBalanceOptions options;
  options.max_simulations = 3;
  const WorkBalanceResult a = BalanceWork(first.model, options, SolveContext(), sim, first.assignment);
  const WorkBalanceResult b = BalanceWork(second.model, options, SolveContext(), sim, second.assignment);
  EXPECT_LE(a.simulations, 3);
  EXPECT_EQ(first.assignment, second.assignment);
  EXPECT_EQ(a.makespan_ns, b.makespan_ns);
  EXPECT_LT(a.makespan_ns, 22'000'000);
}

TEST(WorkBalanceTest, LeavesAStepThePathBoundsAsItIs) {
  // A chain on device 0: its device is busy the whole step, but moving links of it only adds
  // transfers. Nothing is kept that is not better.
  TestModel t;
  for (int i = 0; i < 10; ++i) t.AddOp(1'000'000, 1'000'000);
  for (int i = 0; i + 1 < 10; ++i) t.AddEdge(i, i + 1, 1'000'000);
  t.AddDevices(2, 1 << 30);
  t.SetLink(10'000'000'000, 0);  // 0.1 ms per cut: cheaper than an op, so candidates exist
  const Model model = t.Build();
  Assignment a(model.num_ops(), 0);
  const Assignment before = a;
  Simulator sim(model);
  const WorkBalanceResult r = BalanceWork(model, WorkBalanceOptions(), SolveContext(), sim, a);
  EXPECT_EQ(a, before);
  EXPECT_EQ(r.makespan_ns, 10'000'000);
  EXPECT_EQ(r.batches, 0);
}

TEST(WorkBalanceTest, ABalancedStepCostsOneSimulation) {
  TestModel t;
  for (int i = 0; i < 4; ++i) t.AddOp(1'000'000);
  t.AddDevices(2, 1 << 30);
  const Model model = t.Build();
  Assignment a = {0, 1, 0, 1};
  Simulator sim(model);
  const WorkBalanceResult r = BalanceWork(model, WorkBalanceOptions(), SolveContext(), sim, a);
  EXPECT_EQ(r.simulations, 1);
  EXPECT_EQ(a, (Assignment{0, 1, 0, 1}));
  EXPECT_EQ(r.makespan_ns, 2'000'000);
}

TEST(WorkBalanceTest, ColocatedOpsMoveTogetherAndPinsStay) {
  // Four 1 ms ops on device 0: two colocated, one pinned there. Whatever moves, the group stays
  // whole and the pinned op stays.
  TestModel t;
  for (int i = 0; i < 4; ++i) t.AddOp(1'000'000);
  t.Colocate(0, "g");
  t.Colocate(1, "g");
  t.Pin(3, 0);
  t.AddDevices(2, 1 << 30);
  const Model model = t.Build();
  Assignment a(model.num_ops(), 0);
  Simulator sim(model);
  const WorkBalanceResult r = BalanceWork(model, WorkBalanceOptions(), SolveContext(), sim, a);
  EXPECT_EQ(a[0], a[1]);
  EXPECT_EQ(a[3], 0);
  EXPECT_EQ(r.makespan_ns, 2'000'000);  // the group (2 ms) on one device, the other two on the other
}

TEST(WorkBalanceTest, StopsAtTheDeadline) {
  Lopsided step = LopsidedStep();
  const Assignment before = step.assignment;
  Simulator sim(step.model);
  SolveContext context;
  context.deadline = absl::InfinitePast();
  const WorkBalanceResult r = BalanceWork(step.model, WorkBalanceOptions(), context, sim, step.assignment);
  EXPECT_TRUE(r.time_limited);
  EXPECT_EQ(step.assignment, before);
}

}  // namespace
}  // namespace placement::engine::pardnn
