#include "service/jobs/job_manager.h"

#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/status_payloads/status_payloads.h"
#include "service/jobs/job_test_util.h"

namespace placement::jobs {
namespace {

using ::testing::HasSubstr;

JobSpec Spec(std::string digest, JobWork work, std::string tenant = "") {
  JobSpec spec;
  spec.request_digest = std::move(digest);
  spec.tenant = std::move(tenant);
  spec.algorithm = "test";
  spec.time_limit = absl::Seconds(10);
  spec.work = std::move(work);
  return spec;
}

// Admits `gate`'s work under `digest` and waits until a worker runs it: the worker stays busy
// until the test releases the gate (or cancels the job).
absl::StatusOr<Admission> AcquireRunning(JobManager& jobs, Gate& gate, std::string digest) {
  absl::StatusOr<Admission> admission = jobs.Acquire(Spec(std::move(digest), gate.Work()));
  if (admission.ok()) gate.started.WaitForNotification();
  return admission;
}

JobWork Immediate(int32_t device) {
  return [device](const JobContext&) -> absl::StatusOr<PlacementPtr> {
    return MakePlacement(device);
  };
}

class RecordingObserver : public JobObserver {
 public:
  void OnAdmissionRejected(absl::string_view reason) override {
    absl::MutexLock lock(&mu_);
    rejections_.emplace_back(reason);
  }
  void OnTenantRejected(absl::string_view tenant, absl::string_view reason) override {
    absl::MutexLock lock(&mu_);
    tenant_rejections_.push_back(absl::StrCat(tenant, "/", reason));
  }
  void OnJobFinished(const Job& job, const JobResult& result) override {
    absl::MutexLock lock(&mu_);
    if (result.ran) ++ran_;
  }
  std::vector<std::string> tenant_rejections() {
    absl::MutexLock lock(&mu_);
    return tenant_rejections_;
  }
  std::vector<std::string> rejections() {
    absl::MutexLock lock(&mu_);
    return rejections_;
  }
  int ran() {
    absl::MutexLock lock(&mu_);
    return ran_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> rejections_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> tenant_rejections_ ABSL_GUARDED_BY(mu_);
  int ran_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST(JobManagerTest, RunsAJobAndMeasuresQueueTimeWithTheInjectedClock) {
  FakeClock clock;
  JobManager jobs({.workers = 1, .clock = &clock});
  Gate blocker;
  absl::StatusOr<Admission> first = jobs.Acquire(Spec("a", blocker.Work()));
  ASSERT_TRUE(first.ok());
  blocker.started.WaitForNotification();

  absl::StatusOr<Admission> second = jobs.Acquire(Spec("b", Immediate(7)));
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->coalesced);
  clock.Advance(absl::Seconds(3));  // b waits 3 s (fake) for the worker
  blocker.release.Notify();

  const JobResult& result = AwaitJobDone(second->job);
  ASSERT_TRUE(result.placement.ok()) << result.placement.status();
  EXPECT_EQ((*result.placement)->device(0), 7);
  EXPECT_TRUE(result.ran);
  EXPECT_EQ(result.queue_time, absl::Seconds(3));
  EXPECT_EQ(second->job->progress().stage, "done");
  jobs.Release(first->job);
  jobs.Release(second->job);
}

TEST(JobManagerTest, IdenticalDigestsShareOneComputation) {
  JobManager jobs({.workers = 2});
  Gate gate;
  absl::StatusOr<Admission> first = jobs.Acquire(Spec("same", gate.Work(3)));
  ASSERT_TRUE(first.ok());
  std::vector<Admission> others;
  for (int i = 0; i < 15; ++i) {
    absl::StatusOr<Admission> other = jobs.Acquire(Spec("same", gate.Work(99)));
    ASSERT_TRUE(other.ok());
    EXPECT_TRUE(other->coalesced);
    EXPECT_EQ(other->job, first->job);
    others.push_back(*std::move(other));
  }
  EXPECT_EQ(jobs.Stats().in_flight, 1);
  gate.release.Notify();
  const JobResult& result = AwaitJobDone(first->job);
  ASSERT_TRUE(result.placement.ok());
  EXPECT_EQ((*result.placement)->device(0), 3);
  EXPECT_EQ(gate.runs.load(), 1);
  for (Admission& other : others) jobs.Release(other.job);
  jobs.Release(first->job);
  EXPECT_EQ(jobs.Stats().in_flight, 0);
}

TEST(JobManagerTest, EmptyDigestIsNeverShared) {
  JobManager jobs({.workers = 1});
  Gate gate;
  absl::StatusOr<Admission> first = jobs.Acquire(Spec("", gate.Work()));
  absl::StatusOr<Admission> second = jobs.Acquire(Spec("", Immediate(1)));
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_FALSE(second->coalesced);
  EXPECT_NE(first->job, second->job);
  gate.release.Notify();
  AwaitJobDone(second->job);
  jobs.Release(first->job);
  jobs.Release(second->job);
}

TEST(JobManagerTest, FullQueueIsUnavailableWithARetryDelay) {
  RecordingObserver observer;
  JobManager jobs({.workers = 1,
                   .max_queued_jobs = 1,
                   .retry_delay = absl::Seconds(2),
                   .observer = &observer});
  Gate gate;
  absl::StatusOr<Admission> running = AcquireRunning(jobs, gate, "a");
  ASSERT_TRUE(running.ok());
  absl::StatusOr<Admission> queued = jobs.Acquire(Spec("b", Immediate(1)));
  ASSERT_TRUE(queued.ok());
  EXPECT_EQ(jobs.Stats().queued, 1);

  absl::StatusOr<Admission> rejected = jobs.Acquire(Spec("c", Immediate(1)));
  ASSERT_FALSE(rejected.ok());
  EXPECT_EQ(rejected.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(rejected.status().message()), HasSubstr("queue is full"));
  EXPECT_EQ(status_payloads::RetryDelayOf(rejected.status()), absl::Seconds(2));
  EXPECT_EQ(observer.rejections(), std::vector<std::string>{"queue_full"});

  // Joining an in-flight job needs no queue slot.
  absl::StatusOr<Admission> joined = jobs.Acquire(Spec("b", Immediate(1)));
  ASSERT_TRUE(joined.ok());
  EXPECT_TRUE(joined->coalesced);

  gate.release.Notify();
  AwaitJobDone(queued->job);
  jobs.Release(running->job);
  jobs.Release(queued->job);
  jobs.Release(joined->job);
}

TEST(JobManagerTest, MemoryBudgetBoundsAdmission) {
  JobManager jobs({.workers = 1, .memory_budget_bytes = 100});
  Gate gate;
  JobSpec big = Spec("a", gate.Work());
  big.estimated_memory_bytes = 80;
  absl::StatusOr<Admission> running = jobs.Acquire(std::move(big));
  ASSERT_TRUE(running.ok());
  EXPECT_EQ(jobs.Stats().memory_in_use_bytes, 80);

  JobSpec more = Spec("b", Immediate(1));
  more.estimated_memory_bytes = 30;
  absl::StatusOr<Admission> rejected = jobs.Acquire(std::move(more));
  ASSERT_FALSE(rejected.ok());
  EXPECT_EQ(rejected.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(rejected.status().message()), HasSubstr("memory budget"));

  gate.release.Notify();
  AwaitJobDone(running->job);
  jobs.Release(running->job);
  EXPECT_EQ(jobs.Stats().memory_in_use_bytes, 0);

  // Alone, a job larger than the whole budget is still admitted (it could never run otherwise).
  JobSpec huge = Spec("c", Immediate(1));
  huge.estimated_memory_bytes = 500;
  absl::StatusOr<Admission> admitted = jobs.Acquire(std::move(huge));
  ASSERT_TRUE(admitted.ok());
  AwaitJobDone(admitted->job);
  jobs.Release(admitted->job);
}

TEST(JobManagerTest, DeadlineTooShortIsRejectedAtOnce) {
  FakeClock clock;
  RecordingObserver observer;
  JobManager jobs({.workers = 1,
                   .min_time_budget = absl::Milliseconds(100),
                   .clock = &clock,
                   .observer = &observer});
  JobSpec spec = Spec("a", Immediate(1));
  spec.deadline = clock.Now() + absl::Milliseconds(50);
  absl::StatusOr<Admission> rejected = jobs.Acquire(std::move(spec));
  ASSERT_FALSE(rejected.ok());
  EXPECT_EQ(rejected.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(observer.rejections(), std::vector<std::string>{"deadline"});
  EXPECT_EQ(observer.ran(), 0);
}

TEST(JobManagerTest, WorkDeadlineIsTheTimeLimitCappedByTheCallersDeadline) {
  FakeClock clock;
  JobManager jobs({.workers = 1, .clock = &clock});
  auto seen = std::make_shared<absl::Time>();
  auto capture = [seen](const JobContext& context) -> absl::StatusOr<PlacementPtr> {
    *seen = context.deadline();
    return MakePlacement(0);
  };
  JobSpec limited = Spec("a", capture);
  limited.time_limit = absl::Seconds(5);
  limited.deadline = clock.Now() + absl::Seconds(60);
  absl::StatusOr<Admission> first = jobs.Acquire(std::move(limited));
  ASSERT_TRUE(first.ok());
  AwaitJobDone(first->job);
  EXPECT_EQ(*seen, clock.Now() + absl::Seconds(5));

  JobSpec capped = Spec("b", capture);
  capped.time_limit = absl::Seconds(60);
  capped.deadline = clock.Now() + absl::Seconds(2);
  absl::StatusOr<Admission> second = jobs.Acquire(std::move(capped));
  ASSERT_TRUE(second.ok());
  AwaitJobDone(second->job);
  EXPECT_EQ(*seen, clock.Now() + absl::Seconds(2));
  jobs.Release(first->job);
  jobs.Release(second->job);
}

TEST(JobManagerTest, DeadlinePassingWhileQueuedEndsTheJobWithoutRunningIt) {
  FakeClock clock;
  RecordingObserver observer;
  JobManager jobs({.workers = 1, .clock = &clock, .observer = &observer});
  Gate gate;
  absl::StatusOr<Admission> blocker = AcquireRunning(jobs, gate, "a");
  ASSERT_TRUE(blocker.ok());
  JobSpec doomed = Spec("b", Immediate(1));
  doomed.deadline = clock.Now() + absl::Seconds(1);
  absl::StatusOr<Admission> queued = jobs.Acquire(std::move(doomed));
  ASSERT_TRUE(queued.ok());
  clock.Advance(absl::Seconds(2));
  gate.release.Notify();
  const JobResult& result = AwaitJobDone(queued->job);
  EXPECT_EQ(result.placement.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(result.ran);
  EXPECT_EQ(observer.ran(), 1);  // only the blocker
  jobs.Release(blocker->job);
  jobs.Release(queued->job);
}

TEST(JobManagerTest, JoinHoldsTheVeryJobEvenOnceItFinished) {
  JobManager jobs({.workers = 1});
  // A job that finished already: Join holds it done; an Acquire with the same digest would have
  // admitted (and run) it once more.
  absl::StatusOr<Admission> fast = jobs.Acquire(Spec("fast", Immediate(1)));
  ASSERT_TRUE(fast.ok());
  AwaitJobDone(fast->job);
  jobs.Join(fast->job);
  EXPECT_EQ(jobs.Stats().in_flight, 0);
  jobs.Release(fast->job);
  jobs.Release(fast->job);
  // A running job: the joined waiter keeps it running after the first one leaves.
  Gate gate;
  absl::StatusOr<Admission> running = AcquireRunning(jobs, gate, "slow");
  ASSERT_TRUE(running.ok());
  jobs.Join(running->job);
  jobs.Release(running->job);
  EXPECT_FALSE(running->job->cancelled());
  gate.release.Notify();
  const JobResult& result = AwaitJobDone(running->job);
  EXPECT_TRUE(result.placement.ok()) << result.placement.status();
  jobs.Release(running->job);
  EXPECT_EQ(gate.runs.load(), 1);
}

TEST(JobManagerTest, ReleasingTheLastWaiterOfAQueuedJobDropsIt) {
  JobManager jobs({.workers = 1});
  Gate gate;
  absl::StatusOr<Admission> blocker = AcquireRunning(jobs, gate, "a");
  ASSERT_TRUE(blocker.ok());
  Gate never;
  absl::StatusOr<Admission> queued = jobs.Acquire(Spec("b", never.Work()));
  ASSERT_TRUE(queued.ok());
  jobs.Release(queued->job);
  ASSERT_TRUE(queued->job->done());
  EXPECT_EQ(queued->job->result().placement.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(jobs.Stats().queued, 0);
  gate.release.Notify();
  AwaitJobDone(blocker->job);
  jobs.Release(blocker->job);
  EXPECT_EQ(never.runs.load(), 0);
}

TEST(JobManagerTest, ReleasingTheLastWaiterCancelsARunningJobAndFreesTheWorker) {
  JobManager jobs({.workers = 1});
  Gate gate;  // never released: only cancellation ends it
  absl::StatusOr<Admission> running = AcquireRunning(jobs, gate, "a");
  ASSERT_TRUE(running.ok());
  jobs.Release(running->job);
  const JobResult& cancelled = AwaitJobDone(running->job);
  EXPECT_EQ(cancelled.placement.status().code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(cancelled.ran);

  // The one worker is free again.
  absl::StatusOr<Admission> next = jobs.Acquire(Spec("b", Immediate(4)));
  ASSERT_TRUE(next.ok());
  const JobResult& result = AwaitJobDone(next->job);
  ASSERT_TRUE(result.placement.ok());
  jobs.Release(next->job);
}

TEST(JobManagerTest, ReleasingOneOfTwoWaitersDoesNotCancel) {
  JobManager jobs({.workers = 1});
  Gate gate;
  absl::StatusOr<Admission> first = jobs.Acquire(Spec("a", gate.Work(5)));
  absl::StatusOr<Admission> second = jobs.Acquire(Spec("a", gate.Work(6)));
  ASSERT_TRUE(first.ok() && second.ok());
  jobs.Release(first->job);
  gate.release.Notify();
  const JobResult& result = AwaitJobDone(second->job);
  ASSERT_TRUE(result.placement.ok()) << result.placement.status();
  EXPECT_EQ((*result.placement)->device(0), 5);
  jobs.Release(second->job);
}

TEST(JobManagerTest, ACancelledDigestIsNotJoinedAgain) {
  JobManager jobs({.workers = 1});
  Gate gate;
  absl::StatusOr<Admission> first = AcquireRunning(jobs, gate, "a");
  ASSERT_TRUE(first.ok());
  jobs.Release(first->job);  // cancelled; its worker may still be finishing
  absl::StatusOr<Admission> again = jobs.Acquire(Spec("a", Immediate(2)));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->coalesced);
  EXPECT_NE(again->job, first->job);
  const JobResult& result = AwaitJobDone(again->job);
  ASSERT_TRUE(result.placement.ok());
  jobs.Release(again->job);
}

TEST(JobManagerTest, TenantsAreServedRoundRobin) {
  JobManager jobs({.workers = 1});
  Gate gate;
  absl::StatusOr<Admission> blocker = AcquireRunning(jobs, gate, "block");
  ASSERT_TRUE(blocker.ok());

  absl::Mutex mu;
  std::vector<std::string> order;
  auto record = [&](std::string label) -> JobWork {
    return [&mu, &order, label](const JobContext&) -> absl::StatusOr<PlacementPtr> {
      absl::MutexLock lock(&mu);
      order.push_back(label);
      return MakePlacement(0);
    };
  };
  std::vector<Admission> admitted;
  for (const auto& [digest, tenant] : std::vector<std::pair<std::string, std::string>>{
           {"a1", "a"}, {"a2", "a"}, {"a3", "a"}, {"b1", "b"}}) {
    absl::StatusOr<Admission> a = jobs.Acquire(Spec(digest, record(digest), tenant));
    ASSERT_TRUE(a.ok());
    admitted.push_back(*std::move(a));
  }
  gate.release.Notify();
  for (Admission& a : admitted) AwaitJobDone(a.job);
  EXPECT_EQ(order, (std::vector<std::string>{"a1", "b1", "a2", "a3"}));
  for (Admission& a : admitted) jobs.Release(a.job);
  jobs.Release(blocker->job);
}

TEST(JobManagerTest, TenantQueueLimitIsResourceExhaustedForThatTenantOnly) {
  RecordingObserver observer;
  JobManager jobs({.workers = 1, .retry_delay = absl::Seconds(3), .observer = &observer});
  Gate gate;
  absl::StatusOr<Admission> blocker = jobs.Acquire(Spec("block", gate.Work(), "other"));
  ASSERT_TRUE(blocker.ok());
  gate.started.WaitForNotification();

  const TenantJobLimits limits{.max_queued = 1};
  JobSpec first = Spec("a1", Immediate(1), "a");
  first.tenant_limits = limits;
  absl::StatusOr<Admission> queued = jobs.Acquire(std::move(first));
  ASSERT_TRUE(queued.ok());

  JobSpec second = Spec("a2", Immediate(1), "a");
  second.tenant_limits = limits;
  absl::StatusOr<Admission> rejected = jobs.Acquire(std::move(second));
  ASSERT_FALSE(rejected.ok());
  EXPECT_EQ(rejected.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(rejected.status().message()), HasSubstr("tenant \"a\""));
  EXPECT_EQ(status_payloads::RetryDelayOf(rejected.status()), absl::Seconds(3));
  EXPECT_EQ(observer.rejections(), std::vector<std::string>{"tenant_queued"});
  EXPECT_EQ(observer.tenant_rejections(), std::vector<std::string>{"a/queued"});

  // Joining tenant a's queued job adds no work: allowed, for a and for anyone else.
  JobSpec join = Spec("a1", Immediate(1), "b");
  join.tenant_limits = limits;
  absl::StatusOr<Admission> joined = jobs.Acquire(std::move(join));
  ASSERT_TRUE(joined.ok());
  EXPECT_TRUE(joined->coalesced);
  // Another tenant has its own allowance.
  JobSpec other = Spec("b1", Immediate(1), "b");
  other.tenant_limits = limits;
  absl::StatusOr<Admission> b = jobs.Acquire(std::move(other));
  ASSERT_TRUE(b.ok());

  gate.release.Notify();
  AwaitJobDone(queued->job);
  AwaitJobDone(b->job);
  for (const absl::StatusOr<Admission>* a : {&blocker, &queued, &joined, &b}) {
    jobs.Release((*a)->job);
  }
}

TEST(JobManagerTest, TenantAtItsRunningLimitWaitsWhileOthersUseTheFreeWorkers) {
  JobManager jobs({.workers = 2});
  const TenantJobLimits limits{.max_running = 1};
  Gate gate_a;
  JobSpec a1 = Spec("a1", gate_a.Work(), "a");
  a1.tenant_limits = limits;
  absl::StatusOr<Admission> first = jobs.Acquire(std::move(a1));
  ASSERT_TRUE(first.ok());
  gate_a.started.WaitForNotification();

  Gate gate_a2;
  JobSpec a2 = Spec("a2", gate_a2.Work(), "a");
  a2.tenant_limits = limits;
  absl::StatusOr<Admission> second = jobs.Acquire(std::move(a2));
  ASSERT_TRUE(second.ok());

  // A worker is free, but tenant a is at its limit: b's job takes the worker, a2 waits.
  Gate gate_b;
  JobSpec b1 = Spec("b1", gate_b.Work(), "b");
  b1.tenant_limits = limits;
  absl::StatusOr<Admission> b = jobs.Acquire(std::move(b1));
  ASSERT_TRUE(b.ok());
  // Bounded, so that a2 wrongly taking the worker fails the test instead of hanging it (the
  // manager's destructor then cancels the gated jobs).
  ASSERT_TRUE(gate_b.started.WaitForNotificationWithTimeout(absl::Seconds(30)))
      << "tenant b did not get the free worker";
  EXPECT_EQ(jobs.Stats().running, 2);
  EXPECT_EQ(jobs.Stats().queued, 1);
  EXPECT_EQ(second->job->state(), JobState::kQueued);
  EXPECT_EQ(gate_a2.runs.load(), 0);

  // When a1 ends, a2 may start.
  gate_a.release.Notify();
  AwaitJobDone(first->job);
  gate_a2.started.WaitForNotification();
  EXPECT_EQ(gate_a2.runs.load(), 1);

  gate_a2.release.Notify();
  gate_b.release.Notify();
  AwaitJobDone(second->job);
  AwaitJobDone(b->job);
  for (const absl::StatusOr<Admission>* a : {&first, &second, &b}) jobs.Release((*a)->job);
}

TEST(JobManagerTest, ProgressIsThrottledByTheInjectedClock) {
  FakeClock clock;
  JobManager jobs({.workers = 1, .progress_interval = absl::Milliseconds(100), .clock = &clock});
  absl::Notification go;
  absl::Notification reported;
  auto work = [&](const JobContext& context) -> absl::StatusOr<PlacementPtr> {
    go.WaitForNotification();
    context.ReportProgress("mapping", 0.1, 0);   // stage change: notified
    context.ReportProgress("mapping", 0.2, 0);   // same stage, no time passed: dropped
    context.ReportProgress("mapping", 0.3, 0);   // dropped
    clock.Advance(absl::Milliseconds(150));
    context.ReportProgress("mapping", 0.4, 42);  // interval passed: notified
    reported.Notify();
    return MakePlacement(0);
  };
  absl::StatusOr<Admission> admitted = jobs.Acquire(Spec("a", work));
  ASSERT_TRUE(admitted.ok());
  absl::Mutex mu;
  std::vector<std::string> seen;
  admitted->job->AddListener([&](const Job& job) {
    const JobProgress progress = job.progress();
    absl::MutexLock lock(&mu);
    seen.push_back(absl::StrCat(progress.stage, "@", progress.fraction));
  });
  go.Notify();
  AwaitJobDone(admitted->job);
  absl::MutexLock lock(&mu);
  // "running" may or may not be seen (the listener may be added after the worker started).
  std::vector<std::string> without_running;
  for (const std::string& s : seen) {
    if (s.rfind("running", 0) != 0) without_running.push_back(s);
  }
  EXPECT_EQ(without_running, (std::vector<std::string>{"mapping@0.1", "mapping@0.4", "done@1"}));
  EXPECT_EQ(admitted->job->progress().best_makespan_ns, 42);
  jobs.Release(admitted->job);
}

TEST(JobManagerTest, StopAdmittingAnswersUnavailable) {
  JobManager jobs({.workers = 1});
  jobs.StopAdmitting();
  absl::StatusOr<Admission> rejected = jobs.Acquire(Spec("a", Immediate(1)));
  ASSERT_FALSE(rejected.ok());
  EXPECT_EQ(rejected.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(status_payloads::RetryDelayOf(rejected.status()).has_value());
}

TEST(JobManagerTest, ShutdownEndsQueuedAndRunningJobs) {
  JobManager jobs({.workers = 1});
  Gate gate;
  absl::StatusOr<Admission> running = AcquireRunning(jobs, gate, "a");
  ASSERT_TRUE(running.ok());
  absl::StatusOr<Admission> queued = jobs.Acquire(Spec("b", Immediate(1)));
  ASSERT_TRUE(queued.ok());
  jobs.Shutdown();
  ASSERT_TRUE(running->job->done());
  ASSERT_TRUE(queued->job->done());
  EXPECT_EQ(running->job->result().placement.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(queued->job->result().placement.status().code(), absl::StatusCode::kUnavailable);
  jobs.Release(running->job);
  jobs.Release(queued->job);
  jobs.Shutdown();  // idempotent
}

TEST(JobManagerTest, AnExceptionInTheWorkFailsOnlyThatJobAsInternal) {
  JobManager jobs({.workers = 1});
  absl::StatusOr<Admission> throwing = jobs.Acquire(Spec(
      "throws", [](const JobContext&) -> absl::StatusOr<PlacementPtr> {
        throw std::runtime_error("boom in the partitioner");
      }));
  ASSERT_TRUE(throwing.ok());
  const JobResult& failed = AwaitJobDone(throwing->job);
  EXPECT_EQ(failed.placement.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(failed.placement.status().message()),
              HasSubstr("boom in the partitioner"));

  absl::StatusOr<Admission> odd = jobs.Acquire(
      Spec("throws an int", [](const JobContext&) -> absl::StatusOr<PlacementPtr> { throw 7; }));
  ASSERT_TRUE(odd.ok());
  EXPECT_EQ(AwaitJobDone(odd->job).placement.status().code(), absl::StatusCode::kInternal);

  // The only worker survived both and runs the next job.
  absl::StatusOr<Admission> next = jobs.Acquire(Spec("next", Immediate(3)));
  ASSERT_TRUE(next.ok());
  const JobResult& result = AwaitJobDone(next->job);
  ASSERT_TRUE(result.placement.ok()) << result.placement.status();
  EXPECT_EQ((*result.placement)->device(0), 3);
  jobs.Release(throwing->job);
  jobs.Release(odd->job);
  jobs.Release(next->job);
}

}  // namespace
}  // namespace placement::jobs
