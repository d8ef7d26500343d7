#include "service/shared_ops/operation_store.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "service/cache/redis_client.h"
#include "tests/testutil/redis_server.h"
#include "tests/testutil/start_redis_or_skip.h"

namespace placement::shared_ops {
namespace {

using testutil::RedisServer;

// One replica's view: its own connections and consumer name.
struct Replica {
  Replica(int port, std::string name)
      : redis({.host = "127.0.0.1", .port = port, .timeout = absl::Milliseconds(500),
               .initial_backoff = absl::Milliseconds(1), .max_backoff = absl::Milliseconds(1)}),
        store(&redis, {.key_prefix = "t:", .consumer = std::move(name)}) {}
  RedisClient redis;
  OperationStore store;
};

OperationRecord Op(const std::string& name, const std::string& job_key,
                   const std::string& tenant = "team-a") {
  OperationRecord op;
  op.name = name;
  op.tenant = tenant;
  op.request_digest = "digest";
  op.algorithm = "pardnn";
  op.job_key = job_key;
  op.request_index = {2, 0, 1};
  op.num_devices = 2;
  return op;
}

NewJob Job(const std::string& job_key) {
  return NewJob{.job_key = job_key, .tenant = "team-a", .serialized_request = "request-bytes",
                .lifetime = absl::Minutes(1), .lease = absl::Seconds(5),
                .time_limit = absl::Seconds(30)};
}

int64_t Ttl(RedisServer& redis, const std::string& key) {
  absl::StatusOr<std::string> ttl = redis.Command({"PTTL", key});
  int64_t ms = -100;
  if (ttl.ok()) {
    EXPECT_TRUE(absl::SimpleAtoi(*ttl, &ms)) << *ttl;
  }
  return ms;
}

// Makes an entry look idle for `idle` (what a dead owner's entry looks like after that long).
void Age(RedisServer& redis, Replica& owner, const std::string& entry, absl::Duration idle) {
  (void)redis;
  ASSERT_TRUE(owner.redis
                  .Command({"XCLAIM", owner.store.StreamKey(), OperationStore::kGroup,
                            owner.store.consumer(), "0", entry, "IDLE",
                            absl::StrCat(absl::ToInt64Milliseconds(idle)), "JUSTID"})
                  .ok());
}

TEST(RequestIndexTest, RoundTripsAndRejectsTornBytes) {
  const std::vector<int32_t> index = {2, 0, 3, 1};
  EXPECT_EQ(UnpackRequestIndex(PackRequestIndex(index)), index);
  EXPECT_EQ(UnpackRequestIndex(""), std::vector<int32_t>());
  EXPECT_FALSE(UnpackRequestIndex("abc").has_value());
}

TEST(RequestIndexTest, RejectsAnythingButAPermutation) {
  EXPECT_FALSE(UnpackRequestIndex(PackRequestIndex({0, 4, 1, 2})).has_value());  // out of range
  EXPECT_FALSE(UnpackRequestIndex(PackRequestIndex({0, -1, 1})).has_value());     // negative
  EXPECT_FALSE(UnpackRequestIndex(PackRequestIndex({1, 1, 0})).has_value());      // repeated
  EXPECT_FALSE(UnpackRequestIndex(PackRequestIndex({0, 1 << 30})).has_value());
}

TEST(OperationStoreTest, FirstSubmitCreatesTheJobAndTheSecondJoinsIt) {
  START_REDIS_OR_SKIP(redis);
  Replica a(redis.port(), "a"), b(redis.port(), "b");
  absl::StatusOr<SubmitOutcome> first = a.store.Submit(Op("operations/1", "k"), Job("k"));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->result, SubmitResult::kCreated);
  EXPECT_EQ(first->owner, "a");
  EXPECT_FALSE(first->entry_id.empty());
  absl::StatusOr<SubmitOutcome> second = b.store.Submit(Op("operations/2", "k"), Job("k"));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->result, SubmitResult::kJoined);
  EXPECT_EQ(second->owner, "a");

  // The entry is in a's pending list (the lease), the job counts two waiters.
  absl::StatusOr<std::vector<std::string>> kept = a.store.Renew({first->entry_id});
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(*kept, std::vector<std::string>{first->entry_id});
  absl::StatusOr<std::optional<OperationView>> view = b.store.Lookup("operations/1");
  ASSERT_TRUE(view.ok()) << view.status();
  ASSERT_TRUE(view->has_value());
  EXPECT_EQ((*view)->operation.tenant, "team-a");
  EXPECT_EQ((*view)->operation.request_index, (std::vector<int32_t>{2, 0, 1}));
  EXPECT_EQ((*view)->operation.num_devices, 2);
  ASSERT_TRUE((*view)->job.has_value());
  EXPECT_EQ((*view)->job->state, JobRecordState::kQueued);
  EXPECT_EQ((*view)->job->waiters, 2);
  EXPECT_EQ((*view)->job->owner, "a");
  EXPECT_FALSE((*view)->result_value.has_value());
  absl::StatusOr<std::optional<OperationView>> joined = a.store.Lookup("operations/2");
  ASSERT_TRUE(joined.ok() && joined->has_value());
  EXPECT_EQ((*joined)->operation.cache, OperationStore::kCoalesced);
}

