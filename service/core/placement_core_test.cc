#include "service/core/placement_core.h"

#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/cache/lru_cache.h"
#include "service/common/status_payloads.h"
#include "tests/testutil/random_graph.h"

namespace placement::core {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using testutil::DevicesByName;

v1::PlaceRequest Request(int32_t ops, uint64_t seed, const std::string& algorithm) {
  testutil::RandomGraphOptions options;
  options.num_ops = ops;
  options.num_devices = 3;
  options.seed = seed;
  options.algorithm = algorithm;
  return testutil::RandomLayeredRequest(options);
}

const jobs::JobResult& AwaitDone(const std::shared_ptr<jobs::Job>& job) {
  auto done = std::make_shared<absl::Notification>();
  if (job->AddListener([done](const jobs::Job& j) {
        if (j.done() && !done->HasBeenNotified()) done->Notify();
      }) != 0) {
    done->WaitForNotification();
  }
  return job->result();
}

// Counts what the core reports (service/server's ServiceMetrics turns the same calls into Prometheus
// counters).
class CountingObserver : public CoreObserver {
 public:
  void RecordCacheLookup(v1::CacheResult result) override {
    absl::MutexLock lock(&mu_);
    ++lookups_[result];
  }
  void RecordCacheRejected(absl::string_view reason) override {
    absl::MutexLock lock(&mu_);
    ++rejected_[std::string(reason)];
  }
  int lookups(v1::CacheResult result) const {
    absl::MutexLock lock(&mu_);
    auto it = lookups_.find(result);
    return it == lookups_.end() ? 0 : it->second;
  }

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<int, int> lookups_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> rejected_ ABSL_GUARDED_BY(mu_);
};

class PlacementCoreTest : public ::testing::Test {
 protected:
  PlacementCoreOptions CoreOptions() {
    PlacementCoreOptions options;
    options.default_time_limit = absl::Seconds(30);
    options.max_time_limit = absl::Seconds(60);
    return options;
  }

  // Places `request` through the core: a hit, or a job waited for.
  v1::PlaceResponse Place(const v1::PlaceRequest& request) {
    absl::StatusOr<std::shared_ptr<const PreparedRequest>> prepared = core_.Prepare(request);
    EXPECT_TRUE(prepared.ok()) << prepared.status();
    absl::StatusOr<PlaceStart> start = core_.StartPlace(*prepared, absl::InfiniteFuture(), "");
    EXPECT_TRUE(start.ok()) << start.status();
    v1::PlaceResponse response;
    if (start->hit != nullptr) {
      core_.FillPlaceResponse(**prepared, *start->hit, v1::HIT, absl::ZeroDuration(), &response);
      return response;
    }
    const jobs::JobResult& result = AwaitDone(start->admission.job);
    EXPECT_TRUE(result.placement.ok()) << result.placement.status();
    core_.FillPlaceResponse(**prepared, **result.placement,
                            start->admission.coalesced ? v1::COALESCED : v1::MISS,
                            result.queue_time, &response);
    core_.Release(start->admission.job);
    return response;
  }

