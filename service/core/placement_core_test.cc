#include "service/core/placement_core.h"

#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/cache/lru_cache.h"
#include "service/status_payloads/status_payloads.h"
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

// Waits for `pending` and has it write its answer.
absl::Status AwaitAnswer(const std::shared_ptr<PendingAnswer>& pending) {
  auto done = std::make_shared<absl::Notification>();
  pending->OnDone([done] { done->Notify(); });
  done->WaitForNotification();
  return pending->Finish();
}

// A call that arrived as bytes: the repeat fast path sees them, and decoding parses them.
struct ReceivedCall {
  explicit ReceivedCall(const v1::PlaceRequest& request) : bytes(request.SerializeAsString()) {}
  PlaceCall call() {
    PlaceCall call;
    call.wire = {absl::string_view(bytes).substr(0, 7), absl::string_view(bytes).substr(7)};
    call.decode = [this]() -> absl::StatusOr<const v1::PlaceRequest*> {
      ++decoded;
      if (!request.ParseFromString(bytes)) return absl::InvalidArgumentError("does not parse");
      return &request;
    };
    return call;
  }
  std::string bytes;
  v1::PlaceRequest request;
  int decoded = 0;
};

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

  // Places `call` through the core: a hit, or a job waited for.
  v1::PlaceResponse Place(const PlaceCall& call, CallNotes* notes = nullptr) {
    CallNotes own;
    if (notes == nullptr) notes = &own;
    v1::PlaceResponse response;
    absl::StatusOr<std::shared_ptr<PendingAnswer>> pending = core_.Place(call, &response, notes);
    EXPECT_TRUE(pending.ok()) << pending.status();
    if (pending.ok() && *pending != nullptr) {
      const absl::Status answered = AwaitAnswer(*pending);
      EXPECT_TRUE(answered.ok()) << answered;
    }
    return response;
  }
  v1::PlaceResponse Place(const v1::PlaceRequest& request) { return Place(PlaceCall::Of(request)); }

  // Submits `call`; the operation as SubmitPlacement returns it.
  absl::StatusOr<v1::Operation> Submit(const PlaceCall& call, CallNotes* notes) {
    v1::Operation operation;
    absl::Status submitted = core_.Submit(call, &operation, notes);
    if (!submitted.ok()) return submitted;
    return operation;
  }

  CountingObserver observer_;
  engine::AlgorithmRegistry algorithms_{{.include_testing_algorithms = true}};
  cache::LruResultCache cache_{{.max_bytes = 64 << 20}};
  jobs::JobManager jobs_{{.workers = 2}};
  jobs::OperationRegistry operations_{{}, &jobs_};
  PlacementCore core_{CoreOptions(), &algorithms_, &cache_, &jobs_, &operations_, &observer_};
};

