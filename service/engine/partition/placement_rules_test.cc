#include "service/engine/partition/placement_rules.h"

#include <string>

#include "gtest/gtest.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/model/model_test_util.h"
#include "service/engine/sim/constraints.h"

namespace placement::engine {
namespace {

// Three devices: gpu0, gpu1 (kind gpu), cpu0 (kind cpu). Ops: a, b (group g), c (pinned to gpu1),
// d (cpu only), e (free).
v1::PlaceRequest ConstrainedRequest() {
  v1::PlaceRequest request;
  AddTestOp(request, "a")->set_colocation_group("g");
  AddTestOp(request, "b")->set_colocation_group("g");
  AddTestOp(request, "c")->set_pinned_device("gpu1");
  AddTestOp(request, "d")->add_allowed_kinds("cpu");
  AddTestOp(request, "e");
  for (const char* name : {"gpu0", "gpu1", "cpu0"}) {
    AddTestDevice(request, name, std::string(name).substr(0, 3), 1000);
  }
  request.mutable_cluster()->mutable_intra_node()->set_bandwidth_bytes_per_second(1000000000);
  return request;
}

TEST(PlacementRulesTest, AnswersPinsKindsAndGroups) {
  absl::StatusOr<Model> model = BuildModel(ConstrainedRequest());
  ASSERT_TRUE(model.ok()) << model.status();
  PlacementRules rules(*model);
  // Canonical ids follow names: a=0, b=1, c=2, d=3, e=4.
  EXPECT_TRUE(rules.Allowed(0, 0));
  EXPECT_FALSE(rules.Allowed(2, 0));
  EXPECT_TRUE(rules.Allowed(2, 1));
  EXPECT_EQ(rules.FixedDevice(2), 1);
  EXPECT_FALSE(rules.Allowed(3, 0));
  EXPECT_TRUE(rules.Allowed(3, 2));
  EXPECT_EQ(rules.FirstAllowedFrom(3, 0), 2);
  EXPECT_EQ(rules.FirstAllowedFrom(4, 1), 1);
}

TEST(PlacementRulesTest, GroupInheritsAMembersPin) {
  v1::PlaceRequest request = ConstrainedRequest();
  request.mutable_graph()->mutable_ops(1)->set_pinned_device("cpu0");  // b, in group g
  absl::StatusOr<Model> model = BuildModel(request);
  ASSERT_TRUE(model.ok()) << model.status();
  PlacementRules rules(*model);
  EXPECT_EQ(rules.FixedDevice(0), 2);  // a follows b's pin
  EXPECT_FALSE(rules.Allowed(0, 0));
  EXPECT_TRUE(rules.Allowed(0, 2));
}

TEST(PlacementRulesTest, EnforceRepairsEveryConstraint) {
  absl::StatusOr<Model> model = BuildModel(ConstrainedRequest());
  ASSERT_TRUE(model.ok()) << model.status();
  Assignment assignment = {0, 1, 0, 0, 2};  // group split, c off its pin, d on a gpu
  ASSERT_FALSE(CheckConstraints(*model, assignment).empty());
  PlacementRules(*model).Enforce(assignment);
  EXPECT_TRUE(CheckConstraints(*model, assignment).empty());
  EXPECT_EQ(assignment[0], assignment[1]);
  EXPECT_EQ(assignment[0], 0);  // the group stays with its first member
  EXPECT_EQ(assignment[2], 1);
  EXPECT_EQ(assignment[3], 2);
  EXPECT_EQ(assignment[4], 2);  // untouched: it was allowed
}

}  // namespace
}  // namespace placement::engine
