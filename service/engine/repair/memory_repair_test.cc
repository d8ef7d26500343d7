#include "service/engine/repair/memory_repair.h"

#include <cstdint>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/engine/repair/test_model.h"
#include "service/engine/sim/constraints.h"
#include "service/engine/sim/simulator.h"

namespace placement::engine {
namespace {

using ::testing::HasSubstr;

TEST(MemoryRepairTest, AlreadyFittingAssignmentIsUntouched) {
  TestModel t;
  const int a = t.AddOp(100, 10), b = t.AddOp(100, 10);
  t.AddEdge(a, b, 10);
  t.AddDevices(2, 1000);
  const Model model = t.Build();
  Assignment assignment = {0, 0};
  const RepairOutcome outcome = RepairMemory(model, SolveContext(), assignment);
  EXPECT_TRUE(outcome.fits);
  EXPECT_EQ(outcome.moves, 0);
  EXPECT_EQ(assignment, (Assignment{0, 0}));
}

TEST(MemoryRepairTest, SpreadsPersistentStateOverDevices) {
  TestModel t;
  for (int i = 0; i < 4; ++i) t.AddOp(100, 0, /*persistent=*/40);
  t.AddDevices(2, 100);
  const Model model = t.Build();
  Assignment assignment(4, 0);
  const RepairOutcome outcome = RepairMemory(model, SolveContext(), assignment);
  ASSERT_TRUE(outcome.fits) << outcome.reason;
  Simulator sim(model);
  EXPECT_TRUE(sim.Run(assignment).MemoryFits(model));
  EXPECT_EQ(std::count(assignment.begin(), assignment.end(), 1), 2);
}

// 6 x 40 persistent bytes on two devices of 100: no placement fits, so nothing is moved and the outcome
// says why at once (the stage used to run all its rounds for nothing).
TEST(MemoryRepairTest, NothingMovesWhenNoPlacementCanFit) {
  TestModel t;
  for (int i = 0; i < 6; ++i) t.AddOp(100, 0, /*persistent=*/40);
  t.AddDevices(2, 100);
  const Model model = t.Build();
  Assignment assignment(6, 0);
  const RepairOutcome outcome = RepairMemory(model, SolveContext(), assignment);
  EXPECT_FALSE(outcome.fits);
  EXPECT_EQ(outcome.moves, 0);
  EXPECT_EQ(outcome.rounds, 0);
  EXPECT_EQ(outcome.overflow_bytes, 240 - 100);
  EXPECT_THAT(outcome.reason, HasSubstr("no placement fits"));
  EXPECT_EQ(assignment, Assignment(6, 0));
}

TEST(MemoryRepairTest, MovesTheFreeOpRatherThanCuttingAnExpensiveChain) {
  TestModel t;
  // A chain with heavy edges (cutting it costs 1 ms per edge) and an independent op of the same size.
  const int a = t.AddOp(1000, 0, 50), b = t.AddOp(1000, 0, 50), c = t.AddOp(1000, 0, 50);
  t.AddEdge(a, b, 1'000'000);
  t.AddEdge(b, c, 1'000'000);
  const int x = t.AddOp(1000, 0, 50);
  t.AddDevices(2, 160);
  const Model model = t.Build();
  Assignment assignment(4, 0);
  const RepairOutcome outcome = RepairMemory(model, SolveContext(), assignment);
  ASSERT_TRUE(outcome.fits) << outcome.reason;
  EXPECT_EQ(assignment[x], 1);
  EXPECT_EQ(assignment[a], 0);
  EXPECT_EQ(assignment[b], 0);
  EXPECT_EQ(assignment[c], 0);
}

TEST(MemoryRepairTest, OverflowOfActivationsAtThePeakIsRepaired) {
  // Two independent forward/backward pairs: each forward output lives until its backward op; on one
  // device both activations overlap at the peak.
  TestModel t;
  const int f1 = t.AddOp(100, 60), f2 = t.AddOp(100, 60);
  const int b1 = t.AddOp(100, 0), b2 = t.AddOp(100, 0);
  t.AddEdge(f1, b1, 60);
  t.AddEdge(f2, b2, 60);
  t.AddDevices(2, 100);
  const Model model = t.Build();
  Assignment assignment(4, 0);
  Simulator sim(model);
  ASSERT_FALSE(sim.Run(assignment).MemoryFits(model));
  const RepairOutcome outcome = RepairMemory(model, SolveContext(), assignment);
  ASSERT_TRUE(outcome.fits) << outcome.reason;
  EXPECT_TRUE(sim.Run(assignment).MemoryFits(model));
}

TEST(MemoryRepairTest, ColocationGroupsMoveTogetherAndPinsStay) {
  TestModel t;
  const int p = t.AddOp(100, 0, 60);
  const int g1 = t.AddOp(100, 0, 30), g2 = t.AddOp(100, 0, 30);
  t.Colocate(g1, "g");
  t.Colocate(g2, "g");
  t.Pin(p, 0);
  t.AddDevices(2, 100);
  const Model model = t.Build();
  Assignment assignment(3, 0);
  const RepairOutcome outcome = RepairMemory(model, SolveContext(), assignment);
  ASSERT_TRUE(outcome.fits) << outcome.reason;
  EXPECT_EQ(assignment[p], 0);
  EXPECT_EQ(assignment[g1], 1);
  EXPECT_EQ(assignment[g2], 1);
  EXPECT_TRUE(CheckConstraints(model, assignment).empty());
}

// Three ops of 60 persistent bytes on two devices of 100: 180 bytes would fit both together, but one
// device must hold two of them.
TEST(MemoryRepairTest, ImpossibleCaseReportsDeviceTimeAndBytesShort) {
  TestModel t;
  for (int i = 0; i < 3; ++i) t.AddOp(100, 0, 60);
  t.AddDevices(2, 100);
  const Model model = t.Build();
  Assignment assignment(3, 0);
  const RepairOutcome outcome = RepairMemory(model, SolveContext(), assignment);
  EXPECT_FALSE(outcome.fits);
  EXPECT_THAT(outcome.reason, HasSubstr("bytes short"));
  EXPECT_THAT(outcome.reason, HasSubstr("dev"));
  EXPECT_THAT(outcome.reason, HasSubstr("t="));
  EXPECT_EQ(outcome.overflow_bytes, 20);  // the best it can do: 120 on one device, 60 on the other
}

TEST(MemoryRepairTest, StopsAtTheDeadline) {
  TestModel t;
  for (int i = 0; i < 3; ++i) t.AddOp(100, 0, 60);
  t.AddDevices(2, 100);
  const Model model = t.Build();
  SolveContext context;
  context.deadline = absl::InfinitePast();
  Assignment assignment(3, 0);
  const RepairOutcome outcome = RepairMemory(model, context, assignment);
  EXPECT_FALSE(outcome.fits);
  EXPECT_TRUE(outcome.time_limited);
  EXPECT_EQ(outcome.rounds, 1);
}

TEST(MemoryRepairTest, RandomLayeredGraphsEndFeasibleWhenRoomIsAmple) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 10; ++trial) {
    TestModel t;
    const int layers = 6, width = 5;
    for (int l = 0; l < layers; ++l) {
      for (int i = 0; i < width; ++i) {
        const int v = t.AddOp(1000 + static_cast<int64_t>(rng() % 5000), 1000 + rng() % 4000,
                              rng() % 3000, rng() % 500);
        if (l > 0) {
          for (int k = 0; k < 2; ++k) {
            t.AddEdge((l - 1) * width + static_cast<int>(rng() % width), v, 1000 + rng() % 4000);
          }
        }
      }
    }
    t.AddDevices(4, 1);  // replaced below
    const Model probe = t.Build();
    Assignment all_on_zero(probe.num_ops(), 0);
    Simulator sim(probe);
    const int64_t peak = sim.Run(all_on_zero).peak_memory_bytes[0];
    // Capacity: 40% of the single-device peak per device, 4 devices.
    for (int d = 0; d < 4; ++d) t.cluster().mutable_devices(d)->set_memory_bytes(peak * 4 / 10);
    const Model model = t.Build();
    Assignment assignment(model.num_ops(), 0);
    const RepairOutcome outcome = RepairMemory(model, SolveContext(), assignment);
    Simulator check(model);
    const SimResult& r = check.Run(assignment);
    EXPECT_EQ(outcome.fits, r.MemoryFits(model)) << "trial " << trial;
    EXPECT_TRUE(outcome.fits) << "trial " << trial << ": " << outcome.reason;
    EXPECT_LT(outcome.rounds, RepairOptions().max_rounds);
  }
}