TEST(OperationStoreTest, ConcurrentSubmitsCreateExactlyOneJob) {
  START_REDIS_OR_SKIP(redis);
  constexpr int kReplicas = 6;
  std::vector<std::unique_ptr<Replica>> replicas;
  for (int i = 0; i < kReplicas; ++i) {
    replicas.push_back(std::make_unique<Replica>(redis.port(), absl::StrCat("r", i)));
  }
  std::vector<absl::StatusOr<SubmitOutcome>> outcomes(kReplicas, absl::UnknownError(""));
  std::vector<std::thread> threads;
  for (int i = 0; i < kReplicas; ++i) {
    threads.emplace_back([&, i] {
      outcomes[i] = replicas[i]->store.Submit(Op(absl::StrCat("operations/", i), "same"),
                                              Job("same"));
    });
  }
  for (std::thread& thread : threads) thread.join();
  int created = 0;
  std::string owner;
  for (const auto& outcome : outcomes) {
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    if (outcome->result == SubmitResult::kCreated) {
      ++created;
      owner = outcome->owner;
    }
  }
  EXPECT_EQ(created, 1);
  for (const auto& outcome : outcomes) EXPECT_EQ(outcome->owner, owner);
  EXPECT_EQ(*redis.Command({"XLEN", replicas[0]->store.StreamKey()}), "1");
}

