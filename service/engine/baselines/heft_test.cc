#include "service/engine/baselines/heft.h"

#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/engine/baselines/baselines_test_util.h"
#include "service/engine/sim/simulator.h"

namespace placement::engine::baselines {
namespace {

using ::testing::ElementsAre;

TEST(HeftTest, SpreadsIndependentOpsEvenly) {
  ProblemBuilder p;
  for (int i = 0; i < 4; ++i) p.AddOp(100);
  p.AddDevices(2, int64_t{1} << 30);
  const Model model = p.Build();
  const Assignment assignment = PlaceWith(*MakeHeftPartitioner(), model);
  Simulator simulator(model);
  EXPECT_EQ(simulator.Run(assignment).makespan_ns, 200);
}

TEST(HeftTest, ForkJoinReachesTheOptimum) {
  // source -> 4 branches of 100 ns -> sink on 2 devices with free links: the best step is
  // 10 + 2 * 100 + 10 = 220 ns.
  ProblemBuilder p;
  const int source = p.AddOp(10);
  const int sink = p.AddOp(10);
  for (int i = 0; i < 4; ++i) {
    const int branch = p.AddOp(100);
    p.AddEdge(source, branch, 8);
    p.AddEdge(branch, sink, 8);
  }
  p.AddDevices(2, int64_t{1} << 30);
  p.SetLink(1'000'000'000'000, 0);  // 8 bytes in 0.008 ns: rounds to 0
  const Model model = p.Build();
  Simulator simulator(model);
  EXPECT_EQ(simulator.Run(PlaceWith(*MakeHeftPartitioner(), model)).makespan_ns, 220);
}

TEST(HeftTest, PutsAChainOnTheFastestDevice) {
  ProblemBuilder p;
  for (int i = 0; i < 3; ++i) p.AddOp(1000, 1000);
  p.AddEdge(0, 1, 1000);
  p.AddEdge(1, 2, 1000);
  p.AddDevice(int64_t{1} << 30, 1.0);
  p.AddDevice(int64_t{1} << 30, 4.0);
  p.AddDevice(int64_t{1} << 30, 2.0);
  const Model model = p.Build();
  EXPECT_THAT(PlaceWith(*MakeHeftPartitioner(), model), ElementsAre(1, 1, 1));
}

TEST(HeftTest, SkipsDevicesWithoutRoom) {
  const Model model = ChainOfOpsNeedingADeviceEach();
  const Assignment assignment = PlaceWith(*MakeHeftPartitioner(), model);
  EXPECT_THAT(assignment, ElementsAre(0, 1, 2));
  Simulator simulator(model);
  EXPECT_TRUE(simulator.Run(assignment).MemoryFits(model));
}

TEST(HeftTest, InsertsAShortOpIntoAnIdleGap) {
  // p (1000 ns) is pinned to dev1 and feeds x, pinned to dev0, so dev0 idles over [0, 1000). y (50 ns,
  // the lowest rank, scheduled last) fits into that gap: finish 50 on dev0 against 1050 on dev1. Without
  // insertion it would go to dev1 (dev0 free only at 1100).
  ProblemBuilder b;
  const int p = b.AddOp(1000), x = b.AddOp(100), y = b.AddOp(50);
  b.AddEdge(p, x);
  b.Pin(p, 1);
  b.Pin(x, 0);
  (void)y;
  b.AddDevices(2, int64_t{1} << 30);
  const Model model = b.Build();
  EXPECT_THAT(PlaceWith(*MakeHeftPartitioner(), model), ElementsAre(1, 0, 0));
}

TEST(HeftTest, UsesTheFastLink) {
  // a (pinned to the cpu) -> b (gpu only) with 1 MB: 1 ms to dev1, 10 us to dev2.
  ProblemBuilder p;
  const int a = p.AddOp(100, 1'000'000), b = p.AddOp(100);
  p.AddEdge(a, b, 1'000'000);
  p.Pin(a, 0);
  p.AllowKind(b, "gpu");
  p.AddDevice(int64_t{1} << 30, 1.0, "cpu");
  p.AddDevice(int64_t{1} << 30, 1.0, "gpu");
  p.AddDevice(int64_t{1} << 30, 1.0, "gpu");
  p.SetLink(1'000'000'000, 0);
  p.SetPairLink(0, 2, 100'000'000'000, 0);
  const Model model = p.Build();
  EXPECT_THAT(PlaceWith(*MakeHeftPartitioner(), model), ElementsAre(0, 2));
}

}  // namespace
}  // namespace placement::engine::baselines
