#include "service/jobs/operation_registry.h"

#include <atomic>
#include <memory>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/status_payloads/status_payloads.h"
#include "service/jobs/job_test_util.h"

namespace placement::jobs {
namespace {

using ::testing::MatchesRegex;
using ::testing::HasSubstr;

// Blocks until the operation is done (via a listener, no polling).
Operation::Snapshot AwaitDone(const std::shared_ptr<Operation>& op) {
  auto done = std::make_shared<absl::Notification>();
  const uint64_t id = op->AddListener([done](const Operation& o) {
    if (o.done() && !done->HasBeenNotified()) done->Notify();
  });
  if (id != 0) done->WaitForNotification();
  return op->snapshot();
}

JobSpec Spec(std::string digest, JobWork work) {
  JobSpec spec;
  spec.request_digest = std::move(digest);
  spec.work = std::move(work);
  return spec;
}

OperationSpec OpSpec(std::string digest, std::string request_id = "", std::string tenant = "") {
  OperationSpec spec;
  spec.tenant = std::move(tenant);
  spec.request_id = std::move(request_id);
  spec.request_digest = std::move(digest);
  return spec;
}

class OperationRegistryTest : public ::testing::Test {
 protected:
  FakeClock clock_;
  JobManager jobs_{{.workers = 2, .clock = &clock_}};
  OperationRegistry registry_{{.ttl_after_done = absl::Minutes(15), .max_operations = 8,
                               .clock = &clock_},
                              &jobs_};
};

TEST_F(OperationRegistryTest, NamesAreUnguessableAndDistinct) {
  absl::flat_hash_set<std::string> names;
  for (int i = 0; i < 100; ++i) {
    const std::string name = NewOperationName();
    EXPECT_THAT(name, MatchesRegex("operations/[0-9a-f]{32}"));
    names.insert(name);
  }
  EXPECT_EQ(names.size(), 100u);
}

TEST_F(OperationRegistryTest, PendingOperationCompletesWithTheJobsResult) {
  Gate gate;
  absl::StatusOr<Admission> admitted = jobs_.Acquire(Spec("d", gate.Work(6)));
  ASSERT_TRUE(admitted.ok());
  absl::StatusOr<std::shared_ptr<Operation>> op =
      registry_.AddPending(OpSpec("d"), *std::move(admitted));
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_FALSE((*op)->done());
  Operation::Snapshot pending = (*op)->snapshot();
  EXPECT_FALSE(pending.done);
  EXPECT_EQ(pending.placement, nullptr);
  EXPECT_TRUE(pending.error.ok());

  gate.release.Notify();
  Operation::Snapshot done = AwaitDone(*op);
  ASSERT_TRUE(done.error.ok()) << done.error;
  ASSERT_NE(done.placement, nullptr);
  EXPECT_EQ(done.placement->device(0), 6);
  EXPECT_EQ(done.cache, v1::MISS);
  EXPECT_EQ(jobs_.Stats().in_flight, 0);

  absl::StatusOr<std::shared_ptr<Operation>> found = registry_.Find((*op)->name(), "");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(*found, *op);
}

TEST_F(OperationRegistryTest, CancelEndsTheOperationAndItsUnsharedJob) {
  Gate gate;  // only cancellation ends it
  absl::StatusOr<Admission> admitted = jobs_.Acquire(Spec("d", gate.Work()));
  ASSERT_TRUE(admitted.ok());
  std::shared_ptr<Job> job = admitted->job;
  absl::StatusOr<std::shared_ptr<Operation>> op =
      registry_.AddPending(OpSpec("d"), *std::move(admitted));
  ASSERT_TRUE(op.ok());
  gate.started.WaitForNotification();

  absl::StatusOr<std::shared_ptr<Operation>> cancelled = registry_.Cancel((*op)->name(), "");
  ASSERT_TRUE(cancelled.ok());
  Operation::Snapshot snapshot = (*cancelled)->snapshot();
  EXPECT_TRUE(snapshot.done);
  EXPECT_EQ(snapshot.error.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(snapshot.placement, nullptr);
  EXPECT_TRUE(job->cancelled());
  AwaitJobDone(job);
  EXPECT_EQ(job->result().placement.status().code(), absl::StatusCode::kCancelled);
}

TEST_F(OperationRegistryTest, CancelLeavesASharedJobRunning) {
  Gate gate;
  absl::StatusOr<Admission> unary = jobs_.Acquire(Spec("d", gate.Work(8)));
  ASSERT_TRUE(unary.ok());
  absl::StatusOr<Admission> for_op = jobs_.Acquire(Spec("d", gate.Work(9)));
  ASSERT_TRUE(for_op.ok());
  EXPECT_TRUE(for_op->coalesced);
  absl::StatusOr<std::shared_ptr<Operation>> op =
      registry_.AddPending(OpSpec("d"), *std::move(for_op));
  ASSERT_TRUE(op.ok());
  EXPECT_EQ((*op)->snapshot().cache, v1::COALESCED);

  ASSERT_TRUE(registry_.Cancel((*op)->name(), "").ok());
  gate.release.Notify();
  AwaitJobDone(unary->job);
  ASSERT_TRUE(unary->job->result().placement.ok());
  EXPECT_EQ((*unary->job->result().placement)->device(0), 8);
  jobs_.Release(unary->job);
}

TEST_F(OperationRegistryTest, CancellingADoneOperationChangesNothing) {
  absl::StatusOr<std::shared_ptr<Operation>> op =
      registry_.AddDone(OpSpec("d"), MakePlacement(1), v1::HIT);
  ASSERT_TRUE(op.ok());
  ASSERT_TRUE(registry_.Cancel((*op)->name(), "").ok());
  Operation::Snapshot snapshot = (*op)->snapshot();
  EXPECT_TRUE(snapshot.error.ok());
  ASSERT_NE(snapshot.placement, nullptr);
  EXPECT_EQ(snapshot.cache, v1::HIT);
}

TEST_F(OperationRegistryTest, FinishedOperationsExpireAfterTheirTtl) {
  absl::StatusOr<std::shared_ptr<Operation>> op =
      registry_.AddDone(OpSpec("d"), MakePlacement(1), v1::HIT);
  ASSERT_TRUE(op.ok());
  const std::string name = (*op)->name();
  clock_.Advance(absl::Minutes(14));
  EXPECT_TRUE(registry_.Find(name, "").ok());
  clock_.Advance(absl::Minutes(2));
  absl::StatusOr<std::shared_ptr<Operation>> expired = registry_.Find(name, "");
  EXPECT_EQ(expired.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry_.size(), 0u);
}

TEST_F(OperationRegistryTest, PendingOperationsDoNotExpire) {
  Gate gate;
  absl::StatusOr<Admission> admitted = jobs_.Acquire(Spec("d", gate.Work()));
  ASSERT_TRUE(admitted.ok());
  absl::StatusOr<std::shared_ptr<Operation>> op =
      registry_.AddPending(OpSpec("d"), *std::move(admitted));
  ASSERT_TRUE(op.ok());
  clock_.Advance(absl::Hours(2));
  EXPECT_TRUE(registry_.Find((*op)->name(), "").ok());
  gate.release.Notify();
  AwaitDone(*op);
  clock_.Advance(absl::Minutes(16));
  EXPECT_EQ(registry_.Find((*op)->name(), "").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(OperationRegistryTest, UnknownAndOtherTenantsNamesAreNotFound) {
  EXPECT_EQ(registry_.Find("operations/nope", "").status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<std::shared_ptr<Operation>> op =
      registry_.AddDone(OpSpec("d", "", "team-a"), MakePlacement(1), v1::HIT);
  ASSERT_TRUE(op.ok());
  EXPECT_TRUE(registry_.Find((*op)->name(), "team-a").ok());
  EXPECT_EQ(registry_.Find((*op)->name(), "team-b").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(registry_.Cancel((*op)->name(), "team-b").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(OperationRegistryTest, RequestIdMakesSubmissionIdempotent) {
  absl::StatusOr<std::shared_ptr<Operation>> first =
      registry_.AddDone(OpSpec("d1", "req-1"), MakePlacement(1), v1::HIT);
  ASSERT_TRUE(first.ok());
  absl::StatusOr<std::shared_ptr<Operation>> again =
      registry_.AddDone(OpSpec("d1", "req-1"), MakePlacement(1), v1::HIT);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *first);
  EXPECT_EQ(registry_.FindByRequestId("", "req-1"), *first);

  absl::StatusOr<std::shared_ptr<Operation>> clash =
      registry_.AddDone(OpSpec("d2", "req-1"), MakePlacement(1), v1::HIT);
  EXPECT_EQ(clash.status().code(), absl::StatusCode::kAlreadyExists);

  // A pending submission with a reused id hands back its waiter on the job.
  Gate gate;
  absl::StatusOr<Admission> admitted = jobs_.Acquire(Spec("d1", gate.Work()));
  ASSERT_TRUE(admitted.ok());
  std::shared_ptr<Job> job = admitted->job;
  absl::StatusOr<std::shared_ptr<Operation>> pending =
      registry_.AddPending(OpSpec("d1", "req-1"), *std::move(admitted));
  ASSERT_TRUE(pending.ok());
  EXPECT_EQ(*pending, *first);
  EXPECT_TRUE(job->cancelled());  // its only waiter was released
  AwaitJobDone(job);
}

// Issue 14: a full table used to refuse with "retry in 1 s" while it held finished operations for
// their whole TTL, so the retry could not succeed. Finished operations now make room, oldest first.
TEST_F(OperationRegistryTest, AFullTableDropsTheOldestFinishedOperation) {
  std::vector<std::string> names;
  for (int i = 0; i < 8; ++i) {
    absl::StatusOr<std::shared_ptr<Operation>> op =
        registry_.AddDone(OpSpec("d"), MakePlacement(1), v1::HIT);
    ASSERT_TRUE(op.ok());
    names.push_back((*op)->name());
    clock_.Advance(absl::Seconds(1));
  }
  absl::StatusOr<std::shared_ptr<Operation>> ninth =
      registry_.AddDone(OpSpec("d"), MakePlacement(1), v1::HIT);
  ASSERT_TRUE(ninth.ok()) << ninth.status();
  EXPECT_EQ(registry_.Find(names[0], "").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(registry_.Find(names[1], "").ok());
  EXPECT_EQ(registry_.size(), 8u);
  EXPECT_EQ(registry_.evicted_early(), 1);
}

TEST_F(OperationRegistryTest, AFullTableOfRunningOperationsIsUnavailableUntilOneFinishes) {
  absl::Notification release;
  auto work = [&release](const JobContext& context) -> absl::StatusOr<PlacementPtr> {
    while (!release.WaitForNotificationWithTimeout(absl::Milliseconds(1))) {
      if (context.cancelled()) return absl::CancelledError("saw the flag");
    }
    return MakePlacement(1);
  };
  std::vector<std::shared_ptr<Operation>> pending;
  for (int i = 0; i < 8; ++i) {
    absl::StatusOr<Admission> admitted = jobs_.Acquire(Spec(absl::StrCat("d", i), work));
    ASSERT_TRUE(admitted.ok());
    absl::StatusOr<std::shared_ptr<Operation>> op =
        registry_.AddPending(OpSpec(absl::StrCat("d", i)), *std::move(admitted));
    ASSERT_TRUE(op.ok());
    pending.push_back(*op);
  }
  absl::StatusOr<std::shared_ptr<Operation>> rejected =
      registry_.AddDone(OpSpec("d"), MakePlacement(1), v1::HIT);
  EXPECT_EQ(rejected.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(rejected.status().message()), HasSubstr("retry once one has finished"));
  EXPECT_TRUE(status_payloads::RetryDelayOf(rejected.status()).has_value());
  release.Notify();
  AwaitDone(pending[0]);
  EXPECT_TRUE(registry_.AddDone(OpSpec("d"), MakePlacement(1), v1::HIT).ok());
  for (const auto& op : pending) AwaitDone(op);
}

TEST_F(OperationRegistryTest, ListenersHearProgressAndCompletion) {
  absl::Notification go;
  auto work = [&](const JobContext& context) -> absl::StatusOr<PlacementPtr> {
    go.WaitForNotification();
    context.ReportProgress("slicing", 0.5, 10);
    return MakePlacement(2);
  };
  absl::StatusOr<Admission> admitted = jobs_.Acquire(Spec("d", work));
  ASSERT_TRUE(admitted.ok());
  absl::StatusOr<std::shared_ptr<Operation>> op =
      registry_.AddPending(OpSpec("d"), *std::move(admitted));
  ASSERT_TRUE(op.ok());
  absl::Mutex mu;
  std::vector<std::string> stages;
  (*op)->AddListener([&](const Operation& o) {
    absl::MutexLock lock(&mu);
    stages.push_back(o.snapshot().progress.stage);
  });
  go.Notify();
  AwaitDone(*op);
  absl::MutexLock lock(&mu);
  ASSERT_FALSE(stages.empty());
  EXPECT_EQ(stages.back(), "done");
  EXPECT_NE(std::find(stages.begin(), stages.end(), "slicing"), stages.end());
}

TEST_F(OperationRegistryTest, MirrorIsDrivenFromOutside) {
  OperationSpec spec = OpSpec("d", "", "team-a");
  spec.name = "operations/0123456789abcdef0123456789abcdef";
  absl::StatusOr<std::shared_ptr<Operation>> op = registry_.AddMirror(spec, v1::COALESCED);
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_TRUE((*op)->mirror());
  EXPECT_EQ((*op)->name(), spec.name);
  EXPECT_FALSE((*op)->done());
  EXPECT_EQ((*op)->snapshot().cache, v1::COALESCED);

  // One mirror per name; never another tenant's.
  absl::StatusOr<std::shared_ptr<Operation>> again = registry_.AddMirror(spec, v1::COALESCED);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *op);
  OperationSpec intruder = spec;
  intruder.tenant = "team-b";
  EXPECT_TRUE(absl::IsNotFound(registry_.AddMirror(intruder, v1::COALESCED).status()));
  EXPECT_TRUE(absl::IsNotFound(registry_.Find(spec.name, "team-b").status()));

  absl::Mutex mu;
  std::vector<std::string> stages;
  (*op)->AddListener([&](const Operation& o) {
    absl::MutexLock lock(&mu);
    stages.push_back(o.snapshot().progress.stage);
  });
  EXPECT_EQ(registry_.CountByState().pending, 1);
  EXPECT_EQ(registry_.CountByState().done, 0);
  (*op)->UpdateProgress({.stage = "slicing", .fraction = 0.5, .best_makespan_ns = 7});
  (*op)->UpdateProgress({.stage = "slicing", .fraction = 0.5, .best_makespan_ns = 7});  // unchanged
  EXPECT_EQ((*op)->snapshot().progress.best_makespan_ns, 7);
  EXPECT_TRUE((*op)->Finish(MakePlacement(3), absl::Milliseconds(2), absl::Seconds(1)));
  EXPECT_FALSE((*op)->Finish(MakePlacement(4), absl::ZeroDuration(), absl::ZeroDuration()));
  Operation::Snapshot done = AwaitDone(*op);
  ASSERT_NE(done.placement, nullptr);
  EXPECT_EQ(done.placement->device(0), 3);
  EXPECT_EQ(done.queue_time, absl::Milliseconds(2));
  {
    absl::MutexLock lock(&mu);
    EXPECT_EQ(stages, (std::vector<std::string>{"slicing", "done"}));
  }
  EXPECT_EQ(registry_.CountByState().pending, 0);
  EXPECT_EQ(registry_.CountByState().done, 1);

  // It expires like any finished operation.
  clock_.Advance(absl::Minutes(16));
  EXPECT_TRUE(absl::IsNotFound(registry_.Find(spec.name, "team-a").status()));
}

TEST_F(OperationRegistryTest, MirrorEndsWithTheRemoteErrorOrACancel) {
  OperationSpec spec = OpSpec("d");
  spec.name = "operations/1";
  absl::StatusOr<std::shared_ptr<Operation>> failed = registry_.AddMirror(spec, v1::MISS);
  ASSERT_TRUE(failed.ok());
  (*failed)->Finish(absl::ResourceExhaustedError("does not fit"), absl::ZeroDuration(),
                    absl::ZeroDuration());
  EXPECT_EQ((*failed)->snapshot().error.code(), absl::StatusCode::kResourceExhausted);

  spec.name = "operations/2";
  absl::StatusOr<std::shared_ptr<Operation>> cancelled = registry_.AddMirror(spec, v1::MISS);
  ASSERT_TRUE(cancelled.ok());
  ASSERT_TRUE(registry_.Cancel("operations/2", "").ok());
  EXPECT_EQ((*cancelled)->snapshot().error.code(), absl::StatusCode::kCancelled);
  EXPECT_FALSE((*cancelled)->Finish(MakePlacement(1), absl::ZeroDuration(), absl::ZeroDuration()));
}

TEST_F(OperationRegistryTest, GivenNameIsKeptAndLocalOperationsIgnoreOutsideDrivers) {
  Gate gate;
  absl::StatusOr<Admission> admitted = jobs_.Acquire(Spec("d", gate.Work(5)));
  ASSERT_TRUE(admitted.ok());
  OperationSpec spec = OpSpec("d");
  spec.name = "operations/chosen";
  absl::StatusOr<std::shared_ptr<Operation>> op =
      registry_.AddPending(spec, *std::move(admitted));
  ASSERT_TRUE(op.ok());
  EXPECT_EQ((*op)->name(), "operations/chosen");
  EXPECT_FALSE((*op)->mirror());
  EXPECT_FALSE((*op)->Finish(MakePlacement(1), absl::ZeroDuration(), absl::ZeroDuration()));
  gate.release.Notify();
  EXPECT_EQ(AwaitDone(*op).placement->device(0), 5);
}

}  // namespace
}  // namespace placement::jobs
