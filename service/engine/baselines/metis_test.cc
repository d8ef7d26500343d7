#include "service/engine/baselines/metis.h"

#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/engine/baselines/baselines_test_util.h"
#include "service/engine/sim/constraints.h"
#include "service/engine/sim/simulator.h"

namespace placement::engine::baselines {
namespace {

// Two dense clusters of `size` ops (all pairs joined by heavy edges in id order), one light edge between.
ProblemBuilder TwoClusters(int size) {
  ProblemBuilder p;
  for (int i = 0; i < 2 * size; ++i) p.AddOp(1000, 1 << 20);
  for (int c = 0; c < 2; ++c) {
    for (int i = 0; i < size; ++i) {
      for (int j = i + 1; j < size; ++j) p.AddEdge(c * size + i, c * size + j, 1 << 20);
    }
  }
  p.AddEdge(size - 1, size, 1);
  return p;
}

TEST(MetisTest, CutsTheLightEdgeBetweenTwoDenseClusters) {
  ProblemBuilder p = TwoClusters(6);
  p.AddDevices(2, int64_t{1} << 30);
  const Model model = p.Build();
  const Assignment assignment = PlaceWith(*MakeMetisPartitioner(), model);
  for (int i = 1; i < 6; ++i) {
    EXPECT_EQ(assignment[i], assignment[0]);
    EXPECT_EQ(assignment[6 + i], assignment[6]);
  }
  EXPECT_NE(assignment[0], assignment[6]);
}

TEST(MetisTest, GivesTheFasterDeviceMoreWork) {
  // 40 independent equal ops (no edges to cut): part weights 3:1 follow the speeds.
  ProblemBuilder p;
  for (int i = 0; i < 40; ++i) p.AddOp(1000);
  p.AddDevice(int64_t{1} << 30, 3.0);
  p.AddDevice(int64_t{1} << 30, 1.0);
  const Model model = p.Build();
  const Assignment assignment = PlaceWith(*MakeMetisPartitioner(), model);
  int on_fast = 0;
  for (DeviceId d : assignment) on_fast += d == 0;
  EXPECT_GE(on_fast, 28);
  EXPECT_LE(on_fast, 32);
}

TEST(MetisTest, HonoursPinsKindsAndGroups) {
  ProblemBuilder p = TwoClusters(5);
  p.Pin(0, 2);
  p.AllowKind(7, "cpu");
  p.Colocate(3, "g");
  p.Colocate(8, "g");
  p.AddDevice(int64_t{1} << 30, 1.0, "gpu");
  p.AddDevice(int64_t{1} << 30, 1.0, "gpu");
  p.AddDevice(int64_t{1} << 30, 1.0, "cpu");
  const Model model = p.Build();
  const Assignment assignment = PlaceWith(*MakeMetisPartitioner(), model);
  EXPECT_TRUE(CheckConstraints(model, assignment).empty());
  EXPECT_EQ(assignment[0], 2);
  EXPECT_EQ(assignment[7], 2);
  EXPECT_EQ(assignment[3], assignment[8]);
}

TEST(MetisTest, RepairsMemoryAfterPartitioning) {
  // Equal speeds ask METIS for halves, but dev1 holds only a quarter of the weights.
  ProblemBuilder p;
  for (int i = 0; i < 16; ++i) p.AddOp(1000, 0, /*persistent_bytes=*/1000);
  for (int i = 0; i + 1 < 16; ++i) p.AddEdge(i, i + 1, 100);
  p.AddDevice(16'000);
  p.AddDevice(4'000);
  const Model model = p.Build();
  const Assignment assignment = PlaceWith(*MakeMetisPartitioner(), model);
  Simulator simulator(model);
  EXPECT_TRUE(simulator.Run(assignment).MemoryFits(model));
}

TEST(MetisTest, IsDeterministicForASeed) {
  ProblemBuilder p = TwoClusters(8);
  p.AddDevices(4, int64_t{1} << 30);
  const Model model = p.Build();
  EXPECT_EQ(PlaceWith(*MakeMetisPartitioner(), model, 5), PlaceWith(*MakeMetisPartitioner(), model, 5));
}

}  // namespace
}  // namespace placement::engine::baselines
