// End-to-end test of re-placement (PlacementOptions.previous_placement) through the real
// placement_server and its clients: place a step on four GPUs, lose the busiest one, re-place with
// the previous answer — the ops of the lost GPU move, little else does, the answer fits and reports
// what moved, it is cached under its own digest; placementctl's --previous flags send the same
// request; a previous placement naming an unknown op is INVALID_ARGUMENT naming the entry.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "client/placement_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/v1/placement_service.pb.h"
#include "service/engine/io/message_io.h"
#include "tests/e2e/server_process.h"
#include "tests/e2e/solving_suite.h"
#include "tests/testutil/random_graph.h"

namespace placement::e2e {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ReplacementE2ETest : public SolvingSuiteTest {
 protected:
  void SetUp() override {
    SolvingSuiteTest::SetUp();
    if (HasFatalFailure()) return;
    testutil::RandomGraphOptions graph;
    graph.num_ops = 400;
    graph.num_devices = 4;
    graph.persistent_fraction = 0.5;
    graph.colocation_fraction = 0.1;
    graph.seed = 21;
    request_ = testutil::RandomLayeredRequest(graph);
    request_.mutable_options()->mutable_time_limit()->set_seconds(30);
  }
  static std::string Temp(const std::string& name) { return ::testing::TempDir() + "/" + name; }

  v1::PlaceRequest request_;
};

TEST_F(ReplacementE2ETest, LosingAGpuMovesItsOpsAndLittleElse) {
  absl::StatusOr<v1::PlaceResponse> fresh = client_->Place(request_);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  const v1::Placement& before = fresh->placement();
  ASSERT_EQ(before.outcome(), v1::FEASIBLE);
  // The busiest GPU leaves.
  std::vector<int> ops_on(4, 0);
  for (const int32_t d : before.device()) ++ops_on[d];
  const int lost =
      static_cast<int>(std::max_element(ops_on.begin(), ops_on.end()) - ops_on.begin());
  const std::string lost_name = request_.cluster().devices(lost).name();
  int64_t lost_bytes = 0, all_bytes = 0;
  for (int i = 0; i < request_.graph().ops_size(); ++i) {
    all_bytes += request_.graph().ops(i).persistent_bytes();
    if (before.device(i) == lost) lost_bytes += request_.graph().ops(i).persistent_bytes();
  }

  v1::PlaceRequest shrunk = request_;
  shrunk.mutable_cluster()->mutable_devices()->erase(
      shrunk.mutable_cluster()->mutable_devices()->begin() + lost);
  absl::StatusOr<v1::PlaceRequest> replacement = client::ReplacementRequest(shrunk, request_, before, 1e-3);
  ASSERT_TRUE(replacement.ok()) << replacement.status();
  const v1::PlaceRequest& replace = *replacement;
  EXPECT_EQ(replace.options().previous_placement().size(), request_.graph().ops_size());
  EXPECT_THAT(replace.options().departed_devices(), ElementsAre(lost_name));
  absl::StatusOr<v1::PlaceResponse> replaced = client_->Place(replace);
  ASSERT_TRUE(replaced.ok()) << replaced.status();
  const v1::Placement& after = replaced->placement();
  EXPECT_EQ(after.outcome(), v1::FEASIBLE) << after.reason();
  EXPECT_EQ(after.provenance().cache(), v1::MISS);
  EXPECT_FALSE(after.provenance().winner().empty());  // the previous placement, or a quick member
  ASSERT_EQ(after.device_size(), request_.graph().ops_size());
  for (const int32_t d : after.device()) EXPECT_LT(d, 3);
  EXPECT_GE(after.metrics().ops_moved(), ops_on[lost]);
  EXPECT_GE(after.metrics().bytes_moved(), lost_bytes);
  // The moves the caller priced: well under everything, the lost GPU's state and a little more at
  // most.
  EXPECT_LE(after.metrics().bytes_moved(), lost_bytes + all_bytes / 10);
  // The ops moved are those whose device name changed.
  int64_t moved = 0;
  for (int i = 0; i < request_.graph().ops_size(); ++i) {
    moved += shrunk.cluster().devices(after.device(i)).name() !=
             request_.cluster().devices(before.device(i)).name();
  }
  EXPECT_EQ(after.metrics().ops_moved(), moved);

  // Its own cache entry: a fresh request on the shrunk cluster has another digest; the same
  // re-placement again is a hit with the same answer.
  absl::StatusOr<v1::PlaceResponse> fresh_shrunk = client_->Place(shrunk);
  ASSERT_TRUE(fresh_shrunk.ok()) << fresh_shrunk.status();
  EXPECT_NE(fresh_shrunk->placement().provenance().request_digest(),
            after.provenance().request_digest());
  EXPECT_EQ(fresh_shrunk->placement().metrics().ops_moved(), 0);
  absl::StatusOr<v1::PlaceResponse> again = client_->Place(replace);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->placement().provenance().cache(), v1::HIT);
  EXPECT_EQ(again->placement().metrics().bytes_moved(), after.metrics().bytes_moved());