TEST(OperationStoreTest, ExpiredLeaseIsTakenOverAndTheOldOwnerLearnsItLostIt) {
  START_REDIS_OR_SKIP(redis);
  Replica a(redis.port(), "a"), b(redis.port(), "b");
  absl::StatusOr<SubmitOutcome> created = a.store.Submit(Op("operations/1", "k"), Job("k"));
  ASSERT_TRUE(created.ok()) << created.status();

  // A live lease is not claimed.
  absl::StatusOr<ClaimOutcome> claimed = b.store.ClaimExpired(absl::Seconds(5), 4);
  ASSERT_TRUE(claimed.ok()) << claimed.status();
  EXPECT_TRUE(claimed->claimed.empty());

  // a stops renewing (it died): six seconds later its entry is b's.
  Age(redis, a, created->entry_id, absl::Seconds(6));
  claimed = b.store.ClaimExpired(absl::Seconds(5), 4);
  ASSERT_TRUE(claimed.ok()) << claimed.status();
  ASSERT_EQ(claimed->claimed.size(), 1u);
  EXPECT_EQ(claimed->claimed[0].entry_id, created->entry_id);
  EXPECT_EQ(claimed->claimed[0].job_key, "k");
  EXPECT_EQ(claimed->dropped, 0);
  absl::StatusOr<std::optional<TakenJob>> request =
      b.store.TakeOver(claimed->claimed[0], absl::Seconds(5));
  ASSERT_TRUE(request.ok()) << request.status();
  ASSERT_TRUE(request->has_value());
  EXPECT_EQ((*request)->serialized_request, "request-bytes");
  EXPECT_EQ((*request)->tenant, "team-a");
  EXPECT_EQ((*request)->time_limit, absl::Seconds(30));  // what it was submitted with

  // a's renewal must not steal it back, and a's late completion writes nothing.
  absl::StatusOr<std::vector<std::string>> kept = a.store.Renew({created->entry_id});
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_TRUE(kept->empty());
  Completion late{.job_key = "k", .entry_id = created->entry_id, .result_key = "t:value",
                  .result_value = "from-a", .result_ttl = absl::Minutes(1),
                  .ttl_after_done = absl::Minutes(1)};
  absl::StatusOr<bool> written = a.store.Complete(late);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_FALSE(*written);

  // b completes: the operation is done everywhere, the entry is gone, the op keeps its TTL.
  Completion done = late;
  done.result_value = "from-b";
  done.ttl_after_done = absl::Seconds(30);
  written = b.store.Complete(done);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_TRUE(*written);
  absl::StatusOr<std::optional<OperationView>> view = a.store.Lookup("operations/1");
  ASSERT_TRUE(view.ok() && view->has_value());
  EXPECT_EQ((*view)->job->state, JobRecordState::kDone);
  EXPECT_EQ((*view)->job->owner, "b");
  EXPECT_EQ((*view)->result_value, "from-b");
  EXPECT_EQ(*redis.Command({"XLEN", a.store.StreamKey()}), "0");
  EXPECT_EQ(*redis.Command({"EXISTS", a.store.RequestKey("k")}), "0");
  const int64_t ttl = Ttl(redis, a.store.OperationKey("operations/1"));
  EXPECT_GT(ttl, 20'000);
  EXPECT_LE(ttl, 30'000);
  // A second claim finds nothing.
  claimed = b.store.ClaimExpired(absl::Milliseconds(1), 4);
  ASSERT_TRUE(claimed.ok());
  EXPECT_TRUE(claimed->claimed.empty());
}

TEST(OperationStoreTest, RenewalKeepsTheLease) {
  START_REDIS_OR_SKIP(redis);
  Replica a(redis.port(), "a"), b(redis.port(), "b");
  absl::StatusOr<SubmitOutcome> created = a.store.Submit(Op("operations/1", "k"), Job("k"));
  ASSERT_TRUE(created.ok());
  Age(redis, a, created->entry_id, absl::Seconds(6));
  ASSERT_TRUE(a.store.Renew({created->entry_id}).ok());
  absl::StatusOr<ClaimOutcome> claimed = b.store.ClaimExpired(absl::Seconds(5), 4);
  ASSERT_TRUE(claimed.ok());
  EXPECT_TRUE(claimed->claimed.empty());
}

TEST(OperationStoreTest, HandBackLetsAnotherReplicaTakeOverAtOnce) {
  START_REDIS_OR_SKIP(redis);
  Replica a(redis.port(), "a"), b(redis.port(), "b");
  absl::StatusOr<SubmitOutcome> created = a.store.Submit(Op("operations/1", "k"), Job("k"));
  ASSERT_TRUE(created.ok());
  ASSERT_TRUE(a.store.HandBack({created->entry_id}, absl::Seconds(6)).ok());
  absl::StatusOr<ClaimOutcome> claimed = b.store.ClaimExpired(absl::Seconds(5), 4);
  ASSERT_TRUE(claimed.ok());
  ASSERT_EQ(claimed->claimed.size(), 1u);
  absl::StatusOr<std::optional<TakenJob>> request =
      b.store.TakeOver(claimed->claimed[0], absl::Seconds(5));
  ASSERT_TRUE(request.ok() && request->has_value());
}

TEST(OperationStoreTest, CancelOfTheLastWaiterSetsTheFlagAndOtherTenantsSeeNothing) {
  START_REDIS_OR_SKIP(redis);
  Replica a(redis.port(), "a"), b(redis.port(), "b");
  ASSERT_TRUE(a.store.Submit(Op("operations/1", "k"), Job("k")).ok());
  ASSERT_TRUE(b.store.Submit(Op("operations/2", "k"), Job("k")).ok());

  absl::StatusOr<std::optional<OperationView>> other = b.store.Cancel("operations/1", "team-b");
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->has_value());
  absl::StatusOr<std::optional<OperationView>> missing = b.store.Cancel("operations/9", "team-a");
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());

  absl::StatusOr<std::optional<OperationView>> one = b.store.Cancel("operations/1", "team-a");
  ASSERT_TRUE(one.ok() && one->has_value());
  EXPECT_EQ((*one)->operation.state, OperationState::kCancelled);
  EXPECT_EQ((*one)->job->waiters, 1);
  absl::StatusOr<std::vector<bool>> flags = a.store.CancelFlags({"k"});
  ASSERT_TRUE(flags.ok());
  EXPECT_EQ(*flags, std::vector<bool>{false});
  // Cancelling twice counts once.
  ASSERT_TRUE(b.store.Cancel("operations/1", "team-a").ok());
  ASSERT_TRUE(b.store.Cancel("operations/2", "team-a").ok());
  flags = a.store.CancelFlags({"k", "unknown"});
  ASSERT_TRUE(flags.ok());
  EXPECT_EQ(*flags, (std::vector<bool>{true, false}));

  // A job everybody left is not joined: the next submit starts a fresh one.
  absl::StatusOr<SubmitOutcome> fresh = b.store.Submit(Op("operations/3", "k"), Job("k"));
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->result, SubmitResult::kCreated);
  EXPECT_EQ(fresh->owner, "b");
}

