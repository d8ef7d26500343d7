// Tests of ListSchedulerBase's bookkeeping on its own (HEFT's and m-ETF's tests cover it in use).
#include "service/engine/baselines/list_scheduler_base.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/engine/baselines/baselines_test_util.h"

namespace placement::engine::baselines {
namespace {

using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::Ne;

// Exposes the protected steps to the tests.
class OpenScheduler : public ListSchedulerBase {
 public:
  using ListSchedulerBase::ListSchedulerBase;
  using ListSchedulerBase::ArrivalOn;
  using ListSchedulerBase::BindUnit;
  using ListSchedulerBase::device_;
  using ListSchedulerBase::finish_;
  using ListSchedulerBase::Need;
  using ListSchedulerBase::ResultOfScheduled;
  using ListSchedulerBase::used_;
};

TEST(ListSchedulerBaseTest, TheFirstPlacedMemberBindsTheUnitAndItsPersistentBytesOnce) {
  ProblemBuilder p;
  const int a = p.AddOp(10, 0, /*persistent_bytes=*/100);
  const int b = p.AddOp(10, 0, /*persistent_bytes=*/50);
  p.Colocate(a, "g");
  p.Colocate(b, "g");
  p.AddDevices(2, 1000);
  const Model model = p.Build();
  OpenScheduler s(model, SolveContext());
  EXPECT_EQ(s.Need(a, 1), 150);  // the whole unit's persistent bytes come with its first member
  EXPECT_TRUE(s.BindUnit(a, 1));
  EXPECT_FALSE(s.BindUnit(b, 1));
  EXPECT_THAT(s.used_, ElementsAre(0, 150));
  EXPECT_EQ(s.Need(b, 1), 0);  // bound already: nothing more to add
}

TEST(ListSchedulerBaseTest, ArrivalIsTheLatestInputIncludingTheTransfer) {
  ProblemBuilder p;  // links: 1 byte per ns, no latency
  const int x = p.AddOp(100, 400), y = p.AddOp(300, 100), z = p.AddOp(10);
  p.AddEdge(x, z, 400);
  p.AddEdge(y, z, 100);
  p.AddDevices(2, 1 << 20);
  const Model model = p.Build();
  OpenScheduler s(model, SolveContext());
  s.device_[x] = 0;
  s.finish_[x] = 100;
  s.device_[y] = 1;
  s.finish_[y] = 300;
  EXPECT_EQ(s.ArrivalOn(z, 0), 400);  // y's output: 300 + 100 ns over the link
  EXPECT_EQ(s.ArrivalOn(z, 1), 500);  // x's output: 100 + 400 ns over the link
}

TEST(ListSchedulerBaseTest, AnswerIsCompletedAndTimeLimitedOnlyWhenStoppedEarly) {
  ProblemBuilder p;
  for (int i = 0; i < 3; ++i) p.AddOp(10);
  p.AddDevices(2, 1000);
  const Model model = p.Build();
  OpenScheduler s(model, SolveContext());
  s.device_ = {1, 0, 1};
  const PartitionResult all = s.ResultOfScheduled(3);
  EXPECT_FALSE(all.time_limited);
  EXPECT_THAT(all.assignment, ElementsAre(1, 0, 1));

  s.device_ = {1, kNone, kNone};
  const PartitionResult stopped = s.ResultOfScheduled(1);
  EXPECT_TRUE(stopped.time_limited);
  EXPECT_EQ(stopped.assignment[0], 1);
  EXPECT_THAT(stopped.assignment, Each(Ne(kNone)));
}

}  // namespace
}  // namespace placement::engine::baselines