TEST_F(PlacementCoreTest, InvalidRequestsListEveryViolationAsData) {
  v1::PlaceRequest request = Request(10, 1, "no_such_algorithm");
  request.mutable_graph()->mutable_edges(0)->set_src(-4);
  request.mutable_options()->set_memory_headroom(1.5);
  absl::StatusOr<std::shared_ptr<const PreparedRequest>> prepared = core_.Prepare(request);
  ASSERT_EQ(prepared.status().code(), absl::StatusCode::kInvalidArgument);
  std::optional<v1::BadRequest> bad_request = status_payloads::BadRequestOf(prepared.status());
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

TEST_F(PlacementCoreTest, ByteIdenticalRepeatsAreAnsweredWithoutDecoding) {
  ReceivedCall received(Request(200, 21, "round_robin"));
  CallNotes first;
  v1::PlaceResponse full = Place(received.call(), &first);
  EXPECT_EQ(first.cache, v1::MISS);
  EXPECT_EQ(received.decoded, 1);
  EXPECT_GT(core_.repeat_index_bytes(), 0);

  CallNotes repeat;
  v1::PlaceResponse fast = Place(received.call(), &repeat);
  EXPECT_EQ(received.decoded, 1);  // answered from the bytes
  EXPECT_EQ(repeat.cache, v1::HIT);
  EXPECT_EQ(repeat.request_digest, full.placement().provenance().request_digest());
  EXPECT_EQ(fast.placement().provenance().cache(), v1::HIT);
  EXPECT_EQ(std::vector<int32_t>(fast.placement().device().begin(), fast.placement().device().end()),
            std::vector<int32_t>(full.placement().device().begin(), full.placement().device().end()));

  // A SubmitPlacement of the same bytes takes the same fast path: an operation done at once.
  CallNotes submitted;
  absl::StatusOr<v1::Operation> operation = Submit(received.call(), &submitted);
  ASSERT_TRUE(operation.ok()) << operation.status();
  EXPECT_EQ(received.decoded, 1);
  EXPECT_EQ(submitted.cache, v1::HIT);
  EXPECT_TRUE(operation->done());
  EXPECT_EQ(operation->response().placement().device_size(), 200);
  EXPECT_EQ(operation->metadata().request_digest(), repeat.request_digest);

  // Another op order has other bytes; skip_cache is never answered from the bytes.
  ReceivedCall shuffled(testutil::ShuffleRequest(received.request, 3));
  Place(shuffled.call());
  EXPECT_EQ(shuffled.decoded, 1);
  v1::PlaceRequest skip = received.request;
  skip.mutable_options()->set_skip_cache(true);
  ReceivedCall skipping(skip);
  CallNotes recomputed;
  Place(skipping.call(), &recomputed);
  Place(skipping.call(), &recomputed);
  EXPECT_EQ(skipping.decoded, 2);
  EXPECT_EQ(recomputed.cache, v1::MISS);
}

TEST_F(PlacementCoreTest, ARepeatWhoseCachedAnswerNoLongerFitsIsDecodedAndSolvedAgain) {
  ReceivedCall received(Request(60, 4, "round_robin"));
  CallNotes first;
  Place(received.call(), &first);
  // What a poisoned shared tier could hand back: not this request's answer.
  cache_.Insert(first.request_digest, std::make_shared<const v1::Placement>());
  CallNotes again;
  v1::PlaceResponse response = Place(received.call(), &again);
  EXPECT_EQ(received.decoded, 2);
  EXPECT_EQ(again.cache, v1::MISS);
  EXPECT_EQ(response.placement().device_size(), 60);
}

TEST_F(PlacementCoreTest, SubmitAnswersAHitAtOnceAndIsIdempotentByRequestId) {
  v1::PlaceRequest request = Request(40, 8, "round_robin");
  Place(request);  // now cached
  request.set_request_id("req-1");
  CallNotes notes;
  absl::StatusOr<v1::Operation> op = Submit(PlaceCall::Of(request), &notes);
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ(notes.cache, v1::HIT);
  EXPECT_EQ(notes.operation, op->name());
  EXPECT_TRUE(op->done());
  ASSERT_TRUE(op->has_response());
  EXPECT_EQ(op->response().placement().provenance().cache(), v1::HIT);
  EXPECT_EQ(op->metadata().request_digest(), notes.request_digest);

  // The same request_id: the same operation, from the bytes as from the message.
  ReceivedCall received(request);
  for (int attempt = 0; attempt < 2; ++attempt) {
    CallNotes again;
    absl::StatusOr<v1::Operation> same = Submit(received.call(), &again);
    ASSERT_TRUE(same.ok()) << same.status();
    EXPECT_EQ(same->name(), op->name());
  }
  EXPECT_EQ(received.decoded, 1);
  v1::PlaceRequest other = Request(41, 8, "round_robin");
  other.set_request_id("req-1");
  CallNotes conflict;
  EXPECT_EQ(Submit(PlaceCall::Of(other), &conflict).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_FALSE(conflict.request_digest.empty());  // logged even though it failed
}

TEST_F(PlacementCoreTest, PendingOperationsHaveNeitherResultNorError) {
  v1::PlaceRequest request = Request(20, 9, "testing_wait");
  request.mutable_options()->mutable_time_limit()->set_seconds(30);
  CallNotes notes;
  absl::StatusOr<v1::Operation> pending = Submit(PlaceCall::Of(request), &notes);
  ASSERT_TRUE(pending.ok()) << pending.status();
  EXPECT_EQ(notes.cache, v1::MISS);
  EXPECT_FALSE(pending->done());
  EXPECT_FALSE(pending->has_error());
  EXPECT_FALSE(pending->has_response());

  absl::StatusOr<OperationHandle> followed = core_.FindOperation(pending->name(), "");
  ASSERT_TRUE(followed.ok()) << followed.status();
  auto done = std::make_shared<absl::Notification>();
  const uint64_t id = followed->Subscribe([done](bool is_done) {
    if (is_done) done->Notify();
  });
  ASSERT_NE(id, 0u);
  EXPECT_EQ(core_.FindOperation(pending->name(), "another-tenant").status().code(),
            absl::StatusCode::kNotFound);

  v1::Operation cancelled;
  CallNotes cancel_notes;
  ASSERT_TRUE(core_.CancelOperation(pending->name(), "", &cancelled, &cancel_notes).ok());
  done->WaitForNotification();
  followed->Unsubscribe(id);
  EXPECT_TRUE(cancelled.done());
  EXPECT_EQ(cancelled.error().code(), static_cast<int>(absl::StatusCode::kCancelled));
  EXPECT_FALSE(cancelled.has_response());
  EXPECT_EQ(cancel_notes.request_digest, notes.request_digest);
  v1::Operation got;
  CallNotes get_notes;
  ASSERT_TRUE(core_.GetOperation(pending->name(), "", &got, &get_notes).ok());
  EXPECT_TRUE(got.done());
  EXPECT_EQ(followed->Subscribe([](bool) {}), 0u);  // done: nothing to follow
}

TEST_F(PlacementCoreTest, APlaceCallerThatLeavesReleasesTheJob) {
  v1::PlaceRequest request = Request(20, 12, "testing_wait");
  request.mutable_options()->mutable_time_limit()->set_seconds(30);
  v1::PlaceResponse response;
  CallNotes notes;
  absl::StatusOr<std::shared_ptr<PendingAnswer>> pending =
      core_.Place(PlaceCall::Of(request), &response, &notes);
  ASSERT_TRUE(pending.ok()) << pending.status();
  ASSERT_NE(*pending, nullptr);
  auto done = std::make_shared<absl::Notification>();
  (*pending)->OnDone([done] { done->Notify(); });
  (*pending)->Release();  // the caller went away: nobody else waits, so the job is cancelled
  (*pending)->Release();  // idempotent
  // The job stops (it would wait 30 s otherwise); the released handle's callback may or may not
  // have heard of it, and nothing is written into the response.
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  while ((jobs_.Stats().in_flight > 0 || jobs_.Stats().running > 0) && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(jobs_.Stats().in_flight, 0);
  EXPECT_EQ(jobs_.Stats().running, 0);
  EXPECT_FALSE(response.has_placement());
}

TEST_F(PlacementCoreTest, EvaluateRunsOnAWorker) {
  const v1::PlaceRequest request = Request(50, 3, "");
  v1::EvaluateRequest evaluate;
  *evaluate.mutable_graph() = request.graph();
  *evaluate.mutable_cluster() = request.cluster();
  for (int i = 0; i < request.graph().ops_size(); ++i) evaluate.add_device(0);
  v1::EvaluateResponse response;
  absl::StatusOr<std::shared_ptr<PendingAnswer>> pending =
      core_.Evaluate(evaluate, absl::InfiniteFuture(), "", &response);
  ASSERT_TRUE(pending.ok()) << pending.status();
  ASSERT_TRUE(AwaitAnswer(*pending).ok());
  EXPECT_EQ(response.placement().provenance().algorithm(), "evaluate");
  EXPECT_GT(response.placement().metrics().makespan_ns(), 0);

  evaluate.add_device(7);  // one too many
  v1::EvaluateResponse rejected;
  absl::StatusOr<std::shared_ptr<PendingAnswer>> bad =
      core_.Evaluate(evaluate, absl::InfiniteFuture(), "", &rejected);
  ASSERT_TRUE(bad.ok());
  const absl::Status status = AwaitAnswer(*bad);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(status_payloads::BadRequestOf(status).has_value());
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