  CountingObserver observer_;
  AlgorithmCatalog catalog_{{.include_testing_algorithms = true}};
  cache::LruResultCache cache_{{.max_bytes = 64 << 20}};
  jobs::JobManager jobs_{{.workers = 2}};
  jobs::OperationRegistry operations_{{}, &jobs_};
  PlacementCore core_{CoreOptions(), &catalog_, &cache_, &jobs_, &operations_, &observer_};
};

TEST_F(PlacementCoreTest, InvalidRequestsListEveryViolationAsData) {
  v1::PlaceRequest request = Request(10, 1, "no_such_algorithm");
  request.mutable_graph()->mutable_edges(0)->set_src(-4);
  request.mutable_options()->set_memory_headroom(1.5);
  absl::StatusOr<std::shared_ptr<const PreparedRequest>> prepared = core_.Prepare(request);
  ASSERT_EQ(prepared.status().code(), absl::StatusCode::kInvalidArgument);
  std::optional<v1::BadRequest> bad_request = common::BadRequestOf(prepared.status());
  ASSERT_TRUE(bad_request.has_value());
  std::vector<std::string> fields;
  for (const v1::FieldViolation& v : bad_request->field_violations()) fields.push_back(v.field());
  EXPECT_THAT(fields, Contains("graph.edges[0].src"));
  EXPECT_THAT(fields, Contains("options.memory_headroom"));
  EXPECT_THAT(fields, Contains("options.algorithm"));
  EXPECT_THAT(std::string(prepared.status().message()), HasSubstr("graph.edges[0].src"));
}

TEST_F(PlacementCoreTest, PrepareResolvesTheAlgorithmAndTheTimeLimit) {
  v1::PlaceRequest request = Request(10, 1, "");
  absl::StatusOr<std::shared_ptr<const PreparedRequest>> prepared = core_.Prepare(request);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_EQ((*prepared)->algorithm->name(), "auto");
  EXPECT_EQ((*prepared)->time_limit, absl::Seconds(30));  // the default
  EXPECT_EQ((*prepared)->request_digest.size(), 64u);
  EXPECT_GT((*prepared)->estimated_memory_bytes, 0);

  request.mutable_options()->mutable_time_limit()->set_seconds(3600);
  EXPECT_EQ(core_.Prepare(request).value()->time_limit, absl::Seconds(60));  // capped
  request.mutable_options()->mutable_time_limit()->set_seconds(2);
  EXPECT_EQ(core_.Prepare(request).value()->time_limit, absl::Seconds(2));

  // The same request with the algorithm spelled out has the same digest.
  v1::PlaceRequest explicit_default = Request(10, 1, "auto");
  EXPECT_EQ(core_.Prepare(explicit_default).value()->request_digest,
            core_.Prepare(Request(10, 1, "")).value()->request_digest);
}

TEST_F(PlacementCoreTest, AnotherOpOrderHitsTheCacheAndGetsItsOwnOrder) {
  const v1::PlaceRequest first = Request(300, 5, "round_robin");
  const v1::PlaceRequest shuffled = testutil::ShuffleRequest(first, 11);
  v1::PlaceResponse miss = Place(first);
  EXPECT_EQ(miss.placement().provenance().cache(), v1::MISS);
  v1::PlaceResponse hit = Place(shuffled);
  EXPECT_EQ(hit.placement().provenance().cache(), v1::HIT);
  EXPECT_EQ(hit.placement().provenance().queue_ns(), 0);
  EXPECT_EQ(DevicesByName(shuffled, hit.placement()), DevicesByName(first, miss.placement()));
  EXPECT_NE(std::vector<int32_t>(hit.placement().device().begin(), hit.placement().device().end()),
            std::vector<int32_t>(miss.placement().device().begin(),
                                 miss.placement().device().end()));
  EXPECT_EQ(cache_.Stats().entries, 1);

  v1::PlaceRequest skip = shuffled;
  skip.mutable_options()->set_skip_cache(true);
  v1::PlaceResponse recomputed = Place(skip);
  EXPECT_EQ(recomputed.placement().provenance().cache(), v1::MISS);
  EXPECT_EQ(DevicesByName(skip, recomputed.placement()), DevicesByName(first, miss.placement()));
  EXPECT_EQ(cache_.Stats().insertions, 2);  // skip_cache still stores
  EXPECT_EQ(observer_.lookups(v1::MISS), 2);
  EXPECT_EQ(observer_.lookups(v1::HIT), 1);
}

TEST_F(PlacementCoreTest, ByteIdenticalRepeatsSkipTheModelButGetTheSameAnswer) {
  v1::PlaceRequest request = Request(200, 21, "round_robin");
  std::string fingerprint;
  std::string digest;
  v1::PlaceResponse fast;
  EXPECT_FALSE(core_.TryRepeatHit(request, &fingerprint, &digest, &fast));  // never seen
  ASSERT_EQ(fingerprint.size(), 32u);
  v1::PlaceResponse full = Place(request);
  core_.RememberFingerprint(fingerprint, *core_.Prepare(request).value());

  ASSERT_TRUE(core_.TryRepeatHit(request, &fingerprint, &digest, &fast));
  EXPECT_EQ(digest, full.placement().provenance().request_digest());
  EXPECT_EQ(fast.placement().provenance().cache(), v1::HIT);
  EXPECT_EQ(std::vector<int32_t>(fast.placement().device().begin(), fast.placement().device().end()),
            std::vector<int32_t>(full.placement().device().begin(), full.placement().device().end()));

  // Another op order is another fingerprint; skip_cache never takes the fast path.
  EXPECT_FALSE(core_.TryRepeatHit(testutil::ShuffleRequest(request, 3), &fingerprint, &digest, &fast));
  request.mutable_options()->set_skip_cache(true);
  EXPECT_FALSE(core_.TryRepeatHit(request, &fingerprint, &digest, &fast));
  EXPECT_TRUE(fingerprint.empty());
}

TEST_F(PlacementCoreTest, SubmitAnswersAHitAtOnceAndIsIdempotentByRequestId) {
  v1::PlaceRequest request = Request(40, 8, "round_robin");
  Place(request);  // now cached
  request.set_request_id("req-1");
  v1::CacheResult cache = v1::CACHE_RESULT_UNSPECIFIED;
  std::string digest;
  absl::StatusOr<std::shared_ptr<jobs::Operation>> op = core_.Submit(request, "", &cache, &digest);
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ(cache, v1::HIT);
  v1::Operation message;
  core_.FillOperation(**op, &message);
  EXPECT_TRUE(message.done());
  ASSERT_TRUE(message.has_response());
  EXPECT_EQ(message.response().placement().provenance().cache(), v1::HIT);
  EXPECT_EQ(message.metadata().request_digest(), digest);

  absl::StatusOr<std::shared_ptr<jobs::Operation>> again = core_.Submit(request, "", &cache, &digest);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *op);
  v1::PlaceRequest other = Request(41, 8, "round_robin");
  other.set_request_id("req-1");
  EXPECT_EQ(core_.Submit(other, "", &cache, &digest).status().code(),
            absl::StatusCode::kAlreadyExists);
}