  // placementctl: the previous answer and its request as files, the shrunk request, --move_weight:
  // the same request (a cache hit with the same answer), and the summary says what moved.
  const std::string old_request = Temp("replace_old_request.pb");
  const std::string old_answer = Temp("replace_old_answer.json");
  const std::string new_request = Temp("replace_new_request.pb");
  ASSERT_TRUE(engine::WriteMessageFile(request_, old_request).ok());
  ASSERT_TRUE(engine::WriteMessageFile(*fresh, old_answer).ok());
  ASSERT_TRUE(engine::WriteMessageFile(shrunk, new_request).ok());
  const std::vector<std::string> ctl = {PlacementctlBinary(),
                                        "--server=" + server_->address(),
                                        "place",
                                        "--request=" + new_request,
                                        "--previous=" + old_answer,
                                        "--previous_request=" + old_request,
                                        "--move_weight=0.001",
                                        "--progress=never"};
  std::vector<std::string> as_json = ctl;
  as_json.push_back("--format=json");
  CommandResult json = RunCommand(as_json);
  ASSERT_EQ(json.exit_status, 0) << json.err;
  v1::Placement from_ctl;
  ASSERT_TRUE(engine::JsonToMessage(json.out, from_ctl).ok()) << json.out;
  EXPECT_EQ(from_ctl.provenance().cache(), v1::HIT);
  EXPECT_EQ(from_ctl.provenance().request_digest(), after.provenance().request_digest());
  EXPECT_EQ(from_ctl.metrics().ops_moved(), after.metrics().ops_moved());
  std::vector<std::string> as_summary = ctl;
  as_summary.push_back("--format=summary");
  CommandResult summary = RunCommand(as_summary);
  ASSERT_EQ(summary.exit_status, 0) << summary.err;
  EXPECT_THAT(summary.out, HasSubstr("moved "));
  EXPECT_THAT(summary.out, HasSubstr("of weights and state"));
  // The offline tool takes the same flags and computes the same digest.
  std::vector<std::string> offline = {OfflineBinary(),
                                      "place",
                                      "--request=" + new_request,
                                      "--previous=" + old_answer,
                                      "--previous_request=" + old_request,
                                      "--move_weight=0.001",
                                      "--format=json"};
  CommandResult local = RunCommand(offline);
  ASSERT_EQ(local.exit_status, 0) << local.err;
  v1::Placement from_offline;
  ASSERT_TRUE(engine::JsonToMessage(local.out, from_offline).ok()) << local.out;
  EXPECT_EQ(from_offline.provenance().request_digest(), after.provenance().request_digest());
  EXPECT_EQ(from_offline.outcome(), v1::FEASIBLE);
  // One flag without its partner is a usage error.
  CommandResult lonely =
      RunCommand({PlacementctlBinary(), "--server=" + server_->address(), "place",
                  "--request=" + new_request, "--previous=" + old_answer});
  EXPECT_NE(lonely.exit_status, 0);
  EXPECT_THAT(lonely.err, HasSubstr("--previous and --previous_request go together"));
}

TEST_F(ReplacementE2ETest, UnknownOpAndBadWeightAreNamedByField) {
  v1::PlaceRequest bad = request_;
  (*bad.mutable_options()->mutable_previous_placement())["no-such-op"] = "gpu0";
  bad.mutable_options()->set_move_weight_ns_per_byte(-2);
  absl::StatusOr<v1::PlaceResponse> answer = client_->Place(bad);
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(answer.status().message()),
              HasSubstr("options.previous_placement[\"no-such-op\"]: no op named \"no-such-op\""));
  EXPECT_THAT(std::string(answer.status().message()),
              HasSubstr("options.move_weight_ns_per_byte: "));
  // A device that left is not an error: listed as departed, or (without the list) beside devices
  // that are still there.
  v1::PlaceRequest departed = request_;
  auto& previous = *departed.mutable_options()->mutable_previous_placement();
  const std::string first = request_.graph().ops(0).name();
  const std::string second = request_.graph().ops(1).name();
  previous[first] = "gone";
  absl::StatusOr<v1::PlaceResponse> unlisted = client_->Place(departed);
  ASSERT_FALSE(unlisted.ok());  // no device of it is in the cluster: the names do not match
  EXPECT_THAT(std::string(unlisted.status().message()),
              HasSubstr("options.previous_placement: none of the devices it names is in cluster.devices"));
  departed.mutable_options()->add_departed_devices("gone");
  absl::StatusOr<v1::PlaceResponse> placed = client_->Place(departed);
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ(placed->placement().metrics().ops_moved(), 1);
  departed.mutable_options()->clear_departed_devices();
  previous[second] = request_.cluster().devices(0).name();
  placed = client_->Place(departed);
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_GE(placed->placement().metrics().ops_moved(), 1);
  // With the list, a name in neither the cluster nor the list is a misspelling.
  departed.mutable_options()->add_departed_devices("gone");
  previous[second] = "gpu-typo";
  absl::StatusOr<v1::PlaceResponse> misspelt = client_->Place(departed);
  ASSERT_FALSE(misspelt.ok());
  EXPECT_THAT(std::string(misspelt.status().message()),
              HasSubstr(absl::StrCat("options.previous_placement[\"", second, "\"]: device \"gpu-typo\" is "
                                     "neither in cluster.devices nor in options.departed_devices")));
}

}  // namespace
}  // namespace placement::e2e
