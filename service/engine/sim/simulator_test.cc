// Hand-computed schedules for the simulator: every expected start, finish, makespan and memory peak below
// is derived in the comments from api.md §2, so a change in semantics shows up as a failing number.
//
// Unless a test says otherwise, links move 1 byte per ns (bandwidth 1e9 bytes/s), so a transfer of B bytes
// takes latency + B ns.
#include "service/engine/sim/simulator.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/v1/placement.pb.h"
#include "service/engine/model/model.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/model/model_test_util.h"
#include "service/engine/sim/sim_test_util.h"
#include "tests/testutil/random_graph.h"

namespace placement::engine {
namespace {

using ::testing::ElementsAre;

// One producer, consumers on two other devices; two consumers share a remote device.
//   a (100 ns, output 1000 B) on d0; b (50 ns) and c (30 ns) on d1; e (20 ns) on d2.
//   a->b 400 B, a->c 1000 B, a->e 200 B; links: latency 10, 1 B/ns.
// One transfer a->d1 of max(400, 1000) = 1000 B: 10 + 1000 = 1010 ns, arrives 100 + 1010 = 1110.
// One transfer a->d2 of 200 B: 210 ns, arrives 310.
// d1 holds b (bl 50) and c (bl 30) ready at 1110: b [1110, 1160), c [1160, 1190). e [310, 330).
// bl(a) = 100 + max(1010 + 50, 1010 + 30, 210 + 20) = 1160. Makespan 1190.
// Memory: d0 holds a's output [0, last arrival 1110): peak 1000 at 0. d1 holds the 1000 B copy
// [1110, c finishes 1190): peak 1000 at 1110. d2 holds the 200 B copy [310, 330): peak 200 at 310.
TEST(SimulatorTest, OneTransferPerProducerAndDestinationDevice) {
  RequestBuilder b;
  b.Op("a", 100, 1000).Op("b", 50).Op("c", 30).Op("e", 20);
  b.Edge("a", "b", 400).Edge("a", "c", 1000).Edge("a", "e", 200);
  b.Device("d0").Device("d1").Device("d2").IntraNode(kBytesPerNs, 10);
  Fixture f(b);
  f.Place("a", "d0").Place("b", "d1").Place("c", "d1").Place("e", "d2");
  const SimResult& r = f.Run(/*record=*/true);
  EXPECT_EQ(f.Start(r, "a"), 0);
  EXPECT_EQ(f.Finish(r, "a"), 100);
  EXPECT_EQ(f.Start(r, "b"), 1110);
  EXPECT_EQ(f.Finish(r, "b"), 1160);
  EXPECT_EQ(f.Start(r, "c"), 1160);
  EXPECT_EQ(f.Finish(r, "c"), 1190);
  EXPECT_EQ(f.Start(r, "e"), 310);
  EXPECT_EQ(f.Finish(r, "e"), 330);
  EXPECT_EQ(r.makespan_ns, 1190);
  EXPECT_EQ(r.bottom_level_ns[f.Op("a")], 1160);
  EXPECT_EQ(r.transfer_count, 2);
  EXPECT_EQ(r.transfer_bytes, 1200);
  ASSERT_EQ(r.transfers.size(), 2u);
  EXPECT_EQ(r.transfers[0].to, f.Dev("d1"));
  EXPECT_EQ(r.transfers[0].bytes, 1000);
  EXPECT_EQ(r.transfers[0].start_ns, 100);
  EXPECT_EQ(r.transfers[0].arrival_ns, 1110);
  EXPECT_EQ(r.transfers[1].to, f.Dev("d2"));
  EXPECT_EQ(r.transfers[1].arrival_ns, 310);
  EXPECT_EQ(f.Peak(r, "d0"), 1000);
  EXPECT_EQ(f.PeakTime(r, "d0"), 0);
  EXPECT_EQ(f.Peak(r, "d1"), 1000);
  EXPECT_EQ(f.PeakTime(r, "d1"), 1110);
  EXPECT_EQ(f.Peak(r, "d2"), 200);
  EXPECT_EQ(f.PeakTime(r, "d2"), 310);
  EXPECT_THAT(r.busy_ns, ElementsAre(100, 80, 20));
  EXPECT_THAT(r.op_count, ElementsAre(1, 2, 1));
}

// Speeds 3.0 (d0) and 2.0 (d1); latency 25, 1 B/ns; round(compute / speed), halves away from zero.
//   x: 10 ns on d0 -> 10/3 = 3.33 -> 3.     y: 5 ns on d1 -> 2.5 -> 3.
//   z: 7 ns on d1 -> 3.5 -> 4.              w: 1 ns on d1 -> 0.5 -> 1.
// x->y is a control edge (0 B) across devices: it costs the latency, 25 ns. y->z (100 B) stays on d1.
// bl: z 4, y 3 + 4 = 7, x 3 + 25 + 7 = 35, w 1.
// d1 at 0: only w is ready: w [0, 1). x [0, 3); arrival at y: 3 + 25 = 28; y [28, 31); z [31, 35).
// Lower bound on the fastest device (3.0): x 3, y 5/3 -> 2, z 7/3 -> 2; path 7; work 23 / 5.0 = 4.6
// -> 5. Lower bound 7.
TEST(SimulatorTest, HeterogeneousSpeedsRoundAndControlEdgesCostLatency) {
  RequestBuilder b;
  b.Op("x", 10).Op("y", 5).Op("z", 7).Op("w", 1);
  b.Edge("x", "y", 0).Edge("y", "z", 100);
  b.Device("d0", "n0", 3.0).Device("d1", "n0", 2.0).IntraNode(kBytesPerNs, 25);
  Fixture f(b);
  f.Place("x", "d0").Place("y", "d1").Place("z", "d1").Place("w", "d1");
  const SimResult& r = f.Run(/*record=*/true);
  EXPECT_EQ(f.Start(r, "x"), 0);
  EXPECT_EQ(f.Finish(r, "x"), 3);
  EXPECT_EQ(f.Start(r, "w"), 0);
  EXPECT_EQ(f.Finish(r, "w"), 1);
  EXPECT_EQ(f.Start(r, "y"), 28);
  EXPECT_EQ(f.Finish(r, "y"), 31);
  EXPECT_EQ(f.Start(r, "z"), 31);
  EXPECT_EQ(f.Finish(r, "z"), 35);
  EXPECT_EQ(r.makespan_ns, 35);
  EXPECT_EQ(r.bottom_level_ns[f.Op("x")], 35);
  EXPECT_EQ(r.bottom_level_ns[f.Op("y")], 7);
  EXPECT_EQ(r.transfer_count, 1);
  EXPECT_EQ(r.transfer_bytes, 0);
  ASSERT_EQ(r.transfers.size(), 1u);
  EXPECT_EQ(r.transfers[0].arrival_ns, 28);
  EXPECT_THAT(r.busy_ns, ElementsAre(3, 8));
  EXPECT_EQ(LowerBoundNs(f.model()), 7);
}

// Links: d0, d1 on node n0; d2, d3 on node n1. intra 2 B/ns latency 5; inter 0.5 B/ns latency 100;
// override d3-d0 (named in that order: pairs are unordered) 4 B/ns latency 1.
// s (10 ns) on d0 sends 1001 B to p (d1), q (d2), r (d3); r sends 8 B back to t (d0).
//   intra: 5 + round(1001 / 2 = 500.5) = 5 + 501 (halves up) = 506 -> p [516, 526).
//   inter: 100 + 1001 * 2 = 2102 -> q [2112, 2122).
//   override: 1 + round(1001 / 4 = 250.25) = 251 -> r [261, 271).
//   back over the override: 1 + 8 / 4 = 3 -> t [274, 284).
TEST(SimulatorTest, IntraInterNodeAndOverriddenLinks) {
  RequestBuilder b;
  b.Op("s", 10).Op("p", 10).Op("q", 10).Op("r", 10).Op("t", 10);
  b.Edge("s", "p", 1001).Edge("s", "q", 1001).Edge("s", "r", 1001).Edge("r", "t", 8);
  b.Device("d0", "n0").Device("d1", "n0").Device("d2", "n1").Device("d3", "n1");
  b.IntraNode(2 * kBytesPerNs, 5).InterNode(kBytesPerNs / 2, 100).Link("d3", "d0", 4 * kBytesPerNs, 1);
  Fixture f(b);
  f.Place("s", "d0").Place("p", "d1").Place("q", "d2").Place("r", "d3").Place("t", "d0");
  const SimResult& r = f.Run();
  EXPECT_EQ(f.Start(r, "p"), 516);
  EXPECT_EQ(f.Start(r, "q"), 2112);
  EXPECT_EQ(f.Start(r, "r"), 261);
  EXPECT_EQ(f.Finish(r, "r"), 271);
  EXPECT_EQ(f.Start(r, "t"), 274);
  EXPECT_EQ(f.Finish(r, "t"), 284);
  EXPECT_EQ(r.makespan_ns, 2122);
  EXPECT_EQ(r.transfer_count, 4);
  EXPECT_EQ(r.transfer_bytes, 3 * 1001 + 8);
}

// Memory of every kind. d0, d1; latency 0, 1 B/ns.
//   w: 10 ns, persistent 1000, output 200, temp 50, on d0.   a: 20 ns, output 300, temp 70, on d0.
//   b: 5 ns, output 40, on d1.                               c: 10 ns, on d1.
//   w->a 200 B, w->b 120 B, b->c 40 B, a->c 300 B.
// Schedule: w [0, 10); w->d1 arrives 10 + 120 = 130; a [10, 30); a->d1 arrives 30 + 300 = 330;
//   b [130, 135); c waits for a's copy: [330, 340). Makespan 340.
// d0: persistent 1000 [0, 340); w temp 50 [0, 10); w output 200 [0, max(a ends 30, arrival 130) = 130);
//   a temp 70 [10, 30); a output 300 [10, arrival 330).
//   [0,10) 1250; [10,30) 1000+200+70+300 = 1570; [30,130) 1500; [130,330) 1300; [330,340) 1000.
//   Peak 1570 at 10.
// d1: copy of w 120 [130, b ends 135); b output 40 [130, c ends 340); copy of a 300 [330, 340).
//   [130,135) 160; [135,330) 40; [330,340) 340. Peak 340 at 330.
TEST(SimulatorTest, MemoryOfEveryKind) {
  RequestBuilder b;
  b.Op("w", 10, 200, 1000, 50).Op("a", 20, 300, 0, 70).Op("b", 5, 40).Op("c", 10);
  b.Edge("w", "a", 200).Edge("w", "b", 120).Edge("b", "c", 40).Edge("a", "c", 300);
  b.Device("d0").Device("d1").IntraNode(kBytesPerNs, 0);
  Fixture f(b);
  f.Place("w", "d0").Place("a", "d0").Place("b", "d1").Place("c", "d1");
  const SimResult& r = f.Run(/*record=*/true);
  EXPECT_EQ(f.Start(r, "a"), 10);
  EXPECT_EQ(f.Start(r, "b"), 130);
  EXPECT_EQ(f.Start(r, "c"), 330);
  EXPECT_EQ(r.makespan_ns, 340);
  EXPECT_EQ(f.Peak(r, "d0"), 1570);
  EXPECT_EQ(f.PeakTime(r, "d0"), 10);
  EXPECT_EQ(f.Peak(r, "d1"), 340);
  EXPECT_EQ(f.PeakTime(r, "d1"), 330);

  using Kind = MemoryInterval::Kind;
  struct Expected {
    std::string device, op;
    Kind kind;
    int64_t bytes, from, until;
  };
  const std::vector<Expected> expected = {
      {"d0", "w", Kind::kPersistent, 1000, 0, 340}, {"d0", "w", Kind::kTemp, 50, 0, 10},
      {"d0", "w", Kind::kOutput, 200, 0, 130},      {"d0", "a", Kind::kTemp, 70, 10, 30},
      {"d0", "a", Kind::kOutput, 300, 10, 330},     {"d1", "w", Kind::kReceived, 120, 130, 135},
      {"d1", "b", Kind::kOutput, 40, 130, 340},     {"d1", "a", Kind::kReceived, 300, 330, 340},
  };
  ASSERT_EQ(r.memory_intervals.size(), expected.size());
  for (const Expected& e : expected) {
    const auto match = [&](const MemoryInterval& m) {
      return m.device == f.Dev(e.device) && m.op == f.Op(e.op) && m.kind == e.kind &&
             m.bytes == e.bytes && m.from_ns == e.from && m.until_ns == e.until;
    };
    EXPECT_EQ(std::count_if(r.memory_intervals.begin(), r.memory_intervals.end(), match), 1)
        << e.device << " " << e.op << " [" << e.from << ", " << e.until << ")";
  }

  // Capacities: d0 fits exactly at 1570, then one byte short.
  Model tight = f.model();
  tight.capacity_bytes = {1570, 340};
  EXPECT_TRUE(r.MemoryFits(tight));
  tight.capacity_bytes = {1569, 340};
  EXPECT_FALSE(r.MemoryFits(tight));
}

// Half-open intervals: a chain a -> b -> c on one device, each 10 ns, output 500, temp 300.
//   a [0,10), b [10,20), c [20,30). Outputs: a [0, 20) (b ends), b [10, 30), c [20, 30) (no consumer).
//   [0,10): a temp + a out = 800.
//   [10,20): a out + b out + b temp = 1300 (a's temp, freed at 10, does not add to b's).
//   [20,30): b out + c out + c temp = 1300 (a's output, freed at 20, does not add to c's).
//   Peak 1300, first reached at 10. Counting frees after allocations would give 1600 at 10.
TEST(SimulatorTest, HalfOpenIntervalsFreeBeforeAllocating) {
  RequestBuilder b;
  b.Op("a", 10, 500, 0, 300).Op("b", 10, 500, 0, 300).Op("c", 10, 500, 0, 300);
  b.Edge("a", "b", 500).Edge("b", "c", 500);
  b.Device("d0").IntraNode(kBytesPerNs, 0);
  Fixture f(b);
  const SimResult& r = f.Run();
  EXPECT_EQ(f.Start(r, "c"), 20);
  EXPECT_EQ(r.makespan_ns, 30);
  EXPECT_EQ(f.Peak(r, "d0"), 1300);
  EXPECT_EQ(f.PeakTime(r, "d0"), 10);
  EXPECT_EQ(r.transfer_count, 0);
}

// Equal bottom levels: the smaller name in byte order goes first, whatever the request order.
// "B" (0x42) < "a10" < "a9" ('1' < '9'). Each 10 ns on one device: B [0,10), a10 [10,20), a9 [20,30).
TEST(SimulatorTest, PriorityTiesGoToTheSmallerName) {
  RequestBuilder b;
  b.Op("a9", 10).Op("a10", 10).Op("B", 10);
  b.Device("d0").IntraNode(kBytesPerNs, 0);
  Fixture f(b);
  const SimResult& r = f.Run();
  EXPECT_EQ(f.Start(r, "B"), 0);
  EXPECT_EQ(f.Start(r, "a10"), 10);
  EXPECT_EQ(f.Start(r, "a9"), 20);
  EXPECT_EQ(r.previous_on_device[f.Op("a9")], f.Op("a10"));
  EXPECT_EQ(r.previous_on_device[f.Op("B")], kNone);
}

// The device picks the highest bottom level, not the smaller name.
//   One device: z_long (10 ns) -> z_tail (100 ns); a_short (20 ns).
//   bl: z_tail 100, z_long 110, a_short 20. At 0: z_long [0,10). At 10 ready: z_tail (100), a_short
//   (20): z_tail [10,110), a_short [110,130).
TEST(SimulatorTest, PicksTheHighestBottomLevel) {
  RequestBuilder b;
  b.Op("a_short", 20).Op("z_long", 10).Op("z_tail", 100);
  b.Edge("z_long", "z_tail", 8);
  b.Device("d0").IntraNode(kBytesPerNs, 0);
  Fixture f(b);
  const SimResult& r = f.Run();
  EXPECT_EQ(f.Start(r, "z_long"), 0);
  EXPECT_EQ(f.Start(r, "z_tail"), 10);
  EXPECT_EQ(f.Start(r, "a_short"), 110);
  EXPECT_EQ(r.makespan_ns, 130);
  EXPECT_EQ(r.bottom_level_ns[f.Op("z_long")], 110);
}

// Bottom levels include transfer times. d0 holds k (500 ns) and m (10 ns); m feeds n (5 ns) on d1
// with 1000 B (latency 0, 1 B/ns). bl(m) = 10 + 1000 + 5 = 1015 > bl(k) = 500, although k is the smaller
// name and m would be behind with free communication (15 < 500).
//   m [0,10), k [10,510); n [1010, 1015). Makespan 1015 (k first would give 1515).
TEST(SimulatorTest, BottomLevelCountsTheTransfer) {
  RequestBuilder b;
  b.Op("k", 500).Op("m", 10).Op("n", 5);
  b.Edge("m", "n", 1000);
  b.Device("d0").Device("d1").IntraNode(kBytesPerNs, 0);
  Fixture f(b);
  f.Place("k", "d0").Place("m", "d0").Place("n", "d1");
  const SimResult& r = f.Run();
  EXPECT_EQ(r.bottom_level_ns[f.Op("m")], 1015);
  EXPECT_EQ(r.bottom_level_ns[f.Op("k")], 500);
  EXPECT_EQ(f.Start(r, "m"), 0);
  EXPECT_EQ(f.Start(r, "k"), 10);
  EXPECT_EQ(f.Start(r, "n"), 1010);
  EXPECT_EQ(r.makespan_ns, 1015);
  EXPECT_THAT(CriticalPath(f.model(), f.assignment(), r), ElementsAre(f.Op("m"), f.Op("n")));
}

// Zero-duration ops and pick rounds at one time. d0, d1; latency 0, 1 B/ns.
//   z1 (0 ns, temp 100, output 64) -> z2 (0 ns) on d0; z2 -> z3 (0 ns) on d1, a 0 B control edge:
//   transfer 0 + 0 = 0 ns; z3 -> tail (50 ns) on d1; w (10 ns) on d1 has no inputs.
//   bl: tail 50, z3 50, z2 50, z1 50, w 10.
// t = 0, round 1: d0 picks z1 (the only ready op), d1 picks w (z3 is not ready yet) -> w [0, 10).
// round 2: z1 has finished at 0, z2 is ready: z2 [0, 0). round 3: z3 is ready at 0 but d1 is busy.
// t = 10: z3 [10, 10); then tail [10, 60). Makespan 60.
// Memory on d0: z1's temp [0, 0) and output [0, z2 ends 0) are empty: peak 0 at 0.
TEST(SimulatorTest, ZeroDurationOpsFinishAtTheirStartBetweenPickRounds) {
  RequestBuilder b;
  b.Op("z1", 0, 64, 0, 100).Op("z2", 0).Op("z3", 0).Op("tail", 50).Op("w", 10);
  b.Edge("z1", "z2", 64).Edge("z2", "z3", 0).Edge("z3", "tail", 0);
  b.Device("d0").Device("d1").IntraNode(kBytesPerNs, 0);
  Fixture f(b);
  f.Place("z1", "d0").Place("z2", "d0").Place("z3", "d1").Place("tail", "d1").Place("w", "d1");
  const SimResult& r = f.Run(/*record=*/true);
  EXPECT_EQ(f.Start(r, "z1"), 0);
  EXPECT_EQ(f.Finish(r, "z1"), 0);
  EXPECT_EQ(f.Start(r, "z2"), 0);
  EXPECT_EQ(f.Finish(r, "z2"), 0);
  EXPECT_EQ(f.Start(r, "w"), 0);
  EXPECT_EQ(f.Start(r, "z3"), 10);
  EXPECT_EQ(f.Finish(r, "z3"), 10);
  EXPECT_EQ(f.Start(r, "tail"), 10);
  EXPECT_EQ(r.makespan_ns, 60);
  EXPECT_EQ(r.bottom_level_ns[f.Op("z1")], 50);
  EXPECT_EQ(r.previous_on_device[f.Op("z2")], f.Op("z1"));
  EXPECT_EQ(r.previous_on_device[f.Op("z3")], f.Op("w"));
  EXPECT_EQ(f.Peak(r, "d0"), 0);
  EXPECT_EQ(f.PeakTime(r, "d0"), 0);
  for (const MemoryInterval& m : r.memory_intervals) EXPECT_NE(m.device, f.Dev("d0"));
  // The critical path ends at tail; tail started when z3 finished (z3 is its input and its
  // predecessor on d1: the same op); z3 started at 10 when w finished (its input arrived at 0).
  EXPECT_THAT(CriticalPath(f.model(), f.assignment(), r), ElementsAre(f.Op("w"), f.Op("z3"), f.Op("tail")));
}

// When every op takes no time, every interval — persistent ones included — is empty.
TEST(SimulatorTest, AllZeroDurationHoldsNothing) {
  RequestBuilder b;
  b.Op("a", 0, 10, 1000, 10).Op("b", 0, 10, 1000, 10);
  b.Edge("a", "b", 10);
  b.Device("d0").Device("d1").IntraNode(kBytesPerNs, 0);
  Fixture f(b);
  f.Place("a", "d0").Place("b", "d1");
  // Transfer of 10 B takes 10 ns: b [10, 10) and the makespan is 10, so now memory is held.
  const SimResult& r1 = f.Run();
  EXPECT_EQ(r1.makespan_ns, 10);
  // d0: persistent 1000 [0, 10), a's output [0, arrival 10): 1010 at 0. d1: persistent 1000; the copy
  // [10, 10) is empty: 1000 at 0.
  EXPECT_EQ(f.Peak(r1, "d0"), 1010);
  EXPECT_EQ(f.Peak(r1, "d1"), 1000);
  EXPECT_EQ(f.PeakTime(r1, "d1"), 0);
  f.Place("b", "d0");
  const SimResult& r2 = f.Run();
  EXPECT_EQ(r2.makespan_ns, 0);
  EXPECT_THAT(r2.peak_memory_bytes, ElementsAre(0, 0));
}

// Regression (place_request fuzzer, UBSan): on one device there are no transfers at all, and the last
// op has no out-edges; starting an op must not index past the end of those (empty) arrays. Only a
// sanitizer build sees the old fault; the schedule is checked here either way.
//   a (5 ns) -> b (7 ns) on d0, c (3 ns) alone: bl a 12, c 3, b 7 -> a [0, 5), b [5, 12), c [12, 15).
TEST(SimulatorTest, OneDeviceWithoutAnyTransferOrEdgeAtTheEnd) {
  RequestBuilder b;
  b.Op("a", 5, 8).Op("b", 7, 8).Op("c", 3);
  b.Edge("a", "b", 8);
  b.Device("d0");
  Fixture f(b);
  const SimResult& r = f.Run(/*record=*/true);
  EXPECT_EQ(f.Start(r, "a"), 0);
  EXPECT_EQ(f.Start(r, "b"), 5);
  EXPECT_EQ(f.Start(r, "c"), 12);
  EXPECT_EQ(r.makespan_ns, 15);
}

// Two parallel edges between the same ops add their bytes (300 + 200 = 500); the larger edge into d1
// (500 vs c's 100) sets the transfer: a (10 ns) on d0; b, c (10 ns each) on d1; latency 0, 1 B/ns.
//   Arrival 10 + 500 = 510. bl: b 10, c 10 -> tie: b [510, 520), c [520, 530).
TEST(SimulatorTest, ParallelEdgesAddTheirBytes) {
  RequestBuilder b;
  b.Op("a", 10).Op("b", 10).Op("c", 10);
  b.Edge("a", "b", 300).Edge("a", "b", 200).Edge("a", "c", 100);
  b.Device("d0").Device("d1").IntraNode(kBytesPerNs, 0);
  Fixture f(b);
  f.Place("a", "d0").Place("b", "d1").Place("c", "d1");
  const SimResult& r = f.Run();
  EXPECT_EQ(f.Start(r, "b"), 510);
  EXPECT_EQ(f.Start(r, "c"), 520);
  EXPECT_EQ(r.transfer_bytes, 500);
}

// Without memory, peaks stay zero and the schedule is the same.
TEST(SimulatorTest, MemoryCanBeSkipped) {
  RequestBuilder b;
  b.Op("a", 10, 100, 100, 100).Op("b", 10, 100);
  b.Edge("a", "b", 100);
  b.Device("d0").Device("d1").IntraNode(kBytesPerNs, 0);
  absl::StatusOr<Model> model = BuildModel(b.request());
  ASSERT_TRUE(model.ok()) << model.status();
  Simulator sim(*model);
  SimOptions no_memory;
  no_memory.compute_memory = false;
  const Assignment assignment = {0, 1};
  const SimResult& r = sim.Run(assignment, no_memory);
  EXPECT_EQ(r.makespan_ns, 120);
  EXPECT_THAT(r.peak_memory_bytes, ElementsAre(0, 0));
  const SimResult& again = sim.Run(assignment);
  EXPECT_EQ(again.makespan_ns, 120);
  // d0: persistent + temp + output of a = 300 over [0, 10). d1: copy of a (100) and b's output (100)
  // over [110, 120) = 200.
  EXPECT_THAT(again.peak_memory_bytes, ElementsAre(300, 200));
}

// Lower bound: max(critical path on the fastest device, total work / total speed).
//   Speeds 2.0 and 1.0. Chain a (9) -> b (9): on speed 2: 4.5 -> 5 each, path 10.
//   Independent c (100): path 50. Work (9 + 9 + 100) / 3.0 = 39.33 -> 39. Bound 50.
TEST(SimulatorTest, LowerBound) {
  RequestBuilder b;
  b.Op("a", 9).Op("b", 9).Op("c", 100);
  b.Edge("a", "b", 1);
  b.Device("d0", "n0", 2.0).Device("d1").IntraNode(kBytesPerNs, 0);
  absl::StatusOr<Model> model = BuildModel(b.request());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(LowerBoundNs(*model), 50);
  // With c at 10 ns the work term is 28 / 3 = 9.33 -> 9 and the path 5 + 5 = 10 wins.
  RequestBuilder small;
  small.Op("a", 9).Op("b", 9).Op("c", 10).Edge("a", "b", 1);
  small.Device("d0", "n0", 2.0).Device("d1").IntraNode(kBytesPerNs, 0);
  model = BuildModel(small.request());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(LowerBoundNs(*model), 10);
  // Work wins with many independent ops: 10 x 30 ns on speeds 2 + 1: 300 / 3 = 100 > 15.
  RequestBuilder wide;
  for (int i = 0; i < 10; ++i) wide.Op("op" + std::to_string(i), 30);
  wide.Device("d0", "n0", 2.0).Device("d1").IntraNode(kBytesPerNs, 0);
  model = BuildModel(wide.request());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(LowerBoundNs(*model), 100);
}


// ProvenLowerBoundNs: never above a simulated step, where LowerBoundNs's rounded work term can be.
//   Four 1 ns ops on two devices of speed 3: each takes round(1/3) = 0 ns, so every step is 0; the
//   contract's bound is round(4/6) = 1, the proven one 0.
//   Five independent 1 ns ops on four devices of speed 1: round(5/4) = 1, but some device runs two:
//   the proven bound is ceil(5/4) = 2, the step 2.
//   Mixed speeds (the "wide" case above: 10 x 30 ns on speeds 2 + 1): (300 - 2 x 10 / 2) / 3 = 96.7,
//   95 after the ns kept for rounding; the best split (7 ops on the fast device) takes 105.
TEST(SimulatorTest, ProvenLowerBound) {
  RequestBuilder tiny;
  for (int i = 0; i < 4; ++i) tiny.Op("op" + std::to_string(i), 1);
  tiny.Device("d0", "n0", 3.0).Device("d1", "n0", 3.0).IntraNode(kBytesPerNs, 0);
  absl::StatusOr<Model> model = BuildModel(tiny.request());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(LowerBoundNs(*model), 1);
  EXPECT_EQ(ProvenLowerBoundNs(*model), 0);
  EXPECT_EQ(Simulator(*model).Run({0, 0, 1, 1}).makespan_ns, 0);

  RequestBuilder five;
  for (int i = 0; i < 5; ++i) five.Op("op" + std::to_string(i), 1);
  for (int d = 0; d < 4; ++d) five.Device("d" + std::to_string(d));
  five.IntraNode(kBytesPerNs, 0);
  model = BuildModel(five.request());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(LowerBoundNs(*model), 1);
  EXPECT_EQ(ProvenLowerBoundNs(*model), 2);
  EXPECT_EQ(Simulator(*model).Run({0, 1, 2, 3, 0}).makespan_ns, 2);

  RequestBuilder wide;
  for (int i = 0; i < 10; ++i) wide.Op("op" + std::to_string(i), 30);
  wide.Device("d0", "n0", 2.0).Device("d1").IntraNode(kBytesPerNs, 0);
  model = BuildModel(wide.request());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(ProvenLowerBoundNs(*model), 95);
}

// AssignedLowerBoundNs on a two-stage pipeline: the second device cannot start before the first copy of
// a has run and its tensor crossed (10 + 5 ns), then runs four copies of b (4 × 20 ns): 95 ns, which is
// the step. On one device the bound is all the work.
TEST(SimulatorTest, AssignedLowerBoundOfAPipeline) {
  RequestBuilder b;
  b.Op("a", 10).Op("b", 20).Edge("a", "b", 5).Plan(4, 0);
  b.Device("d0").Device("d1").IntraNode(kBytesPerNs, 0);
  absl::StatusOr<Model> model = BuildModel(b.request());
  ASSERT_TRUE(model.ok()) << model.status();
  const Assignment split = {0, 1};
  EXPECT_EQ(AssignedLowerBoundNs(*model, split), 95);
  EXPECT_EQ(Simulator(*model).Run(split).makespan_ns, 95);
  EXPECT_EQ(AssignedLowerBoundNs(*model, Assignment{0, 0}), 120);
  // Reversed roles: d1 runs a, d0 runs b; the same bound.
  EXPECT_EQ(AssignedLowerBoundNs(*model, Assignment{1, 0}), 95);
  // With a scratch kept between calls (and between models of other sizes), the same bounds.
  LowerBoundScratch scratch;
  testutil::RandomGraphOptions options;
  options.num_ops = 300;
  options.num_devices = 3;
  options.seed = 9;
  absl::StatusOr<Model> larger = BuildModel(testutil::RandomLayeredRequest(options));
  ASSERT_TRUE(larger.ok()) << larger.status();
  Assignment spread(larger->num_ops());
  for (OpId v = 0; v < larger->num_ops(); ++v) spread[v] = v % 3;
  EXPECT_EQ(AssignedLowerBoundNs(*larger, spread, &scratch), AssignedLowerBoundNs(*larger, spread));
  EXPECT_EQ(AssignedLowerBoundNs(*model, split, &scratch), 95);
  EXPECT_EQ(AssignedLowerBoundNs(*model, Assignment{0, 0}, &scratch), 120);
  EXPECT_EQ(AssignedLowerBoundNs(*larger, Assignment(larger->num_ops(), 1), &scratch),
            AssignedLowerBoundNs(*larger, Assignment(larger->num_ops(), 1)));
}

}  // namespace
}  // namespace placement::engine
