#include "service/engine/baselines/m_etf.h"

#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/engine/baselines/baselines_test_util.h"
#include "service/engine/sim/simulator.h"

namespace placement::engine::baselines {
namespace {

using ::testing::ElementsAre;

TEST(MEtfTest, RunsIndependentChainsInParallelOnTheirOwnDevices) {
  ProblemBuilder p;
  const int a0 = p.AddOp(100, 1'000'000), a1 = p.AddOp(100);
  const int b0 = p.AddOp(100, 1'000'000), b1 = p.AddOp(100);
  p.AddEdge(a0, a1, 1'000'000);
  p.AddEdge(b0, b1, 1'000'000);
  p.AddDevices(2, int64_t{1} << 30);
  p.SetLink(1'000'000'000, 0);  // 1 ms per edge: never worth crossing
  const Model model = p.Build();
  const Assignment assignment = PlaceWith(*MakeMEtfPartitioner(), model);
  EXPECT_THAT(assignment, ElementsAre(0, 0, 1, 1));
  Simulator simulator(model);
  EXPECT_EQ(simulator.Run(assignment).makespan_ns, 200);
}

TEST(MEtfTest, PlacesAnOpOnlyWhereItsMemoryFits) {
  // Without memory limits the whole chain would stay on dev0 (free transfers, ties to the smaller id);
  // each op's weights fill more than half a device, so every op needs its own.
  const Model model = ChainOfOpsNeedingADeviceEach();
  const Assignment assignment = PlaceWith(*MakeMEtfPartitioner(), model);
  EXPECT_THAT(assignment, ElementsAre(0, 1, 2));
  Simulator simulator(model);
  EXPECT_TRUE(simulator.Run(assignment).MemoryFits(model));
}

TEST(MEtfTest, FreesOutputsAfterTheirLastConsumerSoLaterOpsFit) {
  // op0 -> op1 -> op2 -> op3, outputs of 400 bytes on a 1000-byte device: with outputs released after
  // their consumers ran, the chain never holds more than two of them (plus the next) and stays on dev0.
  ProblemBuilder p;
  for (int i = 0; i < 4; ++i) p.AddOp(100, 400);
  for (int i = 0; i < 3; ++i) p.AddEdge(i, i + 1, 400);
  p.AddDevices(2, 1000);
  p.SetLink(1'000'000, 0);  // slow: crossing costs 400 us
  const Model model = p.Build();
  EXPECT_THAT(PlaceWith(*MakeMEtfPartitioner(), model), ElementsAre(0, 0, 0, 0));
}

TEST(MEtfTest, BreaksStartTimeTiesTowardsTheFasterDevice) {
  ProblemBuilder p;
  for (int i = 0; i < 3; ++i) p.AddOp(1000);
  p.AddEdge(0, 1);
  p.AddEdge(1, 2);
  p.AddDevice(int64_t{1} << 30, 1.0);
  p.AddDevice(int64_t{1} << 30, 2.0);
  const Model model = p.Build();
  EXPECT_THAT(PlaceWith(*MakeMEtfPartitioner(), model), ElementsAre(1, 1, 1));
}

TEST(MEtfTest, KeepsAColocationGroupTogether) {
  ProblemBuilder p;
  for (int i = 0; i < 4; ++i) p.AddOp(100);
  p.Colocate(0, "g");
  p.Colocate(3, "g");
  p.AddDevices(4, int64_t{1} << 30);
  const Model model = p.Build();
  const Assignment assignment = PlaceWith(*MakeMEtfPartitioner(), model);
  EXPECT_EQ(assignment[0], assignment[3]);
  // The other independent ops spread over the idle devices.
  EXPECT_NE(assignment[1], assignment[0]);
  EXPECT_NE(assignment[2], assignment[0]);
  EXPECT_NE(assignment[1], assignment[2]);
}

}  // namespace
}  // namespace placement::engine::baselines
