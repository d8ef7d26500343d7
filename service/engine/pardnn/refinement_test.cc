#include "service/engine/pardnn/refinement.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "service/engine/repair/test_model.h"
#include "service/engine/sim/simulator.h"

namespace placement::engine::pardnn {
namespace {

Model SplitChain(int64_t persistent_bytes, int64_t memory_bytes, int64_t edge_bytes = 1'000'000) {
  TestModel t;
  for (int i = 0; i < 6; ++i) t.AddOp(1000, 0, persistent_bytes);
  for (int i = 0; i + 1 < 6; ++i) t.AddEdge(i, i + 1, edge_bytes);  // 1 ms per cut at 1 GB/s
  t.AddDevices(2, memory_bytes);
  t.SetLink(1'000'000'000, 0);
  return t.Build();
}

TEST(RefinementTest, JoinsAChainCutAcrossDevices) {
  const Model model = SplitChain(0, 1 << 20);
  Assignment a = {0, 1, 0, 1, 0, 1};
  Simulator sim(model);
  const int64_t before = sim.Run(a).makespan_ns;
  const RefinementResult r = RefineAlongCriticalPath(model, RefinementOptions(), SolveContext(), sim, a);
  EXPECT_LT(r.makespan_ns, before);
  EXPECT_EQ(r.makespan_ns, 6000);  // the whole chain on one device, no transfer
  EXPECT_EQ(sim.Run(a).makespan_ns, r.makespan_ns);
  EXPECT_TRUE(r.local_optimum);
}

TEST(RefinementTest, KeepsAFeasibleAssignmentFeasible) {
  // Each op holds 1 MB for the whole step; a device takes 3 ops (and a 0.1 MB received copy) at most.
  const Model model = SplitChain(1'000'000, 3'200'000, /*edge_bytes=*/100'000);
  Assignment a = {0, 0, 0, 1, 1, 1};
  Simulator sim(model);
  const RefinementResult r = RefineAlongCriticalPath(model, RefinementOptions(), SolveContext(), sim, a);
  EXPECT_EQ(r.overflow_bytes, 0);
  EXPECT_TRUE(sim.Run(a).MemoryFits(model));
  EXPECT_EQ(r.makespan_ns, 6000 + 100'000);  // one cut is unavoidable
}

TEST(RefinementTest, RespectsTheSimulationBudget) {
  const Model model = SplitChain(0, 1 << 20);
  Assignment a = {0, 1, 0, 1, 0, 1};
  Simulator sim(model);
  RefinementOptions options;
  options.max_simulations = 3;
  const RefinementResult r = RefineAlongCriticalPath(model, options, SolveContext(), sim, a);
  EXPECT_LE(r.simulations, 3);
  EXPECT_FALSE(r.local_optimum);
  EXPECT_EQ(sim.Run(a).makespan_ns, r.makespan_ns);
}

TEST(RefinementTest, StopsAtTheDeadline) {
  const Model model = SplitChain(0, 1 << 20);
  Assignment a = {0, 1, 0, 1, 0, 1};
  const Assignment before = a;
  Simulator sim(model);
  SolveContext context;
  context.deadline = absl::InfinitePast();
  const RefinementResult r = RefineAlongCriticalPath(model, RefinementOptions(), context, sim, a);
  EXPECT_TRUE(r.time_limited);
  EXPECT_EQ(r.moves, 0);
  EXPECT_EQ(a, before);
}

TEST(RefinementTest, MovesAWaitingOpToAnIdleDevice) {
  // Two independent heavy ops on one device: one waits for the other; moving it halves the step.
  TestModel t;
  t.AddOp(1'000'000);
  t.AddOp(1'000'000);
  t.AddDevices(2, 1 << 20);
  const Model model = t.Build();
  Assignment a = {0, 0};
  Simulator sim(model);
  const RefinementResult r = RefineAlongCriticalPath(model, RefinementOptions(), SolveContext(), sim, a);
  EXPECT_EQ(r.makespan_ns, 1'000'000);
  EXPECT_NE(a[0], a[1]);
}

// Two independent chains of four 1 ms ops run interleaved on one device (8 ms); each edge inside a
// chain carries 5 ms of transfer. Any one op moved alone pays 5 ms in or out for 1 ms taken off the
// device, so no single-op move helps; the chain moved whole halves the step. Only the branch moves
// find it (the kicks between local searches, which could stumble on it, are off here).
TEST(RefinementTest, BranchMovesTakeAWholeChainOffABusyDevice) {
  TestModel t;
  for (int chain = 0; chain < 2; ++chain) {
    for (int i = 0; i < 4; ++i) {
      const int op = t.AddOp(1'000'000);
      if (i > 0) t.AddEdge(op - 1, op, 5'000'000);  // 5 ms at 1 GB/s
    }
  }
  t.AddDevices(2, 1 << 20);
  const Model model = t.Build();
  Simulator sim(model);
  RefinementOptions options;
  options.max_restarts = 0;
  Assignment without = Assignment(8, 0);
  EXPECT_EQ(RefineAlongCriticalPath(model, options, SolveContext(), sim, without).makespan_ns, 8'000'000);
  EXPECT_EQ(without, Assignment(8, 0));
  options.branch_moves = true;
  Assignment with = Assignment(8, 0);
  const RefinementResult r = RefineAlongCriticalPath(model, options, SolveContext(), sim, with);
  EXPECT_EQ(r.makespan_ns, 4'000'000);
  EXPECT_EQ(sim.Run(with).makespan_ns, 4'000'000);
  // One chain, whole, on the idle device.
  EXPECT_TRUE(with == (Assignment{0, 0, 0, 0, 1, 1, 1, 1}) || with == (Assignment{1, 1, 1, 1, 0, 0, 0, 0}));
  // With batches (large graphs) the chain goes to the least busy device, in a batch of its own.
  options.batch_moves = 4;
  Assignment batched = Assignment(8, 0);
  EXPECT_EQ(RefineAlongCriticalPath(model, options, SolveContext(), sim, batched).makespan_ns, 4'000'000);
}

TEST(RefinementTest, ColocatedOpsMoveTogetherAndPinsStay) {
  TestModel t;
  const int a = t.AddOp(1000), b = t.AddOp(1000), c = t.AddOp(1000);
  t.AddEdge(a, b, 1'000'000);
  t.AddEdge(b, c, 1'000'000);
  t.Colocate(b, "g");
  t.Colocate(c, "g");
  t.Pin(a, 0);
  t.AddDevices(2, 1 << 20);
  t.SetLink(1'000'000'000, 0);
  const Model model = t.Build();
  Assignment assignment = {0, 1, 1};
  Simulator sim(model);
  RefineAlongCriticalPath(model, RefinementOptions(), SolveContext(), sim, assignment);
  EXPECT_EQ(assignment, (Assignment{0, 0, 0}));
}

// 64 independent ops of 1 ms, all on device 0 of four: a load-bound step whose critical path is the
// queue on device 0. Moving a single op per simulation needs dozens of simulations; batches move many.
Model QueuedOnOneDevice(int ops) {
  TestModel t;
  for (int i = 0; i < ops; ++i) t.AddOp(1'000'000);
  t.AddDevices(4, 1 << 20);
  return t.Build();
}

TEST(RefinementTest, BatchedMovesBalanceALoadBoundStepWithFewSimulations) {
  const Model model = QueuedOnOneDevice(64);
  Simulator sim(model);
  RefinementOptions single, batched;
  single.max_simulations = batched.max_simulations = 12;
  batched.batch_moves = 4096;
  Assignment a(model.num_ops(), 0), b(model.num_ops(), 0);
  const RefinementResult one = RefineAlongCriticalPath(model, single, SolveContext(), sim, a);
  const RefinementResult many = RefineAlongCriticalPath(model, batched, SolveContext(), sim, b);
  EXPECT_LE(many.simulations, 12);
  EXPECT_GT(many.moves, one.moves);
  EXPECT_LT(many.makespan_ns, one.makespan_ns);
  EXPECT_LE(many.makespan_ns, 32'000'000);  // at least half the queue moved off in 12 simulations
  EXPECT_EQ(sim.Run(b).makespan_ns, many.makespan_ns);
}

TEST(RefinementTest, BatchedMovesAreDeterministicAndKeepMemory) {
  // Each op holds 1 MB for the whole step and a device takes 25: no batch may overflow one. 24 ops
  // queue on device 0, 16 on device 1.
  TestModel t;
  for (int i = 0; i < 40; ++i) t.AddOp(1'000'000, 0, 1'000'000);
  t.AddDevices(4, 25'000'000);
  const Model model = t.Build();
  Simulator sim(model);
  RefinementOptions batched;
  batched.max_simulations = 20;
  batched.batch_moves = 4096;
  Assignment a(model.num_ops(), 0);
  for (int i = 24; i < 40; ++i) a[i] = 1;
  Assignment b = a;
  const RefinementResult r1 = RefineAlongCriticalPath(model, batched, SolveContext(), sim, a);
  const RefinementResult r2 = RefineAlongCriticalPath(model, batched, SolveContext(), sim, b);
  EXPECT_EQ(a, b);
  EXPECT_EQ(r1.makespan_ns, r2.makespan_ns);
  EXPECT_EQ(r1.overflow_bytes, 0);
  EXPECT_TRUE(sim.Run(a).MemoryFits(model));
  EXPECT_LT(r1.makespan_ns, 24'000'000);
}

TEST(RefinementTest, WithoutMemoryBookkeepingTheSameMovesAreMade) {
  // Memory that never binds: skipping its bookkeeping changes nothing but the cost.
  const Model model = QueuedOnOneDevice(16);
  Simulator sim(model);
  RefinementOptions with, without;
  with.max_simulations = without.max_simulations = 30;
  without.memory_can_bind = false;
  Assignment a(model.num_ops(), 0), b(model.num_ops(), 0);
  const RefinementResult r1 = RefineAlongCriticalPath(model, with, SolveContext(), sim, a);
  const RefinementResult r2 = RefineAlongCriticalPath(model, without, SolveContext(), sim, b);
  EXPECT_EQ(a, b);
  EXPECT_EQ(r1.makespan_ns, r2.makespan_ns);
}

// A random DAG: ops in topological order, each reading 1-3 earlier ops, with random times and bytes, on
// `devices` devices of random speed; the start spreads ops at random.
Model RandomStep(uint64_t seed, int ops, int devices, Assignment* start) {
  uint64_t state = seed * 0x9e3779b97f4a7c15ULL + 1;
  auto next = [&](uint64_t bound) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state % bound;
  };
  TestModel t;
  for (int i = 0; i < ops; ++i) t.AddOp(1000 + static_cast<int64_t>(next(50'000)), 0, 0);
  for (int i = 1; i < ops; ++i) {
    const int inputs = 1 + static_cast<int>(next(3));
    for (int k = 0; k < inputs; ++k) {
      const int from = static_cast<int>(next(static_cast<uint64_t>(i)));
      t.AddEdge(from, i, static_cast<int64_t>(next(40'000'000)));
    }
  }
  t.AddDevices(devices, int64_t{1} << 40);
  t.SetLink(10'000'000'000, 5000);
  const Model model = t.Build();
  start->assign(model.num_ops(), 0);
  for (OpId v = 0; v < model.num_ops(); ++v) (*start)[v] = static_cast<DeviceId>(next(devices));
  return model;
}

TEST(RefinementTest, StoppingTrialsEarlyMakesTheSameMoves) {
  // The early stop only skips the rest of simulations whose move cannot be accepted: the search
  // takes the same path, simulation for simulation, one move at a time and in batches.
  int searches_that_moved = 0;
  int64_t stopped = 0, simulations = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Assignment start;
    const Model model = RandomStep(seed, 60 + static_cast<int>(seed % 5) * 20, 2 + static_cast<int>(seed % 3), &start);
    Simulator sim(model);
    RefinementOptions early, full;
    early.max_simulations = full.max_simulations = 120;
    early.memory_can_bind = full.memory_can_bind = false;
    if (seed % 2 == 0) early.batch_moves = full.batch_moves = 64;
    full.stop_trials_early = false;
    Assignment a = start, b = start;
    const RefinementResult r1 = RefineAlongCriticalPath(model, early, SolveContext(), sim, a);
    const RefinementResult r2 = RefineAlongCriticalPath(model, full, SolveContext(), sim, b);
    EXPECT_EQ(a, b);
    EXPECT_EQ(r1.makespan_ns, r2.makespan_ns);
    EXPECT_EQ(r1.simulations, r2.simulations);
    EXPECT_EQ(r1.moves, r2.moves);
    EXPECT_EQ(r1.restarts, r2.restarts);
    EXPECT_EQ(sim.Run(a).makespan_ns, r1.makespan_ns);
    EXPECT_EQ(r2.stopped_early, 0);
    searches_that_moved += r1.moves > 0;
    stopped += r1.stopped_early;
    simulations += r1.simulations;
  }
  // The searches moved and most of their simulations were cut short (a test of nothing otherwise).
  EXPECT_GT(searches_that_moved, 20);
  EXPECT_GT(stopped, simulations / 2);
}

TEST(RefinementTest, ThePolishEndsWhereNoPathUnitGainsOnAnotherDevice) {
  // From the search's answer, the polish moves units of the critical path to other devices while one
  // improves: it ends at an assignment no such single move improves (when the budget lasts), never
  // worse than where it started.
  int polished = 0;
  for (uint64_t seed = 1; seed <= 24; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Assignment a;
    const Model model = RandomStep(seed, 40 + static_cast<int>(seed % 4) * 10, 2 + static_cast<int>(seed % 3), &a);
    Simulator sim(model);
    RefinementOptions options;
    options.max_simulations = 100'000;
    options.memory_can_bind = false;
    options.max_restarts = 0;
    // A short look at each path (as the search's budget is short on large graphs) leaves the polish
    // something to find.
    options.max_candidates_per_round = 4;
    const RefinementResult searched = RefineAlongCriticalPath(model, options, SolveContext(), sim, a);
    const RefinementResult p = PolishAlongCriticalPath(model, options, SolveContext(), sim, a);
    ASSERT_TRUE(p.local_optimum);
    EXPECT_LE(p.makespan_ns, searched.makespan_ns);
    const int64_t step = sim.Run(a).makespan_ns;
    EXPECT_EQ(step, p.makespan_ns);
    EXPECT_EQ(p.moves > 0, p.makespan_ns < searched.makespan_ns);
    polished += p.moves > 0;
    // No unit of the final critical path gains on another device (every op here is its own unit).
    const std::vector<OpId> path = CriticalPath(model, a, sim.Run(a));
    for (const OpId v : path) {
      for (DeviceId d = 0; d < model.num_devices(); ++d) {
        if (d == a[v]) continue;
        Assignment moved = a;
        moved[v] = d;
        EXPECT_GE(sim.Run(moved).makespan_ns, step) << "op " << v << " to device " << d;
      }
    }
  }
  // The polish found something the search had not on some of these (a test of nothing otherwise).
  EXPECT_GT(polished, 4);
}

TEST(RefinementTest, ThePolishRespectsItsBudgetAndLeavesAnOverflowAlone) {
  Assignment start;
  const Model model = RandomStep(7, 80, 3, &start);
  Simulator sim(model);
  RefinementOptions options;
  options.max_simulations = 5;
  options.memory_can_bind = false;
  Assignment a = start;
  const RefinementResult p = PolishAlongCriticalPath(model, options, SolveContext(), sim, a);
  EXPECT_LE(p.simulations, 5);
  EXPECT_FALSE(p.local_optimum);
  // An assignment that overflows (four 600-byte states on one 1000-byte device, queued on it: moving
  // any of them would shorten the step): the polish leaves it to the memory stage.
  TestModel t;
  for (int i = 0; i < 4; ++i) t.AddOp(1'000'000, 0, 600);
  t.AddDevices(2, 1000);
  const Model tight = t.Build();
  Assignment b(tight.num_ops(), 0);
  Simulator tight_sim(tight);
  const RefinementResult q = PolishAlongCriticalPath(tight, RefinementOptions(), SolveContext(), tight_sim, b);
  EXPECT_GT(q.overflow_bytes, 0);
  EXPECT_EQ(q.moves, 0);
  EXPECT_EQ(b, Assignment(tight.num_ops(), 0));
  EXPECT_EQ(q.simulations, 1);
}

}  // namespace
}  // namespace placement::engine::pardnn
