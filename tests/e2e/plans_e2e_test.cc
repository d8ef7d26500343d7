// End-to-end tests of training plans (api.md §2.1) through the real placement_server: a plan asked for
// over gRPC is answered with the plan used, cached under its own digest (plans never share a cache entry
// with the plain request), scored by Evaluate with the same numbers, and a bad plan is INVALID_ARGUMENT
// naming the field.
#include <memory>
#include <string>

#include "client/placement_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/engine/io/message_io.h"
#include "tests/e2e/server_process.h"
#include "tests/e2e/solving_suite.h"

namespace placement::e2e {
namespace {

using ::testing::HasSubstr;

constexpr char kTransformerStep[] = "tests/data/requests/bert_l3_training.json.gz";

class PlansE2ETest : public SolvingSuiteTest {
 protected:
  void SetUp() override {
    SolvingSuiteTest::SetUp();
    if (HasFatalFailure()) return;
    absl::Status read = engine::ReadMessageFile(SourcePath(kTransformerStep), request_);
    ASSERT_TRUE(read.ok()) << read;
    request_.mutable_options()->set_algorithm("pipeline");
    request_.mutable_options()->mutable_time_limit()->set_seconds(20);
  }

  v1::PlaceRequest request_;
};

TEST_F(PlansE2ETest, APlanIsAnsweredWithThePlanUsedAndItsOwnCacheEntry) {
  absl::StatusOr<v1::PlaceResponse> plain = client_->Place(request_);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->placement().plan().microbatches(), 1);
  EXPECT_EQ(plain->placement().plan().data_parallel(), 1);

  v1::PlaceRequest planned = request_;
  planned.mutable_options()->set_microbatches(8);
  absl::StatusOr<v1::PlaceResponse> first = client_->Place(planned);
  ASSERT_TRUE(first.ok()) << first.status();
  const v1::Placement& placement = first->placement();
  EXPECT_EQ(placement.plan().microbatches(), 8);
  EXPECT_GE(placement.plan().max_in_flight(), 1);
  EXPECT_LE(placement.plan().max_in_flight(), 8);
  EXPECT_EQ(placement.provenance().cache(), v1::MISS);
  EXPECT_NE(placement.provenance().request_digest(), plain->placement().provenance().request_digest());
  EXPECT_EQ(placement.provenance().graph_digest(), plain->placement().provenance().graph_digest());
  EXPECT_GT(placement.metrics().microbatches_per_second(), 0.0);
  // Eight microbatches take longer than one, but deliver more per second on the same devices.
  EXPECT_GT(placement.metrics().makespan_ns(), plain->placement().metrics().makespan_ns());
  EXPECT_GT(placement.metrics().microbatches_per_second(),
            plain->placement().metrics().microbatches_per_second());

  absl::StatusOr<v1::PlaceResponse> again = client_->Place(planned);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->placement().provenance().cache(), v1::HIT);
  EXPECT_EQ(again->placement().plan().max_in_flight(), placement.plan().max_in_flight());
  EXPECT_EQ(again->placement().metrics().makespan_ns(), placement.metrics().makespan_ns());

  // Evaluate with the plan the answer reports gives the same step and peaks.
  v1::EvaluateRequest evaluate;
  *evaluate.mutable_graph() = planned.graph();
  *evaluate.mutable_cluster() = planned.cluster();
  *evaluate.mutable_options() = planned.options();
  evaluate.mutable_options()->set_max_in_flight(placement.plan().max_in_flight());
  *evaluate.mutable_device() = placement.device();
  absl::StatusOr<v1::EvaluateResponse> scored = client_->Evaluate(evaluate);
  ASSERT_TRUE(scored.ok()) << scored.status();
  EXPECT_EQ(scored->placement().metrics().makespan_ns(), placement.metrics().makespan_ns());
  ASSERT_EQ(scored->placement().metrics().devices_size(), placement.metrics().devices_size());
  for (int d = 0; d < placement.metrics().devices_size(); ++d) {
    EXPECT_EQ(scored->placement().metrics().devices(d).peak_memory_bytes(),
              placement.metrics().devices(d).peak_memory_bytes());
  }
}

TEST_F(PlansE2ETest, DataParallelReplicasPlaceGroupZero) {
  v1::PlaceRequest planned = request_;
  planned.mutable_options()->set_microbatches(2);
  planned.mutable_options()->set_data_parallel(0);  // the server chooses
  absl::StatusOr<v1::PlaceResponse> placed = client_->Place(planned);
  ASSERT_TRUE(placed.ok()) << placed.status();
  const int32_t replicas = placed->placement().plan().data_parallel();
  const int32_t devices = planned.cluster().devices_size();
  ASSERT_GE(replicas, 1);
  EXPECT_EQ(devices % replicas, 0);
  EXPECT_EQ(placed->placement().metrics().devices_size(), devices / replicas);
  for (const int32_t d : placed->placement().device()) EXPECT_LT(d, devices / replicas);
}

TEST_F(PlansE2ETest, ABadPlanIsInvalidArgumentNamingTheField) {
  v1::PlaceRequest planned = request_;
  planned.mutable_options()->set_microbatches(8);
  planned.mutable_options()->set_max_in_flight(9);
  absl::StatusOr<v1::PlaceResponse> placed = client_->Place(planned);
  ASSERT_FALSE(placed.ok());
  EXPECT_EQ(placed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(placed.status().message(), HasSubstr("options.max_in_flight: 9 exceeds microbatches 8"));

  planned = request_;
  planned.mutable_options()->set_data_parallel(2);  // the bundled step has 3 devices
  placed = client_->Place(planned);
  ASSERT_FALSE(placed.ok());
  EXPECT_EQ(placed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(placed.status().message(), HasSubstr("options.data_parallel: 2 does not divide 3 devices"));
}

}  // namespace
}  // namespace placement::e2e
