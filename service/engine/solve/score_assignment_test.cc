#include "service/engine/solve/score_assignment.h"

#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/model/replica_group.h"
#include "service/engine/sim/simulator.h"
#include "tests/testutil/random_graph.h"

namespace placement::engine {
namespace {

using ::testing::HasSubstr;

// Ops in scrambled name order, so request order, canonical order and topological order all differ.
v1::PlaceRequest RandomRequest(uint64_t seed) {
  testutil::RandomGraphOptions options;
  options.num_ops = 40;
  options.num_devices = 3;
  options.seed = seed;
  return testutil::RandomLayeredRequest(options);
}

// Device of canonical op v: a deterministic spread over the devices.
Assignment Spread(const Model& model) {
  Assignment assignment(model.num_ops());
  for (OpId v = 0; v < model.num_ops(); ++v) assignment[v] = (v * 7 + 1) % model.num_devices();
  return assignment;
}

// The placement is the simulator's verdict, with devices listed in the caller's op order.
TEST(ScoreAssignmentTest, MetricsAreTheSimulatorsAndDevicesFollowRequestOrder) {
  for (uint64_t seed : {1, 2, 3}) {
    absl::StatusOr<Model> model = BuildModel(RandomRequest(seed));
    ASSERT_TRUE(model.ok()) << model.status();
    const Assignment assignment = Spread(*model);
    const v1::Placement placement = ScoreAssignment(*model, assignment);

    ASSERT_EQ(placement.device_size(), model->num_ops());
    for (int32_t i = 0; i < placement.device_size(); ++i) {
      EXPECT_EQ(placement.device(i), assignment[model->op_of_request_index[i]]) << i;
    }
    Simulator simulator(*model);
    const SimResult& sim = simulator.Run(assignment);
    const v1::PlacementMetrics& metrics = placement.metrics();
    EXPECT_EQ(metrics.makespan_ns(), sim.makespan_ns);
    EXPECT_EQ(metrics.lower_bound_ns(), LowerBoundNs(*model));
    EXPECT_EQ(metrics.transfer_bytes(), sim.transfer_bytes);
    EXPECT_EQ(metrics.transfer_count(), sim.transfer_count);
    ASSERT_EQ(metrics.devices_size(), model->num_devices());
    for (DeviceId d = 0; d < model->num_devices(); ++d) {
      EXPECT_EQ(metrics.devices(d).peak_memory_bytes(), sim.peak_memory_bytes[d]);
      EXPECT_EQ(metrics.devices(d).peak_time_ns(), sim.peak_time_ns[d]);
      EXPECT_EQ(metrics.devices(d).busy_ns(), sim.busy_ns[d]);
      EXPECT_EQ(metrics.devices(d).op_count(), sim.op_count[d]);
      EXPECT_EQ(metrics.devices(d).capacity_bytes(), model->capacity_bytes[d]);
    }
    EXPECT_EQ(placement.outcome(), v1::FEASIBLE) << placement.reason();
    EXPECT_EQ(placement.reason(), "");
  }
}

// Re-placement under data parallelism: every replica group holds a copy of each op's state, so the
// bytes moved are D × those of the ops that change device (ops_moved counts each op once).
TEST(ScoreAssignmentTest, BytesMovedCountEveryReplicaGroupsCopy) {
  testutil::RandomGraphOptions options;
  options.num_ops = 40;
  options.num_devices = 4;
  options.seed = 5;
  v1::PlaceRequest request = testutil::RandomLayeredRequest(options);
  for (int i = 0; i < request.graph().ops_size(); ++i) {
    request.mutable_graph()->mutable_ops(i)->set_persistent_bytes(1000 + i);
    (*request.mutable_options()->mutable_previous_placement())[request.graph().ops(i).name()] =
        request.cluster().devices(0).name();
  }
  for (const int32_t replicas : {1, 2}) {
    request.mutable_options()->set_data_parallel(replicas);
    absl::StatusOr<Model> full = BuildModel(request);
    ASSERT_TRUE(full.ok()) << full.status();
    // As Solve gives it to every algorithm: group 0's devices.
    const std::optional<Model> model = replicas > 1 ? ReplicaGroupModel(*full, replicas) : *std::move(full);
    ASSERT_EQ(model->num_devices(), 4 / replicas);
    const Assignment assignment = Spread(*model);
    int64_t ops = 0, bytes = 0;
    for (OpId v = 0; v < model->num_ops(); ++v) {
      if (assignment[v] == 0) continue;
      ++ops;
      bytes += model->persistent_bytes[v];
    }
    ASSERT_GT(ops, 0);
    const v1::Placement placement = ScoreAssignment(*model, assignment);
    EXPECT_EQ(placement.metrics().ops_moved(), ops) << replicas;
    EXPECT_EQ(placement.metrics().bytes_moved(), replicas * bytes) << replicas;
    EXPECT_EQ(BytesMoved(*model, assignment), replicas * bytes);
  }
}

TEST(ScoreAssignmentTest, BrokenPinIsInfeasibleAndListedByRequestIndex) {
  v1::PlaceRequest request = RandomRequest(4);
  request.mutable_graph()->mutable_ops(5)->set_pinned_device(request.cluster().devices(2).name());
  absl::StatusOr<Model> model = BuildModel(request);
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<v1::ConstraintViolation> problems;
  const v1::Placement placement =
      ScoreAssignment(*model, Assignment(model->num_ops(), 0), &problems);
  EXPECT_EQ(placement.outcome(), v1::INFEASIBLE);
  EXPECT_THAT(placement.reason(), HasSubstr("1 constraint violation(s)"));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].field(), "device[5]");
  EXPECT_THAT(problems[0].description(), HasSubstr(request.graph().ops(5).name()));
}