// The shortcuts (RepairOptions::reuse_move_estimates, bound_room_checks) only skip work whose result
// is known: with and without them every round takes the same moves, on graphs where the targets fill
// up (2 devices, each 0.35-0.55 of the one-device peak) so that most room checks fail.
TEST(MemoryRepairTest, ShortcutsChangeNoMoveAndSaveWork) {
  std::mt19937_64 rng(23);
  RepairOutcome total_with, total_without;
  int differing_fits = 0;
  for (int trial = 0; trial < 12; ++trial) {
    TestModel t;
    const int layers = 10, width = 8;
    for (int l = 0; l < layers; ++l) {
      for (int i = 0; i < width; ++i) {
        const int v = t.AddOp(1000 + static_cast<int64_t>(rng() % 5000), 500 + rng() % 4000,
                              rng() % 2000, rng() % 500);
        if (l > 0) {
          for (int k = 0; k < 2; ++k) {
            t.AddEdge((l - 1) * width + static_cast<int>(rng() % width), v, 500 + rng() % 4000);
          }
        }
      }
    }
    const int devices = 2 + trial % 2;
    t.AddDevices(devices, 1);  // replaced below
    const Model probe = t.Build();
    Simulator sim(probe);
    const int64_t peak = sim.Run(Assignment(probe.num_ops(), 0)).peak_memory_bytes[0];
    const int64_t percent = 35 + 5 * (trial % 5);
    for (int d = 0; d < devices; ++d) {
      t.cluster().mutable_devices(d)->set_memory_bytes(peak * percent / 100 * 2 / devices);
    }
    const Model model = t.Build();
    RepairOptions plain;
    plain.reuse_move_estimates = false;
    plain.bound_room_checks = false;
    RepairOptions quick;
    quick.target_fill = trial < 6 ? 0.98 : 1.0;
    plain.target_fill = quick.target_fill;
    Assignment a_plain(model.num_ops(), 0), a_quick(model.num_ops(), 0);
    const RepairOutcome without = RepairMemory(model, SolveContext(), plain, a_plain);
    const RepairOutcome with = RepairMemory(model, SolveContext(), quick, a_quick);
    EXPECT_EQ(a_quick, a_plain) << "trial " << trial;
    EXPECT_EQ(with.fits, without.fits) << "trial " << trial;
    EXPECT_EQ(with.moves, without.moves) << "trial " << trial;
    EXPECT_EQ(with.rounds, without.rounds) << "trial " << trial;
    EXPECT_EQ(with.overflow_bytes, without.overflow_bytes) << "trial " << trial;
    EXPECT_EQ(with.makespan_ns, without.makespan_ns) << "trial " << trial;
    EXPECT_LE(with.move_estimates, without.move_estimates) << "trial " << trial;
    EXPECT_LE(with.room_checks, without.room_checks) << "trial " << trial;
    total_with.move_estimates += with.move_estimates;
    total_with.room_checks += with.room_checks;
    total_without.move_estimates += without.move_estimates;
    total_without.room_checks += without.room_checks;
    differing_fits += with.fits ? 0 : 1;
  }
  // The work saved is real: most estimates are reused; fewer room checks (the bound bites where a
  // target is nearly full and the units are small, see the next test).
  EXPECT_LT(total_with.move_estimates * 10, total_without.move_estimates * 7)
      << total_with.move_estimates << " vs " << total_without.move_estimates;
  EXPECT_LT(total_with.room_checks, total_without.room_checks);
  // Some cases stay infeasible (the stuck rounds run too) and some fit.
  EXPECT_GT(differing_fits, 0);
  EXPECT_LT(differing_fits, 12);
}