TEST(OperationStoreTest, ProgressIsWrittenOnlyByTheOwner) {
  START_REDIS_OR_SKIP(redis);
  Replica a(redis.port(), "a"), b(redis.port(), "b");
  ASSERT_TRUE(a.store.Submit(Op("operations/1", "k"), Job("k")).ok());
  ASSERT_TRUE(b.store
                  .WriteProgress({{.job_key = "k", .state = JobRecordState::kRunning,
                                   .stage = "by-b", .fraction = 0.9, .best_makespan_ns = 1}})
                  .ok());
  ASSERT_TRUE(a.store
                  .WriteProgress({{.job_key = "k", .state = JobRecordState::kRunning,
                                   .stage = "slicing", .fraction = 0.25,
                                   .best_makespan_ns = 1234}})
                  .ok());
  absl::StatusOr<std::vector<ViewOrGone>> polled =
      b.store.LookupMany({"operations/1", "operations/gone"});
  ASSERT_TRUE(polled.ok()) << polled.status();
  ASSERT_EQ(polled->size(), 2u);
  ASSERT_TRUE((*polled)[0].ok() && (*polled)[0]->has_value() && (*(*polled)[0])->job.has_value());
  const JobRecord& job = *(*(*polled)[0])->job;
  EXPECT_EQ(job.state, JobRecordState::kRunning);
  EXPECT_EQ(job.stage, "slicing");
  EXPECT_DOUBLE_EQ(job.fraction, 0.25);
  EXPECT_EQ(job.best_makespan_ns, 1234);
  ASSERT_TRUE((*polled)[1].ok());
  EXPECT_FALSE((*polled)[1]->has_value());
}