TEST(ScoreAssignmentTest, OverflowNamesTheDeviceAndTheBytesShort) {
  v1::PlaceRequest request = RandomRequest(5);
  absl::StatusOr<Model> roomy = BuildModel(request);
  ASSERT_TRUE(roomy.ok()) << roomy.status();
  const Assignment all_on_first(roomy->num_ops(), 0);
  const int64_t peak = ScoreAssignment(*roomy, all_on_first).metrics().devices(0).peak_memory_bytes();
  ASSERT_GT(peak, 100);

  request.mutable_cluster()->mutable_devices(0)->set_memory_bytes(peak - 100);
  absl::StatusOr<Model> tight = BuildModel(request);
  ASSERT_TRUE(tight.ok()) << tight.status();
  const v1::Placement placement = ScoreAssignment(*tight, all_on_first);
  EXPECT_EQ(placement.outcome(), v1::INFEASIBLE);
  EXPECT_THAT(placement.reason(), HasSubstr("\"" + request.cluster().devices(0).name() + "\""));
  EXPECT_THAT(placement.reason(), HasSubstr("100 bytes short"));
  // Another assignment could fit: the reason is the overflow alone.
  EXPECT_THAT(placement.reason(), ::testing::Not(HasSubstr("no placement fits")));

  // No assignment could: every device smaller than a third of the persistent bytes. The reason says so
  // first.
  int64_t persistent = 0;
  for (const v1::Op& op : request.graph().ops()) persistent += op.persistent_bytes();
  ASSERT_GT(persistent, 0);
  for (v1::Device& device : *request.mutable_cluster()->mutable_devices()) {
    device.set_memory_bytes(persistent / 4);
  }
  absl::StatusOr<Model> hopeless = BuildModel(request);
  ASSERT_TRUE(hopeless.ok()) << hopeless.status();
  const v1::Placement nothing_fits = ScoreAssignment(*hopeless, Spread(*hopeless));
  EXPECT_EQ(nothing_fits.outcome(), v1::INFEASIBLE);
  EXPECT_THAT(nothing_fits.reason(), ::testing::StartsWith("no placement fits these devices"));
  EXPECT_THAT(nothing_fits.reason(), HasSubstr("bytes short"));
}

}  // namespace
}  // namespace placement::engine
