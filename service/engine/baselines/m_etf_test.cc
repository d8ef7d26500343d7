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

// Two independent chains of two 100 ns ops, each chain a colocation group whose first op holds
// 1000 bytes of state, on two devices with slow links (crossing never pays); the previous placement
// put chain a on `a_was` and chain b on `b_was`.
Model TwoStatefulChains(int a_was, int b_was) {
  ProblemBuilder p;
  const int a0 = p.AddOp(100, 0, /*persistent_bytes=*/1000), a1 = p.AddOp(100);
  const int b0 = p.AddOp(100, 0, /*persistent_bytes=*/1000), b1 = p.AddOp(100);
  p.AddEdge(a0, a1, 1'000'000);
  p.AddEdge(b0, b1, 1'000'000);
  for (const int a : {a0, a1}) p.Colocate(a, "a");
  for (const int b : {b0, b1}) p.Colocate(b, "b");
  p.AddDevices(2, int64_t{1} << 30);
  auto& previous = *p.request().mutable_options()->mutable_previous_placement();
  previous["op000"] = previous["op001"] = ProblemBuilder::DeviceName(a_was);
  previous["op002"] = previous["op003"] = ProblemBuilder::DeviceName(b_was);
  return p.Build();
}

Assignment PlaceTowardsPrevious(const Model& model, double ns_per_byte) {
  absl::StatusOr<PartitionResult> result = MEtfTowardsPrevious(model, SolveContext(), ns_per_byte);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? result->assignment : Assignment(model.num_ops(), 0);
}

TEST(MEtfTowardsPreviousTest, UnitsGoBackToTheirPreviousDevicesWhenThatCostsNoTime) {
  // Plain m-ETF breaks the tie towards dev0 for chain a; drawn towards the previous placement, each
  // chain returns to its own device, for the same 200 ns.
  const Model model = TwoStatefulChains(/*a_was=*/1, /*b_was=*/0);
  EXPECT_THAT(PlaceTowardsPrevious(model, 0.0), ElementsAre(0, 0, 1, 1));
  EXPECT_THAT(PlaceWith(*MakeMEtfPartitioner(), model), ElementsAre(0, 0, 1, 1));
  const Assignment sticky = PlaceTowardsPrevious(model, 1.0);
  EXPECT_THAT(sticky, ElementsAre(1, 1, 0, 0));
  EXPECT_EQ(BytesMoved(model, sticky), 0);
  Simulator simulator(model);
  EXPECT_EQ(simulator.Run(sticky).makespan_ns, 200);
}

TEST(MEtfTowardsPreviousTest, AUnitWaitsForItsDeviceOnlyWhileItsBytesAreWorthTheWait) {
  // Both chains were on dev0. Running b on dev1 saves 200 ns and moves its 1000 bytes: at 0.05
  // ns/byte (50 ns) it moves; at 1 ns/byte (1000 ns) it waits for dev0 and nothing moves.
  const Model model = TwoStatefulChains(/*a_was=*/0, /*b_was=*/0);
  Simulator simulator(model);
  const Assignment cheap = PlaceTowardsPrevious(model, 0.05);
  EXPECT_THAT(cheap, ElementsAre(0, 0, 1, 1));
  EXPECT_EQ(BytesMoved(model, cheap), 1000);
  EXPECT_EQ(simulator.Run(cheap).makespan_ns, 200);
  const Assignment dear = PlaceTowardsPrevious(model, 1.0);
  EXPECT_THAT(dear, ElementsAre(0, 0, 0, 0));
  EXPECT_EQ(BytesMoved(model, dear), 0);
  EXPECT_EQ(simulator.Run(dear).makespan_ns, 400);
}

}  // namespace
}  // namespace placement::engine::baselines
