#include "service/engine/solve/score_assignment.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/engine/model/model_builder.h"

namespace placement::engine {
namespace {

using ::testing::HasSubstr;

// "zeta" (100 ns, 600 persistent bytes) -> "alpha" (50 ns, 500 bytes), 1000 bytes on the edge, listed
// out of name order so that the request order differs from the canonical one; two 2000-byte GPUs.
v1::PlaceRequest TwoOpRequest() {
  v1::PlaceRequest request;
  v1::Op* zeta = request.mutable_graph()->add_ops();
  zeta->set_name("zeta");
  zeta->set_compute_ns(100);
  zeta->set_persistent_bytes(600);
  v1::Op* alpha = request.mutable_graph()->add_ops();
  alpha->set_name("alpha");
  alpha->set_compute_ns(50);
  alpha->set_persistent_bytes(500);
  v1::Edge* edge = request.mutable_graph()->add_edges();
  edge->set_src(0);
  edge->set_dst(1);
  edge->set_bytes(1000);
  for (const char* name : {"d0", "d1"}) {
    v1::Device* device = request.mutable_cluster()->add_devices();
    device->set_name(name);
    device->set_kind("gpu");
    device->set_memory_bytes(2000);
  }
  request.mutable_cluster()->mutable_intra_node()->set_bandwidth_bytes_per_second(1000000000);
  request.mutable_cluster()->mutable_intra_node()->set_latency_ns(5);
  return request;
}

// The assignment is in canonical op ids; the placement lists devices in the request's op order.
TEST(ScoreAssignmentTest, ReportsDevicesInRequestOrderWithTheSimulatorsMetrics) {
  absl::StatusOr<Model> model = BuildModel(TwoOpRequest());
  ASSERT_TRUE(model.ok()) << model.status();
  Assignment assignment(2);
  assignment[model->op_of_request_index[0]] = 1;  // zeta
  assignment[model->op_of_request_index[1]] = 0;  // alpha
  const v1::Placement placement = ScoreAssignment(*model, assignment);
  ASSERT_EQ(placement.device_size(), 2);
  EXPECT_EQ(placement.device(0), 1);
  EXPECT_EQ(placement.device(1), 0);
  EXPECT_EQ(placement.outcome(), v1::FEASIBLE);
  EXPECT_EQ(placement.reason(), "");
  // zeta [0, 100) on d1; 5 + 1000 ns transfer; alpha [1105, 1155) on d0.
  EXPECT_EQ(placement.metrics().makespan_ns(), 1155);
  EXPECT_EQ(placement.metrics().transfer_bytes(), 1000);
  EXPECT_EQ(placement.metrics().transfer_count(), 1);
  ASSERT_EQ(placement.metrics().devices_size(), 2);
  EXPECT_EQ(placement.metrics().devices(1).peak_memory_bytes(), 600);
  EXPECT_EQ(placement.metrics().devices(0).peak_memory_bytes(), 500 + 1000);
  EXPECT_EQ(placement.metrics().devices(0).capacity_bytes(), 2000);
  EXPECT_EQ(placement.metrics().devices(1).op_count(), 1);
  EXPECT_GT(placement.metrics().lower_bound_ns(), 0);
}

TEST(ScoreAssignmentTest, BrokenPinIsInfeasibleAndListedByRequestIndex) {
  v1::PlaceRequest request = TwoOpRequest();
  request.mutable_graph()->mutable_ops(1)->set_pinned_device("d1");  // alpha
  absl::StatusOr<Model> model = BuildModel(request);
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<v1::ConstraintViolation> problems;
  const v1::Placement placement = ScoreAssignment(*model, Assignment{0, 0}, &problems);
  EXPECT_EQ(placement.outcome(), v1::INFEASIBLE);
  EXPECT_THAT(placement.reason(), HasSubstr("1 constraint violation(s)"));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].field(), "device[1]");
  EXPECT_THAT(problems[0].description(), HasSubstr("alpha"));
}

TEST(ScoreAssignmentTest, OverflowNamesTheDeviceAndTheBytesShort) {
  v1::PlaceRequest request = TwoOpRequest();
  request.mutable_cluster()->mutable_devices(0)->set_memory_bytes(1000);
  absl::StatusOr<Model> model = BuildModel(request);
  ASSERT_TRUE(model.ok()) << model.status();
  const v1::Placement placement = ScoreAssignment(*model, Assignment{0, 0});
  EXPECT_EQ(placement.outcome(), v1::INFEASIBLE);
  EXPECT_THAT(placement.reason(), HasSubstr("\"d0\""));
  EXPECT_THAT(placement.reason(), HasSubstr("100 bytes short"));
}

}  // namespace
}  // namespace placement::engine