TEST(OperationStoreTest, FailedJobCarriesItsError) {
  START_REDIS_OR_SKIP(redis);
  Replica a(redis.port(), "a");
  absl::StatusOr<SubmitOutcome> created = a.store.Submit(Op("operations/1", "k"), Job("k"));
  ASSERT_TRUE(created.ok());
  absl::StatusOr<bool> written = a.store.Complete(
      {.job_key = "k", .entry_id = created->entry_id,
       .error = absl::ResourceExhaustedError("memory does not fit"), .result_key = "t:unused",
       .result_ttl = absl::Minutes(1), .ttl_after_done = absl::Minutes(1)});
  ASSERT_TRUE(written.ok() && *written);
  absl::StatusOr<std::optional<OperationView>> view = a.store.Lookup("operations/1");
  ASSERT_TRUE(view.ok() && view->has_value());
  EXPECT_EQ((*view)->job->state, JobRecordState::kFailed);
  EXPECT_EQ((*view)->job->error_code, static_cast<int>(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ((*view)->job->error_message, "memory does not fit");
  EXPECT_FALSE((*view)->result_value.has_value());
}

TEST(OperationStoreTest, DoneFromTheStartAndAbandonedRecords) {
  START_REDIS_OR_SKIP(redis);
  Replica a(redis.port(), "a");
  OperationRecord hit = Op("operations/1", "");
  hit.state = OperationState::kDone;
  hit.result_key = "t:r1:digest";
  ASSERT_TRUE(a.store.RecordDone(hit, "value", absl::Minutes(5), absl::Seconds(30)).ok());
  absl::StatusOr<std::optional<OperationView>> view = a.store.Lookup("operations/1");
  ASSERT_TRUE(view.ok() && view->has_value());
  EXPECT_EQ((*view)->operation.state, OperationState::kDone);
  EXPECT_EQ((*view)->result_value, "value");
  EXPECT_FALSE((*view)->job.has_value());
  EXPECT_GT(Ttl(redis, a.store.OperationKey("operations/1")), 20'000);
  EXPECT_LE(Ttl(redis, a.store.OperationKey("operations/1")), 30'000);
  EXPECT_GT(Ttl(redis, "t:r1:digest"), 200'000);

  absl::StatusOr<SubmitOutcome> created = a.store.Submit(Op("operations/2", "k"), Job("k"));
  ASSERT_TRUE(created.ok());
  EXPECT_GT(Ttl(redis, a.store.OperationKey("operations/2")), 50'000);
  ASSERT_TRUE(a.store.Abandon("operations/2", "k", created->entry_id).ok());
  view = a.store.Lookup("operations/2");
  ASSERT_TRUE(view.ok());
  EXPECT_FALSE(view->has_value());
  EXPECT_EQ(*redis.Command({"XLEN", a.store.StreamKey()}), "0");
}

TEST(OperationStoreTest, GarbageRecordsAreDataLossNeverCrashesOrAnswers) {
  START_REDIS_OR_SKIP(redis);
  Replica a(redis.port(), "a");
  const std::string key = a.store.OperationKey("operations/x");
  ASSERT_TRUE(redis.Command({"HSET", key, "tenant", "team-a", "job", "j", "request_index", "abc",
                             "num_devices", "many", "state", "pending"})
                  .ok());
  absl::StatusOr<std::optional<OperationView>> view = a.store.Lookup("operations/x");
  EXPECT_EQ(view.status().code(), absl::StatusCode::kDataLoss) << view.status();
  // Each field is checked on its own: the first violation names the field.
  ASSERT_TRUE(redis.Command({"HSET", key, "request_index", "", "num_devices", "2"}).ok());
  ASSERT_TRUE(redis.Command({"HSET", a.store.JobKey("j"), "state", "running", "fraction", "7",
                             "waiters", "x"})
                  .ok());
  view = a.store.Lookup("operations/x");
  EXPECT_EQ(view.status().code(), absl::StatusCode::kDataLoss);
  ASSERT_TRUE(redis.Command({"HSET", a.store.JobKey("j"), "fraction", "0.5", "waiters", "1",
                             "state", "exploded"})
                  .ok());
  view = a.store.Lookup("operations/x");
  EXPECT_EQ(view.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(std::string(view.status().message()).find("state"), std::string::npos);
  ASSERT_TRUE(redis.Command({"HSET", a.store.JobKey("j"), "state", "running"}).ok());
  view = a.store.Lookup("operations/x");
  ASSERT_TRUE(view.ok() && view->has_value()) << view.status();
  EXPECT_EQ((*view)->job->fraction, 0.5);
  // A key of the wrong type is an error reply (INTERNAL, WRONGTYPE), not a crash.
  ASSERT_TRUE(redis.Command({"SET", a.store.OperationKey("operations/y"), "string"}).ok());
  absl::StatusOr<std::optional<OperationView>> wrong = a.store.Lookup("operations/y");
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(cache::ErrorReplyCode(wrong.status()), "WRONGTYPE") << wrong.status();
}

TEST(OperationStoreTest, AForgedMegabyteFieldNeverLeavesRedis) {
  START_REDIS_OR_SKIP(redis);
  Replica a(redis.port(), "a");
  ASSERT_TRUE(a.store.Submit(Op("operations/1", "k"), Job("k")).ok());
  ASSERT_TRUE(redis.Command({"HSET", a.store.JobKey("k"), "stage", std::string(4 << 20, 's')}).ok());
  absl::StatusOr<std::optional<OperationView>> view = a.store.Lookup("operations/1");
  EXPECT_EQ(view.status().code(), absl::StatusCode::kDataLoss) << view.status();
  EXPECT_NE(std::string(view.status().message()).find("stage"), std::string::npos);
  EXPECT_LT(view.status().message().size(), 1000u);
  // A stage of printable text within the bound is fine; control characters are not.
  ASSERT_TRUE(redis.Command({"HSET", a.store.JobKey("k"), "stage", "refinement"}).ok());
  EXPECT_TRUE(a.store.Lookup("operations/1").ok());
  ASSERT_TRUE(redis.Command({"HSET", a.store.JobKey("k"), "stage", "a\nb"}).ok());
  EXPECT_EQ(a.store.Lookup("operations/1").status().code(), absl::StatusCode::kDataLoss);
}

TEST(OperationStoreTest, SubmitIsIdempotentPerOperationName) {
  START_REDIS_OR_SKIP(redis);
  Replica a(redis.port(), "a");
  absl::StatusOr<SubmitOutcome> first = a.store.Submit(Op("operations/1", "k"), Job("k"));
  ASSERT_TRUE(first.ok()) << first.status();
  // The same call again (a stalled Redis runs a submit whose caller gave up and retried).
  absl::StatusOr<SubmitOutcome> again = a.store.Submit(Op("operations/1", "k"), Job("k"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->result, SubmitResult::kExisted);
  EXPECT_EQ(again->owner, "a");
  EXPECT_EQ(again->entry_id, first->entry_id);
  EXPECT_EQ(*redis.Command({"XLEN", a.store.StreamKey()}), "1");
  EXPECT_EQ(*redis.Command({"HGET", a.store.JobKey("k"), "waiters"}), "1");
}

TEST(OperationStoreTest, TheOwnerEndsACancelledJobAndDropsItsEntryAtOnce) {
  START_REDIS_OR_SKIP(redis);
  Replica a(redis.port(), "a");
  absl::StatusOr<SubmitOutcome> created = a.store.Submit(Op("operations/1", "k"), Job("k"));
  ASSERT_TRUE(created.ok());
  ASSERT_TRUE(a.store.Cancel("operations/1", "team-a").ok());
  absl::StatusOr<bool> finished =
      a.store.FinishCancelled("k", created->entry_id, absl::Seconds(30));
  ASSERT_TRUE(finished.ok()) << finished.status();
  EXPECT_TRUE(*finished);
  EXPECT_EQ(*redis.Command({"XLEN", a.store.StreamKey()}), "0");
  EXPECT_EQ(*redis.Command({"EXISTS", a.store.RequestKey("k")}), "0");
  // Acknowledged too: nothing is left pending for a claim to trip over.
  absl::SleepFor(absl::Milliseconds(5));
  absl::StatusOr<ClaimOutcome> claim = a.store.ClaimExpired(absl::Milliseconds(1), 10);
  ASSERT_TRUE(claim.ok());
  EXPECT_TRUE(claim->claimed.empty());
  EXPECT_EQ(claim->dropped, 0);
  EXPECT_EQ(*redis.Command({"HGET", a.store.RequestBudgetKey("team-a"), "~total"}), "0");
  ViewOrGone view = a.store.Lookup("operations/1");
  ASSERT_TRUE(view.ok() && view->has_value());
  EXPECT_EQ((*view)->job->state, JobRecordState::kFailed);
  EXPECT_EQ((*view)->job->error_code, static_cast<int>(absl::StatusCode::kCancelled));
  EXPECT_LE(Ttl(redis, a.store.JobKey("k")), 30'000);
  // Another replica's job under the same key is not touched by a late call.
  Replica b(redis.port(), "b");
  absl::StatusOr<SubmitOutcome> fresh = b.store.Submit(Op("operations/2", "k"), Job("k"));
  ASSERT_TRUE(fresh.ok());
  ASSERT_EQ(fresh->result, SubmitResult::kCreated);
  finished = a.store.FinishCancelled("k", created->entry_id, absl::Seconds(30));
  ASSERT_TRUE(finished.ok());
  EXPECT_FALSE(*finished);
  EXPECT_EQ(*redis.Command({"XLEN", a.store.StreamKey()}), "1");
}

TEST(OperationStoreTest, AClaimDropsEveryDeadEntryWithoutSpendingItsCountOnThem) {
  START_REDIS_OR_SKIP(redis);
  Replica a(redis.port(), "a"), b(redis.port(), "b");
  ASSERT_TRUE(a.store.Submit(Op("operations/0", "first"), Job("first")).ok());  // a live job
  // Dead entries: garbage delivered to a consumer that never acknowledges it, and the entries of
  // jobs everybody cancelled.
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE(redis.Command({"XADD", a.store.StreamKey(), "*", i % 2 == 0 ? "junk" : "job",
                               i % 2 == 0 ? "x" : "nosuchjob"})
                    .ok());
  }
  ASSERT_TRUE(redis.Command({"XREADGROUP", "GROUP", OperationStore::kGroup, "ghost", "COUNT",
                             "100", "STREAMS", a.store.StreamKey(), ">"})
                  .ok());
  for (int i = 0; i < 10; ++i) {
    const std::string key = absl::StrCat("cancelled", i);
    ASSERT_TRUE(a.store.Submit(Op(absl::StrCat("operations/c", i), key), Job(key)).ok());
    ASSERT_TRUE(a.store.Cancel(absl::StrCat("operations/c", i), "team-a").ok());
  }
  // The job to take over comes last, with a lease that has run out.
  NewJob live_job = Job("live");
  live_job.lease = absl::Milliseconds(1);
  ASSERT_TRUE(a.store.Submit(Op("operations/live", "live"), live_job).ok());
  absl::SleepFor(absl::Milliseconds(20));  // Redis's idle clock: real time
  // One free worker: the live job is claimed, and every dead entry goes in the same call.
  absl::StatusOr<ClaimOutcome> claimed = b.store.ClaimExpired(absl::Milliseconds(1), 1);
  ASSERT_TRUE(claimed.ok()) << claimed.status();
  ASSERT_EQ(claimed->claimed.size(), 1u);
  EXPECT_EQ(claimed->claimed[0].job_key, "live");
  EXPECT_EQ(claimed->dropped, 40);
  EXPECT_EQ(claimed->waiting_for_longer_lease, 1);  // "first": its 5 s lease is not over
  EXPECT_EQ(*redis.Command({"XLEN", a.store.StreamKey()}), "2");
  ViewOrGone cancelled = a.store.Lookup("operations/c3");
  ASSERT_TRUE(cancelled.ok() && cancelled->has_value());
  EXPECT_EQ((*cancelled)->job->state, JobRecordState::kFailed);
  // With no worker free, dead entries still go and nothing is claimed.
  ASSERT_TRUE(redis.Command({"XADD", a.store.StreamKey(), "*", "junk", "y"}).ok());
  ASSERT_TRUE(redis.Command({"XREADGROUP", "GROUP", OperationStore::kGroup, "ghost", "COUNT", "10",
                             "STREAMS", a.store.StreamKey(), ">"})
                  .ok());
  absl::SleepFor(absl::Milliseconds(20));
  absl::StatusOr<ClaimOutcome> none = b.store.ClaimExpired(absl::Milliseconds(1), 0);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->claimed.empty());
  EXPECT_EQ(none->dropped, 1);
  EXPECT_EQ(*redis.Command({"XLEN", a.store.StreamKey()}), "2");
}

TEST(OperationStoreTest, AJobSubmittedWithALongerLeaseWaitsForIt) {
  START_REDIS_OR_SKIP(redis);
  Replica a(redis.port(), "a"), b(redis.port(), "b");
  NewJob job = Job("k");
  job.lease = absl::Seconds(10);
  absl::StatusOr<SubmitOutcome> created = a.store.Submit(Op("operations/1", "k"), job);
  ASSERT_TRUE(created.ok());
  Age(redis, a, created->entry_id, absl::Seconds(6));
  absl::StatusOr<ClaimOutcome> early = b.store.ClaimExpired(absl::Seconds(5), 4);
  ASSERT_TRUE(early.ok()) << early.status();
  EXPECT_TRUE(early->claimed.empty());
  EXPECT_EQ(early->waiting_for_longer_lease, 1);
  EXPECT_EQ(early->longest_lease, absl::Seconds(10));
  EXPECT_EQ(early->dropped, 0);
  Age(redis, a, created->entry_id, absl::Seconds(11));
  absl::StatusOr<ClaimOutcome> late = b.store.ClaimExpired(absl::Seconds(5), 4);
  ASSERT_TRUE(late.ok());
  ASSERT_EQ(late->claimed.size(), 1u);
  // The taker's lease is the job's from now on.
  ASSERT_TRUE(b.store.TakeOver(late->claimed[0], absl::Seconds(5)).ok());
  EXPECT_EQ(*redis.Command({"HGET", a.store.JobKey("k"), "lease_ms"}), "5000");
}

TEST(OperationStoreTest, RequestsOverTheSizeBoundOrTheTenantBudgetAreNotStored) {
  START_REDIS_OR_SKIP(redis);
  Replica a(redis.port(), "a"), b(redis.port(), "b");
  NewJob large = Job("large");
  large.serialized_request.clear();
  large.storage = RequestStorage::kTooLarge;
  absl::StatusOr<SubmitOutcome> too_large = a.store.Submit(Op("operations/l", "large"), large);
  ASSERT_TRUE(too_large.ok()) << too_large.status();
  EXPECT_EQ(too_large->storage, RequestStorage::kTooLarge);
  EXPECT_EQ(*redis.Command({"EXISTS", a.store.RequestKey("large")}), "0");
  // A budget of 30 bytes holds two requests of 13 bytes ("request-bytes"), not a third.
  std::vector<absl::StatusOr<SubmitOutcome>> outcomes;
  for (int i = 0; i < 3; ++i) {
    NewJob job = Job(absl::StrCat("k", i));
    job.tenant_request_budget_bytes = 30;
    outcomes.push_back(a.store.Submit(Op(absl::StrCat("operations/", i), job.job_key), job));
    ASSERT_TRUE(outcomes.back().ok()) << outcomes.back().status();
  }
  EXPECT_EQ(outcomes[0]->storage, RequestStorage::kStored);
  EXPECT_EQ(outcomes[1]->storage, RequestStorage::kStored);
  EXPECT_EQ(outcomes[2]->storage, RequestStorage::kOverBudget);
  EXPECT_EQ(*redis.Command({"HGET", a.store.RequestBudgetKey("team-a"), "~total"}), "26");
  // Another tenant has its own budget.
  NewJob other = Job("other");
  other.tenant = "team-b";
  other.tenant_request_budget_bytes = 30;
  absl::StatusOr<SubmitOutcome> elsewhere =
      a.store.Submit(Op("operations/o", "other", "team-b"), other);
  ASSERT_TRUE(elsewhere.ok());
  EXPECT_EQ(elsewhere->storage, RequestStorage::kStored);
  // A job that ends gives its bytes back; a request gone without a word is recounted.
  ASSERT_TRUE(a.store
                  .Complete({.job_key = "k0", .entry_id = outcomes[0]->entry_id,
                             .result_key = "t:v", .result_value = "v",
                             .result_ttl = absl::Minutes(1), .ttl_after_done = absl::Minutes(1)})
                  .ok());
  EXPECT_EQ(*redis.Command({"HGET", a.store.RequestBudgetKey("team-a"), "~total"}), "13");
  ASSERT_TRUE(redis.Command({"DEL", a.store.RequestKey("k1")}).ok());  // evicted, say
  absl::SleepFor(absl::Milliseconds(1100));  // recounts are at most once a second (Redis's clock)
  NewJob next = Job("k3");
  next.tenant_request_budget_bytes = 13;
  absl::StatusOr<SubmitOutcome> stored = a.store.Submit(Op("operations/3", "k3"), next);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->storage, RequestStorage::kStored);

  // A job whose request was not stored cannot be taken over: it ends ABORTED, saying why.
  Age(redis, a, too_large->entry_id, absl::Seconds(6));
  absl::StatusOr<ClaimOutcome> claimed = b.store.ClaimExpired(absl::Seconds(5), 10);
  ASSERT_TRUE(claimed.ok());
  ASSERT_EQ(claimed->claimed.size(), 1u);
  absl::StatusOr<std::optional<TakenJob>> taken =
      b.store.TakeOver(claimed->claimed[0], absl::Seconds(5));
  ASSERT_TRUE(taken.ok());
  EXPECT_FALSE(taken->has_value());
  ViewOrGone view = a.store.Lookup("operations/l");
  ASSERT_TRUE(view.ok() && view->has_value());
  EXPECT_EQ((*view)->job->state, JobRecordState::kFailed);
  EXPECT_EQ((*view)->job->error_code, static_cast<int>(absl::StatusCode::kAborted));
  EXPECT_NE((*view)->job->error_message.find("--operation_max_request_bytes"), std::string::npos);
}

TEST(OperationStoreTest, AnUnstorableResultIsRecordedAsAFailureWhenRedisIsFull) {
  START_REDIS_OR_SKIP(redis);
  Replica a(redis.port(), "a");
  absl::StatusOr<SubmitOutcome> created = a.store.Submit(Op("operations/1", "k"), Job("k"));
  ASSERT_TRUE(created.ok()) << created.status();
  // Full: Redis holds more than its maxmemory, and noeviction refuses every write.
  ASSERT_TRUE(redis.Command({"CONFIG", "SET", "maxmemory-policy", "noeviction"}).ok());
  ASSERT_TRUE(redis.Command({"CONFIG", "SET", "maxmemory", "1"}).ok());
  Completion completion{.job_key = "k", .entry_id = created->entry_id, .result_key = "t:v",
                        .result_value = std::string(2000, 'r'), .result_ttl = absl::Minutes(1),
                        .ttl_after_done = absl::Minutes(1)};
  absl::StatusOr<bool> refused = a.store.Complete(completion);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(cache::ErrorReplyCode(refused.status()), "OOM") << refused.status();
  completion.error = absl::AbortedError("out of memory: the result was not stored");
  absl::StatusOr<bool> recorded = a.store.RecordUnstoredResult(completion);
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  EXPECT_TRUE(*recorded);
  ViewOrGone view = a.store.Lookup("operations/1");
  ASSERT_TRUE(view.ok() && view->has_value()) << view.status();
  EXPECT_EQ((*view)->job->state, JobRecordState::kFailed);
  EXPECT_EQ((*view)->job->error_code, static_cast<int>(absl::StatusCode::kAborted));
  EXPECT_EQ(*redis.Command({"XLEN", a.store.StreamKey()}), "0");
  EXPECT_EQ(*redis.Command({"EXISTS", a.store.RequestKey("k")}), "0");
}

TEST(OperationStoreTest, RedisDownIsUnavailable) {
  START_REDIS_OR_SKIP(redis);
  Replica a(redis.port(), "a");
  redis.Kill();
  absl::StatusOr<SubmitOutcome> outcome = a.store.Submit(Op("operations/1", "k"), Job("k"));
  EXPECT_TRUE(absl::IsUnavailable(outcome.status())) << outcome.status();
  EXPECT_TRUE(absl::IsUnavailable(a.store.Lookup("operations/1").status()));
  ASSERT_TRUE(redis.Restart().ok());
  // Back (scripts are sent again after NOSCRIPT).
  absl::Status last;
  const absl::Time give_up = absl::Now() + absl::Seconds(5);
  do {
    last = a.store.Submit(Op("operations/1", "k"), Job("k")).status();
  } while (!last.ok() && absl::Now() < give_up);
  EXPECT_TRUE(last.ok()) << last;
}

TEST(OperationStoreTest, IdleConsumersWithNothingPendingAreForgotten) {
  START_REDIS_OR_SKIP(redis);
  Replica a(redis.port(), "a"), b(redis.port(), "b"), gone(redis.port(), "gone");
  // No stream yet: nothing to do, no error.
  absl::StatusOr<int64_t> removed = a.store.ForgetIdleConsumers(absl::ZeroDuration());
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 0);
  // "gone" ran a job to its end; "b" still owns one.
  absl::StatusOr<SubmitOutcome> done = gone.store.Submit(Op("operations/1", "k1"), Job("k1"));
  ASSERT_TRUE(done.ok());
  ASSERT_TRUE(gone.store
                  .Complete({.job_key = "k1", .entry_id = done->entry_id, .result_key = "t:v",
                             .result_value = "v", .result_ttl = absl::Minutes(1),
                             .ttl_after_done = absl::Minutes(1)})
                  .ok());
  absl::StatusOr<SubmitOutcome> owned = b.store.Submit(Op("operations/2", "k2"), Job("k2"));
  ASSERT_TRUE(owned.ok());
  removed = a.store.ForgetIdleConsumers(absl::ZeroDuration());
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 1);
  // b's entry is still b's (its lease is intact).
  absl::StatusOr<std::vector<std::string>> kept = b.store.Renew({owned->entry_id});
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(*kept, std::vector<std::string>{owned->entry_id});
  absl::StatusOr<ClaimOutcome> claimed = a.store.ClaimExpired(absl::Seconds(5), 4);
  ASSERT_TRUE(claimed.ok());
  EXPECT_TRUE(claimed->claimed.empty());
  // An idle bound that nobody reaches removes nobody.
  removed = a.store.ForgetIdleConsumers(absl::Hours(1));
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, 0);
}

}  // namespace
}  // namespace placement::shared_ops