// Device 1 is 99 % full with pinned state; device 0 holds 112 small units of 900 bytes (under 1 % of
// a device) and is 800 bytes over. Every ordinary move to device 1 surely leaves it without room
// (above the 98 % fill) and cannot lower the total overflow (it adds more there than it frees here):
// the bound rules each one out without touching the trees. The stuck pass then forces one unit over,
// which fits both devices (99,900 bytes each).
TEST(MemoryRepairTest, FullTargetIsRuledOutWithoutRoomChecks) {
  TestModel t;
  const int pinned = t.AddOp(100, 0, 99000);
  t.Pin(pinned, 1);
  for (int i = 0; i < 112; ++i) {
    const int v = t.AddOp(100, 0, 900);
    if (i > 0) t.AddEdge(v - 1, v, 10);
  }
  t.AddDevices(2, 100000);
  const Model model = t.Build();
  Assignment start(model.num_ops(), 0);
  start[pinned] = 1;
  RepairOptions plain;
  plain.bound_room_checks = false;
  RepairOptions quick;
  Assignment a_plain = start, a_quick = start;
  const RepairOutcome without = RepairMemory(model, SolveContext(), plain, a_plain);
  const RepairOutcome with = RepairMemory(model, SolveContext(), quick, a_quick);
  ASSERT_TRUE(with.fits) << with.reason;
  EXPECT_EQ(with.moves, 1);
  EXPECT_EQ(a_quick, a_plain);
  EXPECT_EQ(with.rounds, without.rounds);
  EXPECT_EQ(with.makespan_ns, without.makespan_ns);
  // Without the bound every unit of the first pass is charged and rolled back (112), then the forced
  // move; with it, only the forced move is.
  EXPECT_GE(without.room_checks, 113);
  EXPECT_EQ(with.room_checks, 1);
}

}  // namespace
}  // namespace placement::engine
