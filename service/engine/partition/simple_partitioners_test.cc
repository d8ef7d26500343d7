#include "service/engine/partition/simple_partitioners.h"

#include <string>

#include "gtest/gtest.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/sim/constraints.h"

namespace placement::engine {
namespace {

// A chain x0 -> x1 -> ... -> x5 on three devices; dev1 is the fastest.
v1::PlaceRequest ChainRequest() {
  v1::PlaceRequest request;
  for (int i = 0; i < 6; ++i) {
    v1::Op* op = request.mutable_graph()->add_ops();
    op->set_name("x" + std::to_string(i));
    op->set_compute_ns(100);
    if (i > 0) {
      v1::Edge* edge = request.mutable_graph()->add_edges();
      edge->set_src(i - 1);
      edge->set_dst(i);
      edge->set_bytes(8);
    }
  }
  for (int d = 0; d < 3; ++d) {
    v1::Device* device = request.mutable_cluster()->add_devices();
    device->set_name("dev" + std::to_string(d));
    device->set_kind("gpu");
    device->set_memory_bytes(1 << 20);
    device->set_speed(d == 1 ? 2.0 : 1.0);
  }
  request.mutable_cluster()->mutable_intra_node()->set_bandwidth_bytes_per_second(1000000000);
  return request;
}

TEST(SingleDeviceTest, PutsEverythingOnTheFastestDevice) {
  absl::StatusOr<Model> model = BuildModel(ChainRequest());
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<PartitionResult> result = MakeSingleDevicePartitioner()->Partition(*model, {});
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->assignment, Assignment(6, 1));
}

TEST(SingleDeviceTest, HonoursPins) {
  v1::PlaceRequest request = ChainRequest();
  request.mutable_graph()->mutable_ops(3)->set_pinned_device("dev2");
  absl::StatusOr<Model> model = BuildModel(request);
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<PartitionResult> result = MakeSingleDevicePartitioner()->Partition(*model, {});
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->assignment[3], 2);
  EXPECT_TRUE(CheckConstraints(*model, result->assignment).empty());
}

TEST(RoundRobinTest, CyclesThroughDevicesInTopologicalOrder) {
  absl::StatusOr<Model> model = BuildModel(ChainRequest());
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<PartitionResult> result = MakeRoundRobinPartitioner()->Partition(*model, {});
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->assignment, (Assignment{0, 1, 2, 0, 1, 2}));
}

TEST(FastestDeviceTest, PrefersSpeedThenMemoryThenTheFirst) {
  v1::PlaceRequest request = ChainRequest();
  absl::StatusOr<Model> model = BuildModel(request);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(FastestDevice(*model), 1);
  request.mutable_cluster()->mutable_devices(1)->set_speed(1.0);  // all equal: the first
  model = BuildModel(request);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(FastestDevice(*model), 0);
  request.mutable_cluster()->mutable_devices(2)->set_memory_bytes(2 << 20);  // equal speed: more memory
  model = BuildModel(request);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(FastestDevice(*model), 2);
}

// The assignments other algorithms start from are exactly the two partitioners' answers.
TEST(SimpleAssignmentsTest, AreThePartitionersAnswers) {
  v1::PlaceRequest request = ChainRequest();
  request.mutable_graph()->mutable_ops(3)->set_pinned_device("dev2");
  absl::StatusOr<Model> model = BuildModel(request);
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<PartitionResult> single = MakeSingleDevicePartitioner()->Partition(*model, {});
  absl::StatusOr<PartitionResult> round_robin = MakeRoundRobinPartitioner()->Partition(*model, {});
  ASSERT_TRUE(single.ok() && round_robin.ok());
  EXPECT_EQ(SingleDeviceAssignment(*model), single->assignment);
  EXPECT_EQ(RoundRobinAssignment(*model), round_robin->assignment);
  EXPECT_EQ(SingleDeviceAssignment(*model), (Assignment{1, 1, 1, 2, 1, 1}));
}

}  // namespace
}  // namespace placement::engine