TEST_F(PlacementCoreTest, PendingOperationsHaveNeitherResultNorError) {
  v1::PlaceRequest request = Request(20, 9, "testing_wait");
  request.mutable_options()->mutable_time_limit()->set_seconds(30);
  v1::CacheResult cache;
  std::string digest;
  absl::StatusOr<std::shared_ptr<jobs::Operation>> op = core_.Submit(request, "", &cache, &digest);
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ(cache, v1::MISS);
  v1::Operation pending;
  core_.FillOperation(**op, &pending);
  EXPECT_FALSE(pending.done());
  EXPECT_FALSE(pending.has_error());
  EXPECT_FALSE(pending.has_response());

  ASSERT_TRUE(core_.CancelOperation((*op)->name(), "").ok());
  v1::Operation cancelled;
  core_.FillOperation(**op, &cancelled);
  EXPECT_TRUE(cancelled.done());
  EXPECT_EQ(cancelled.error().code(), static_cast<int>(absl::StatusCode::kCancelled));
  EXPECT_FALSE(cancelled.has_response());
}

TEST_F(PlacementCoreTest, EvaluateRunsOnAWorker) {
  const v1::PlaceRequest request = Request(50, 3, "");
  v1::EvaluateRequest evaluate;
  *evaluate.mutable_graph() = request.graph();
  *evaluate.mutable_cluster() = request.cluster();
  for (int i = 0; i < request.graph().ops_size(); ++i) evaluate.add_device(0);
  absl::StatusOr<EvaluateStart> start = core_.StartEvaluate(evaluate, absl::InfiniteFuture(), "");
  ASSERT_TRUE(start.ok()) << start.status();
  const jobs::JobResult& result = AwaitDone(start->admission.job);
  ASSERT_TRUE(result.placement.ok()) << result.placement.status();
  EXPECT_EQ(start->output->response.placement().provenance().algorithm(), "evaluate");
  EXPECT_GT(start->output->response.placement().metrics().makespan_ns(), 0);
  core_.Release(start->admission.job);

  evaluate.add_device(7);  // one too many
  absl::StatusOr<EvaluateStart> bad = core_.StartEvaluate(evaluate, absl::InfiniteFuture(), "");
  ASSERT_TRUE(bad.ok());
  const jobs::JobResult& rejected = AwaitDone(bad->admission.job);
  EXPECT_EQ(rejected.placement.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(common::BadRequestOf(rejected.placement.status()).has_value());
  core_.Release(bad->admission.job);
}

TEST_F(PlacementCoreTest, ListsEveryAlgorithm) {
  v1::ListAlgorithmsResponse list = core_.ListAlgorithms();
  std::vector<std::string> names;
  for (const v1::AlgorithmInfo& info : list.algorithms()) names.push_back(info.name());
  EXPECT_THAT(names, Contains("pardnn"));
  EXPECT_THAT(names, Contains("testing_wait"));
}

TEST_F(PlacementCoreTest, ASharedRequestIsRebuiltIntoTheSameJobAnotherReplicaWouldRun) {
  v1::PlaceRequest request = Request(12, 5, "m_topo");
  request.mutable_options()->mutable_time_limit()->set_seconds(7);
  absl::StatusOr<std::shared_ptr<const PreparedRequest>> prepared = core_.Prepare(request);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  absl::StatusOr<shared_ops::RebuiltJob> rebuilt =
      core_.RebuildSharedJob(request.SerializeAsString(), "team-a", absl::ZeroDuration());
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  EXPECT_EQ(rebuilt->request_digest, (*prepared)->request_digest);
  // The job key covers the time limit, as the local single-flight key does.
  EXPECT_EQ(rebuilt->spec.request_digest, absl::StrCat((*prepared)->request_digest, "@7000000000"));
  EXPECT_EQ(rebuilt->spec.tenant, "team-a");
  EXPECT_EQ(rebuilt->spec.deadline, absl::InfiniteFuture());
  // It runs here like any job: the answer is the request's.
  absl::StatusOr<jobs::Admission> admitted = jobs_.Acquire(std::move(rebuilt->spec));
  ASSERT_TRUE(admitted.ok()) << admitted.status();
  const jobs::JobResult& result = AwaitDone(admitted->job);
  ASSERT_TRUE(result.placement.ok()) << result.placement.status();
  EXPECT_EQ((*result.placement)->provenance().request_digest(), (*prepared)->request_digest);
  jobs_.Release(admitted->job);

  EXPECT_EQ(core_.RebuildSharedJob("\xff\xff not a request", "", absl::ZeroDuration())
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  v1::PlaceRequest invalid = request;
  invalid.mutable_options()->set_algorithm("no_such_algorithm");
  EXPECT_EQ(core_.RebuildSharedJob(invalid.SerializeAsString(), "", absl::ZeroDuration())
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(PlacementCoreTest, ASharedJobKeepsTheTimeLimitItWasSubmittedWith) {
  // Submitted to a replica whose default time limit was 3 s; this one's default differs.
  v1::PlaceRequest request = Request(12, 5, "m_topo");
  request.mutable_options()->clear_time_limit();
  absl::StatusOr<std::shared_ptr<const PreparedRequest>> prepared = core_.Prepare(request);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  ASSERT_NE((*prepared)->time_limit, absl::Seconds(3));
  absl::StatusOr<shared_ops::RebuiltJob> rebuilt =
      core_.RebuildSharedJob(request.SerializeAsString(), "team-a", absl::Seconds(3));
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  EXPECT_EQ(rebuilt->spec.request_digest, absl::StrCat((*prepared)->request_digest, "@3000000000"));
  EXPECT_EQ(rebuilt->spec.time_limit, absl::Seconds(3));
  // Above this replica's --max_time_limit: refused, with the reason.
  absl::StatusOr<shared_ops::RebuiltJob> too_long = core_.RebuildSharedJob(
      request.SerializeAsString(), "team-a", core_.options().max_time_limit + absl::Seconds(1));
  EXPECT_EQ(too_long.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(too_long.status().message()), HasSubstr("--max_time_limit"));
}

}  // namespace
}  // namespace placement::core
