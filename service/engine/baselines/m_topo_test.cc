#include "service/engine/baselines/m_topo.h"

#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/engine/baselines/baselines_test_util.h"

namespace placement::engine::baselines {
namespace {

using ::testing::ElementsAre;

// A chain of `n` ops, each holding `bytes` of output (its static memory in m-TOPO's model).
ProblemBuilder Chain(int n, int64_t bytes) {
  ProblemBuilder p;
  for (int i = 0; i < n; ++i) p.AddOp(100, bytes);
  for (int i = 0; i + 1 < n; ++i) p.AddEdge(i, i + 1, bytes);
  return p;
}

TEST(MTopoTest, FillsDevicesInOrderUpToAnEvenShare) {
  ProblemBuilder p = Chain(6, 100);
  p.AddDevices(3, 10'000);
  const Model model = p.Build();
  // Total 600 bytes over 3 devices: share 200 + largest op 100 = 300 per device.
  EXPECT_THAT(PlaceWith(*MakeMTopoPartitioner(), model), ElementsAre(0, 0, 0, 1, 1, 1));
}

TEST(MTopoTest, MovesToTheNextDeviceWhenTheCapacityIsReached) {
  ProblemBuilder p = Chain(6, 100);
  p.AddDevices(3, 250);
  const Model model = p.Build();
  EXPECT_THAT(PlaceWith(*MakeMTopoPartitioner(), model), ElementsAre(0, 0, 1, 1, 2, 2));
}

TEST(MTopoTest, PlacesAColocationGroupAsOneUnit) {
  ProblemBuilder p = Chain(6, 100);
  p.Colocate(0, "g");
  p.Colocate(5, "g");
  p.AddDevices(3, 250);
  const Model model = p.Build();
  // op0 reserves 200 bytes (itself and op5) on dev0, so op1 no longer fits there (300 > 250); op5
  // follows its group.
  EXPECT_THAT(PlaceWith(*MakeMTopoPartitioner(), model), ElementsAre(0, 1, 1, 2, 2, 0));
}

TEST(MTopoTest, APinnedOpDoesNotCloseTheCurrentDevice) {
  ProblemBuilder p = Chain(4, 100);
  p.Pin(1, 2);
  p.AddDevices(3, 10'000);
  const Model model = p.Build();
  // Share: 400 / 3 + 100 = 233 per device.
  EXPECT_THAT(PlaceWith(*MakeMTopoPartitioner(), model), ElementsAre(0, 2, 0, 1));
}

TEST(MTopoTest, StillPlacesEverythingWhenNothingFits) {
  ProblemBuilder p = Chain(4, 1000);
  p.AddDevices(2, 1500);
  const Model model = p.Build();
  const Assignment assignment = PlaceWith(*MakeMTopoPartitioner(), model);
  EXPECT_THAT(assignment, ElementsAre(0, 1, 0, 1));  // each next op where the most room is left
}

}  // namespace
}  // namespace placement::engine::baselines
