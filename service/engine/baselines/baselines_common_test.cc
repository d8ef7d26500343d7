// Properties every baseline must have, checked on random layered graphs: complete assignments that honour
// pins, kinds and colocation; determinism per seed and independence from the order of ops in the request;
// a usable answer when the deadline has already passed; no memory overflow when memory is plentiful.
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "service/engine/baselines/baselines_test_util.h"
#include "service/engine/baselines/heft.h"
#include "service/engine/baselines/m_etf.h"
#include "service/engine/baselines/m_topo.h"
#include "service/engine/baselines/metis.h"
#include "service/engine/baselines/pipeline.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/sim/constraints.h"
#include "service/engine/sim/simulator.h"
#include "tests/testutil/random_graph.h"

namespace placement::engine::baselines {
namespace {

struct Algorithm {
  std::string name;
  std::function<std::unique_ptr<Partitioner>()> make;
};

std::vector<Algorithm> AllBaselines() {
  return {{"m_topo", MakeMTopoPartitioner},
          {"m_etf", MakeMEtfPartitioner},
          {"heft", MakeHeftPartitioner},
          {"metis", MakeMetisPartitioner},
          {"pipeline", [] { return MakePipelinePartitioner(); }}};
}

class BaselineTest : public ::testing::TestWithParam<Algorithm> {};

Model BuildOrDie(const v1::PlaceRequest& request) {
  absl::StatusOr<Model> model = BuildModel(request);
  if (!model.ok()) {
    ADD_FAILURE() << model.status();
    std::abort();
  }
  return *std::move(model);
}

testutil::RandomGraphOptions ConstrainedOptions(uint64_t seed) {
  testutil::RandomGraphOptions options;
  options.num_ops = 400;
  options.avg_out_degree = 2.5;
  options.num_devices = 4;
  options.num_nodes = 2;
  options.heterogeneous_speeds = true;
  options.device_kinds = {"gpu", "gpu", "cpu"};
  options.colocation_fraction = 0.2;
  options.pinned_fraction = 0.05;
  options.kind_restricted_fraction = 0.1;
  options.device_memory_bytes = int64_t{64} << 30;
  options.seed = seed;
  return options;
}

TEST_P(BaselineTest, HonoursPinsKindsAndColocation) {
  const std::unique_ptr<Partitioner> algorithm = GetParam().make();
  for (uint64_t seed : {1, 2, 3}) {
    const Model model = BuildOrDie(testutil::RandomLayeredRequest(ConstrainedOptions(seed)));
    const Assignment assignment = PlaceWith(*algorithm, model);
    ASSERT_EQ(static_cast<int32_t>(assignment.size()), model.num_ops());
    for (DeviceId d : assignment) ASSERT_TRUE(d >= 0 && d < model.num_devices());
    const std::vector<ConstraintProblem> problems = CheckConstraints(model, assignment);
    EXPECT_TRUE(problems.empty()) << "seed " << seed << ": " << problems.front().description;
  }
}

TEST_P(BaselineTest, FitsWhenMemoryIsPlentiful) {
  const std::unique_ptr<Partitioner> algorithm = GetParam().make();
  testutil::RandomGraphOptions options = ConstrainedOptions(4);
  options.device_memory_bytes = int64_t{1} << 40;
  const Model model = BuildOrDie(testutil::RandomLayeredRequest(options));
  Simulator simulator(model);
  const SimResult& result = simulator.Run(PlaceWith(*algorithm, model));
  EXPECT_TRUE(result.MemoryFits(model));
  EXPECT_GE(result.makespan_ns, LowerBoundNs(model));
}

TEST_P(BaselineTest, IsDeterministicAndIndependentOfRequestOrder) {
  const std::unique_ptr<Partitioner> algorithm = GetParam().make();
  const v1::PlaceRequest request = testutil::RandomLayeredRequest(ConstrainedOptions(5));
  const Model model = BuildOrDie(request);
  const Model shuffled = BuildOrDie(testutil::ShuffleRequest(request, 11));
  const Assignment first = PlaceWith(*algorithm, model, 9);
  EXPECT_EQ(PlaceWith(*algorithm, model, 9), first);
  // Canonical op ids do not depend on the request's op order; compare devices by name all the same.
  const Assignment other = PlaceWith(*algorithm, shuffled, 9);
  for (OpId v = 0; v < model.num_ops(); ++v) {
    ASSERT_EQ(model.op_name[v], shuffled.op_name[v]);
    ASSERT_EQ(model.device_name[first[v]], shuffled.device_name[other[v]]) << model.op_name[v];
  }
}

TEST_P(BaselineTest, AnswersEvenWhenTheDeadlineHasPassed) {
  const std::unique_ptr<Partitioner> algorithm = GetParam().make();
  const Model model = BuildOrDie(testutil::RandomLayeredRequest(ConstrainedOptions(6)));
  SolveContext context;
  context.deadline = absl::InfinitePast();
  absl::StatusOr<PartitionResult> result = algorithm->Partition(model, context);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(static_cast<int32_t>(result->assignment.size()), model.num_ops());
  for (DeviceId d : result->assignment) ASSERT_TRUE(d >= 0 && d < model.num_devices());
  EXPECT_TRUE(CheckConstraints(model, result->assignment).empty());
}

TEST_P(BaselineTest, StopsWhenCancelled) {
  const std::unique_ptr<Partitioner> algorithm = GetParam().make();
  testutil::RandomGraphOptions options = ConstrainedOptions(7);
  options.num_ops = 20000;
  const Model model = BuildOrDie(testutil::RandomLayeredRequest(options));
  std::atomic<bool> cancelled{true};
  SolveContext context;
  context.cancelled = &cancelled;
  absl::StatusOr<PartitionResult> result = algorithm->Partition(model, context);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(CheckConstraints(model, result->assignment).empty());
  // m_topo is a single linear pass and may finish its stride before looking; the others stop early.
  if (GetParam().name != "m_topo") {
    EXPECT_TRUE(result->time_limited);
  }
}

// More devices than the list schedulers scan per op (kFullScanDevices): still complete, constrained and
// spread out.
TEST_P(BaselineTest, HandlesClustersOfHundredsOfDevices) {
  const std::unique_ptr<Partitioner> algorithm = GetParam().make();
  testutil::RandomGraphOptions options = ConstrainedOptions(8);
  options.num_ops = 3000;
  options.num_devices = 300;
  options.num_nodes = 30;
  const Model model = BuildOrDie(testutil::RandomLayeredRequest(options));
  const Assignment assignment = PlaceWith(*algorithm, model);
  ASSERT_EQ(static_cast<int32_t>(assignment.size()), model.num_ops());
  EXPECT_TRUE(CheckConstraints(model, assignment).empty());
  std::vector<uint8_t> used(model.num_devices(), 0);
  int32_t distinct = 0;
  for (DeviceId d : assignment) distinct += used[d]++ == 0;
  EXPECT_GT(distinct, 1);
}

TEST_P(BaselineTest, PutsEverythingOnTheOnlyDevice) {
  const std::unique_ptr<Partitioner> algorithm = GetParam().make();
  testutil::RandomGraphOptions options;
  options.num_ops = 50;
  options.num_devices = 1;
  const Model model = BuildOrDie(testutil::RandomLayeredRequest(options));
  EXPECT_EQ(PlaceWith(*algorithm, model), Assignment(model.num_ops(), 0));
}

TEST_P(BaselineTest, NamesItself) {
  EXPECT_EQ(GetParam().make()->name(), GetParam().name);
  EXPECT_FALSE(GetParam().make()->version().empty());
  EXPECT_FALSE(GetParam().make()->description().empty());
}

INSTANTIATE_TEST_SUITE_P(AllBaselines, BaselineTest, ::testing::ValuesIn(AllBaselines()),
                         [](const ::testing::TestParamInfo<Algorithm>& info) { return info.param.name; });

}  // namespace
}  // namespace placement::engine::baselines
