// Tests of CheckConstraints: each kind of violation, its message (ops and devices by name), the order of
// the problems (op by op, in name order), and malformed assignments (device out of range, wrong size).
#include "service/engine/sim/constraints.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/v1/placement.pb.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/model/model_test_util.h"

namespace placement::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// Devices: gpu0 (gpu), gpu1 (gpu), cpu0 (cpu). Ops (request order differs from name order):
//   w1 pinned to gpu1; x allowed on {cpu}; g_a, g_b, g_c in colocation group "grp"; free.
v1::PlaceRequest ConstrainedRequest() {
  v1::PlaceRequest request;
  AddTestOp(request, "x")->add_allowed_kinds("cpu");
  AddTestOp(request, "w1")->set_pinned_device("gpu1");
  AddTestOp(request, "g_c")->set_colocation_group("grp");
  AddTestOp(request, "g_a")->set_colocation_group("grp");
  AddTestOp(request, "g_b")->set_colocation_group("grp");
  AddTestOp(request, "free");
  for (const auto& [name, kind] : std::vector<std::pair<std::string, std::string>>{
           {"gpu0", "gpu"}, {"gpu1", "gpu"}, {"cpu0", "cpu"}}) {
    AddTestDevice(request, name, kind, 1 << 20)->set_node("n0");
  }
  request.mutable_cluster()->mutable_intra_node()->set_bandwidth_bytes_per_second(1'000'000'000);
  return request;
}

class ConstraintsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Model> model = BuildModel(ConstrainedRequest());
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
  }
  OpId Op(const std::string& name) const { return OpNamed(model_, name); }
  DeviceId Dev(const std::string& name) const { return DeviceNamed(model_, name); }
  // Everything satisfied: x on cpu0, w1 on gpu1, the group together on gpu0.
  Assignment Valid() const {
    Assignment a(model_.num_ops(), Dev("gpu0"));
    a[Op("x")] = Dev("cpu0");
    a[Op("w1")] = Dev("gpu1");
    return a;
  }
  Model model_;
};

TEST_F(ConstraintsTest, ValidAssignmentHasNoProblems) {
  EXPECT_THAT(CheckConstraints(model_, Valid()), IsEmpty());
  // The free op may go anywhere.
  Assignment a = Valid();
  a[Op("free")] = Dev("cpu0");
  EXPECT_THAT(CheckConstraints(model_, a), IsEmpty());
}

TEST_F(ConstraintsTest, PinViolationNamesOpAndDevices) {
  Assignment a = Valid();
  a[Op("w1")] = Dev("gpu0");
  const std::vector<ConstraintProblem> problems = CheckConstraints(model_, a);
  ASSERT_THAT(problems, SizeIs(1));
  EXPECT_EQ(problems[0].op, Op("w1"));
  EXPECT_EQ(problems[0].description, "op \"w1\" is pinned to \"gpu1\" but placed on \"gpu0\"");
}

TEST_F(ConstraintsTest, KindViolationNamesKinds) {
  Assignment a = Valid();
  a[Op("x")] = Dev("gpu1");
  const std::vector<ConstraintProblem> problems = CheckConstraints(model_, a);
  ASSERT_THAT(problems, SizeIs(1));
  EXPECT_EQ(problems[0].op, Op("x"));
  EXPECT_EQ(problems[0].description,
            "op \"x\" may run on kinds {cpu} but is placed on \"gpu1\" of kind \"gpu\"");
}

TEST_F(ConstraintsTest, ColocationReportsEachMemberApartFromTheFirst) {
  // The group's first member by name is g_a; g_b and g_c are moved away from it, each reported once.
  Assignment a = Valid();
  a[Op("g_b")] = Dev("gpu1");
  a[Op("g_c")] = Dev("cpu0");
  const std::vector<ConstraintProblem> problems = CheckConstraints(model_, a);
  EXPECT_THAT(problems, ElementsAre(Field(&ConstraintProblem::op, Op("g_b")),
                                    Field(&ConstraintProblem::op, Op("g_c"))));
  ASSERT_THAT(problems, SizeIs(2));
  EXPECT_EQ(problems[0].description,
            "op \"g_b\" is in colocation group \"grp\" with op \"g_a\" on \"gpu0\" but is placed on "
            "\"gpu1\"");
  // Moving the first member instead reports both others.
  Assignment b = Valid();
  b[Op("g_a")] = Dev("gpu1");
  EXPECT_THAT(CheckConstraints(model_, b),
              ElementsAre(Field(&ConstraintProblem::op, Op("g_b")),
                          Field(&ConstraintProblem::op, Op("g_c"))));
}

TEST_F(ConstraintsTest, SeveralProblemsComeInOpOrder) {
  Assignment a = Valid();
  a[Op("x")] = Dev("gpu0");
  a[Op("w1")] = Dev("cpu0");
  a[Op("g_c")] = Dev("gpu1");
  const std::vector<ConstraintProblem> problems = CheckConstraints(model_, a);
  // Name order: free, g_a, g_b, g_c, w1, x.
  EXPECT_THAT(problems, ElementsAre(Field(&ConstraintProblem::op, Op("g_c")),
                                    Field(&ConstraintProblem::op, Op("w1")),
                                    Field(&ConstraintProblem::op, Op("x"))));
}

TEST_F(ConstraintsTest, DeviceOutOfRangeAndWrongSize) {
  Assignment a = Valid();
  a[Op("free")] = 7;
  std::vector<ConstraintProblem> problems = CheckConstraints(model_, a);
  ASSERT_THAT(problems, SizeIs(1));
  EXPECT_EQ(problems[0].op, Op("free"));
  EXPECT_EQ(problems[0].description, "op \"free\" is placed on device 7 but the cluster has 3 devices");
  // A group member out of range is reported for the range only; the others are not blamed for it.
  Assignment b = Valid();
  b[Op("g_a")] = -1;
  problems = CheckConstraints(model_, b);
  ASSERT_THAT(problems, SizeIs(1));
  EXPECT_EQ(problems[0].op, Op("g_a"));

  problems = CheckConstraints(model_, Assignment(2, 0));
  ASSERT_THAT(problems, SizeIs(1));
  EXPECT_EQ(problems[0].op, kNone);
  EXPECT_EQ(problems[0].description, "the assignment has 2 entries but the graph has 6 ops");
}

}  // namespace
}  // namespace placement::engine
