// Hand-computed schedules of training plans (api.md §2.1): every expected number below is derived in the
// comments from the contract, so a change in semantics shows up as a failing number. Links move 1 byte
// per ns unless a test says otherwise (sim_test_util.h).
#include <cstdint>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/engine/sim/sim_test_util.h"
#include "service/engine/sim/simulator.h"

namespace placement::engine {
namespace {

// a (100 ns, output 50 B) on d0 -> b (100 ns) on d1, 10 B, no latency: a transfer takes 10 ns. M = 3.
RequestBuilder TwoStageChain(int32_t window) {
  RequestBuilder b;
  b.Op("a", 100, 50).Op("b", 100).Edge("a", "b", 10);
  b.Device("d0").Device("d1").IntraNode(kBytesPerNs, 0).Plan(3, window);
  return b;
}

// No window (W = 3): a#0 [0,100) a#1 [100,200) a#2 [200,300) on d0; each copy's transfer arrives 10 ns
// after it finishes: b#0 [110,210), b#1 [210,310), b#2 [310,410). Makespan 410.
// Memory d0: a#m's output from its start until its transfer arrives: [0,110) [100,210) [200,310): two
// overlap over [100,110): peak 100 at 100. d1: each received copy (10 B) until b#m finishes: [110,210)
// [210,310) [310,410): peak 10 at 110. Lower bound: max(path 200, (3 × 200) / 2 = 300) = 300.
TEST(SimulatorPlanTest, MicrobatchesPipelineThroughTwoDevices) {
  Fixture f(TwoStageChain(3));
  const SimResult& r = f.Place("a", "d0").Place("b", "d1").Run();
  EXPECT_EQ(r.microbatches, 3);
  EXPECT_EQ(r.max_in_flight, 3);
  EXPECT_EQ(f.Start(r, "a", 2), 200);
  EXPECT_EQ(f.Start(r, "b", 0), 110);
  EXPECT_EQ(f.Start(r, "b", 1), 210);
  EXPECT_EQ(f.Start(r, "b", 2), 310);
  EXPECT_EQ(r.makespan_ns, 410);
  EXPECT_EQ(f.Peak(r, "d0"), 100);
  EXPECT_EQ(f.PeakTime(r, "d0"), 100);
  EXPECT_EQ(f.Peak(r, "d1"), 10);
  EXPECT_EQ(f.PeakTime(r, "d1"), 110);
  EXPECT_EQ(r.busy_ns[f.Dev("d0")], 300);
  EXPECT_EQ(r.op_count[f.Dev("d0")], 1);
  EXPECT_EQ(r.transfer_count, 3);
  EXPECT_EQ(r.transfer_bytes, 30);
  EXPECT_EQ(LowerBoundNs(f.model()), 300);
  EXPECT_THAT(r.microbatch_done_ns, ::testing::ElementsAre(210, 310, 410));
}

// SimOptions::stop_at_ns with a plan stops on the device bound alone: d0 picks a#0 at 0 with its 300 ns
// of work left (bound 300); d1 picks b#0 at 110 with 300 left (bound 410, the step itself).
TEST(SimulatorPlanTest, APlanStopsOnTheDeviceBound) {
  Fixture f(TwoStageChain(3));
  f.Place("a", "d0").Place("b", "d1");
  Simulator sim(f.model());
  SimOptions stop;
  stop.stop_at_ns = 1;
  EXPECT_TRUE(sim.Run(f.assignment(), stop).stopped_early);
  EXPECT_EQ(sim.Run(f.assignment(), stop).makespan_ns, 300);
  stop.stop_at_ns = 301;
  EXPECT_EQ(sim.Run(f.assignment(), stop).makespan_ns, 410);
  stop.stop_at_ns = 411;
  const SimResult& r = sim.Run(f.assignment(), stop);
  EXPECT_FALSE(r.stopped_early);
  EXPECT_EQ(r.makespan_ns, 410);
  EXPECT_EQ(f.Start(r, "b", 2), 310);
}

// W = 1: microbatch m starts only when m - 1 is done. a#0 [0,100), b#0 [110,210); a#1 ready at 210:
// [210,310), b#1 [320,420); a#2 [420,520), b#2 [530,630). Makespan 630; d0 never holds two outputs.
TEST(SimulatorPlanTest, AWindowOfOneRunsMicrobatchesOneAfterAnother) {
  Fixture f(TwoStageChain(1));
  const SimResult& r = f.Place("a", "d0").Place("b", "d1").Run();
  EXPECT_EQ(r.max_in_flight, 1);
  EXPECT_EQ(f.Start(r, "a", 1), 210);
  EXPECT_EQ(f.Start(r, "b", 1), 320);
  EXPECT_EQ(f.Start(r, "a", 2), 420);
  EXPECT_EQ(r.makespan_ns, 630);
  EXPECT_EQ(f.Peak(r, "d0"), 50);
  // The critical path runs through the window: b#2 <- a#2 <- (window) b#1 <- a#1 <- b#0 <- a#0.
  EXPECT_THAT(CriticalPath(f.model(), f.assignment(), r),
              ::testing::ElementsAre(f.Op("a"), f.Op("b")));
}

// A parameter read p (once, before the microbatches: class -1), a forward f and a gradient g (per
// microbatch), an update u (once, after: class M) on another device. M = 2, latency 5.
//   p 10 ns (output 8 B), f 100 ns (output 100 B), g 50 ns (output 20 B), u 30 ns.
//   p->f 8 B, f->g 100 B (all on d0), g->u 20 B (d0 -> d1: 5 + 20 = 25 ns).
// d0: p [0,10); f#0 and f#1 ready at 10: f#0 [10,110) (microbatch 0 first); at 110 g#0 (microbatch 0)
// goes before f#1 (microbatch 1) although f's bottom level is higher: g#0 [110,160), f#1 [160,260),
// g#1 [260,310). The last copy of g finishes at 310: the accumulated gradient leaves, arrives 335;
// u [335,365). Makespan 365.
// Memory d0: p's output [0, f#1 finishes 260) 8 B; f#0 [10,160) and f#1 [160,310) 100 B; g#0
// [110,160) and g#1 [260,310) 20 B (no per-copy consumer: start to finish); the accumulation buffer
// [110, 335) 20 B. Over [110,160): 8 + 100 + 20 + 20 = 148, the peak, at 110. d1: the received
// accumulated buffer [335, 365): 20 at 335. One transfer of 20 B; busy d0 = 10 + 2×100 + 2×50 = 310.
TEST(SimulatorPlanTest, GradientsAccumulateAndTheUpdateRunsOnce) {
  RequestBuilder b;
  b.Op("p", 10, 8).Op("f", 100, 100).Op("g", 50, 20).Op("u", 30);
  b.Once("p").Once("u");
  b.Edge("p", "f", 8).Edge("f", "g", 100).Edge("g", "u", 20);
  b.Device("d0").Device("d1").IntraNode(kBytesPerNs, 5).Plan(2, 2);
  Fixture f(b);
  const SimResult& r = f.Place("p", "d0").Place("f", "d0").Place("g", "d0").Place("u", "d1").Run(true);
  EXPECT_EQ(f.Start(r, "p"), 0);
  EXPECT_EQ(f.Start(r, "f", 0), 10);
  EXPECT_EQ(f.Start(r, "g", 0), 110);
  EXPECT_EQ(f.Start(r, "f", 1), 160);
  EXPECT_EQ(f.Start(r, "g", 1), 260);
  EXPECT_EQ(f.Start(r, "u"), 335);
  EXPECT_EQ(r.makespan_ns, 365);
  EXPECT_EQ(r.start_ns[static_cast<size_t>(1) * f.model().num_ops() + f.Op("u")], -1);  // once: no copy 1
  EXPECT_EQ(f.Peak(r, "d0"), 148);
  EXPECT_EQ(f.PeakTime(r, "d0"), 110);
  EXPECT_EQ(f.Peak(r, "d1"), 20);
  EXPECT_EQ(f.PeakTime(r, "d1"), 335);
  EXPECT_EQ(r.transfer_count, 1);
  EXPECT_EQ(r.transfer_bytes, 20);
  EXPECT_EQ(r.busy_ns[f.Dev("d0")], 310);
  EXPECT_EQ(r.gradient_ready_ns[f.Op("g")], 310);
  int accumulation = 0;
  for (const MemoryInterval& iv : r.memory_intervals) {
    if (iv.kind != MemoryInterval::Kind::kAccumulation) continue;
    ++accumulation;
    EXPECT_EQ(iv.op, f.Op("g"));
    EXPECT_EQ(iv.from_ns, 110);
    EXPECT_EQ(iv.until_ns, 335);
  }
  EXPECT_EQ(accumulation, 1);
  // Lower bound: path p + f + g + u = 190; work (10 + 2×150 + 30) / 2 = 170.
  EXPECT_EQ(LowerBoundNs(f.model()), 190);
}

// D = 2 over four devices of one host (latency 10, 1 B/ns): group 0 is d0, d1; the ring through d0 is
// d0 -> d2 -> d0. An all-reduce of B bytes takes round(2 × 1 × B / 2) + 2 × 1 × 10 = B + 20 ns.
// x (100 ns) and a (0 ns) on d0 feed once updates ux and ua (10 ns each, d0): x->ux 1000 B, a->ua 500 B.
// d0 runs x [0,100) (higher bottom level), then a [100,100). Both gradients are ready at 100: the ring
// starts the smaller name first, a's all-reduce [100,620), then x's [620,1640). ua [620,630),
// ux [1640,1650). Makespan 1650.
TEST(SimulatorPlanTest, AllReducesOfOneRingRunOneAtATimeSmallerNameFirstOnTies) {
  RequestBuilder b;
  b.Op("x", 100).Op("a", 0).Op("ux", 10).Op("ua", 10).Once("ux").Once("ua");
  b.Edge("x", "ux", 1000).Edge("a", "ua", 500);
  b.Device("d0").Device("d1").Device("d2").Device("d3").IntraNode(kBytesPerNs, 10).Plan(1, 1, 2);
  Fixture f(b);
  ASSERT_EQ(f.model().num_devices(), 2);
  const SimResult& r = f.Place("x", "d0").Place("a", "d0").Place("ux", "d0").Place("ua", "d0").Run(true);
  EXPECT_EQ(f.Start(r, "a"), 100);
  EXPECT_EQ(f.Start(r, "ua"), 620);
  EXPECT_EQ(f.Start(r, "ux"), 1640);
  EXPECT_EQ(r.makespan_ns, 1650);
  ASSERT_EQ(r.all_reduces.size(), 2u);
  EXPECT_EQ(r.all_reduces[0].producer, f.Op("a"));
  EXPECT_EQ(r.all_reduces[0].start_ns, 100);
  EXPECT_EQ(r.all_reduces[0].end_ns, 620);
  EXPECT_EQ(r.all_reduces[1].start_ns, 620);
  EXPECT_EQ(r.all_reduces[1].end_ns, 1640);
  EXPECT_EQ(r.transfer_count, 0);  // all-reduces are not transfers
}

// The ring's slowest link decides: with d2 on another host (inter-node 0.5 B/ns, latency 40), the ring
// d0 -> d2 -> d0 crosses hosts both ways: 2 × 1 × 1000 B / (2 × 0.5 B/ns) + 2 × 40 = 2080 ns.
TEST(SimulatorPlanTest, TheRingRunsAtItsSlowestLink) {
  RequestBuilder b;
  b.Op("x", 100).Op("ux", 10).Once("ux").Edge("x", "ux", 1000);
  b.Device("d0", "h0").Device("d1", "h0").Device("d2", "h1").Device("d3", "h1");
  b.IntraNode(kBytesPerNs, 10).InterNode(kBytesPerNs / 2, 40).Plan(1, 1, 2);
  Fixture f(b);
  const SimResult& r = f.Place("x", "d0").Place("ux", "d1").Run();
  // The gradient then goes d0 -> d1: 10 + 1000 = 1010 ns. ux starts 100 + 2080 + 1010 = 3190.
  EXPECT_EQ(f.Start(r, "ux"), 3190);
}

}  // namespace
}  // namespace placement::engine
