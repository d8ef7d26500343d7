#include "service/shared_ops/operation_coordinator.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "service/cache/redis_result_cache.h"
#include "service/status_payloads/status_payloads.h"
#include "tests/testutil/redis_server.h"
#include "tests/testutil/start_redis_or_skip.h"

namespace placement::shared_ops {
namespace {

using testutil::RedisServer;

constexpr int kOps = 3;
constexpr int kDevices = 2;

// The work of every job here: runs until `release` (or a cancel), counts its runs, answers a placement
// of kOps ops for its digest.
struct Solver {
  absl::Notification release;
  std::atomic<int> runs{0};
  std::atomic<int> cancelled{0};
  absl::Notification started;
  absl::Notification stopped;  // a run ended by its cancellation flag

  jobs::JobSpec Spec(const std::string& digest) {
    jobs::JobSpec spec;
    spec.request_digest = JobKeyOf(digest);
    spec.tenant = "team-a";
    spec.time_limit = absl::Seconds(30);
    spec.work = [this, digest](const jobs::JobContext& context)
        -> absl::StatusOr<jobs::PlacementPtr> {
      ++runs;
      if (!started.HasBeenNotified()) started.Notify();
      context.ReportProgress("slicing", 0.5, 42);
      while (!release.WaitForNotificationWithTimeout(absl::Milliseconds(5))) {
        if (context.cancelled()) {
          if (cancelled.fetch_add(1) == 0) stopped.Notify();
          return absl::CancelledError("nobody waits");
        }
      }
      auto placement = std::make_shared<v1::Placement>();
      for (int i = 0; i < kOps; ++i) placement->add_device(i % kDevices);
      placement->mutable_provenance()->set_request_digest(digest);
      return jobs::PlacementPtr(std::move(placement));
    };
    return spec;
  }
  static std::string JobKeyOf(const std::string& digest) { return digest + "@30s"; }
};

// The log lines of a replica, for tests that check what it says.
struct LogLines {
  absl::Mutex mu;
  std::vector<std::string> lines ABSL_GUARDED_BY(mu);

  bool Contains(absl::string_view text) {
    absl::MutexLock lock(&mu);
    for (const std::string& line : lines) {
      if (absl::StrContains(line, text)) return true;
    }
    return false;
  }
};

// One replica in this process: its own jobs, registry, Redis connections and coordinator.
class Replica {
 public:
  // `publish_window`: zero here, so that an unknown name is NOT_FOUND although Redis is young.
  Replica(int port, std::string name, Solver* solver, const Clock* clock = nullptr,
          absl::Duration publish_window = absl::ZeroDuration())
      : solver_(solver),
        jobs_({.workers = 1}),
        registry_({.ttl_after_done = absl::Minutes(1)}, &jobs_),
        redis_({.host = "127.0.0.1", .port = port, .timeout = absl::Milliseconds(500),
                .initial_backoff = absl::Milliseconds(10), .max_backoff = absl::Milliseconds(50)}),
        store_(&redis_, {.key_prefix = "t:", .consumer = std::move(name)}) {
    coordinator_ = std::make_unique<OperationCoordinator>(
        CoordinatorOptions{.lease = absl::Seconds(1),
                           .poll_interval = absl::Milliseconds(20),
                           .cancel_poll_interval = absl::Milliseconds(50),
                           .takeover_interval = absl::Milliseconds(100),
                           .progress_interval = absl::Milliseconds(10),
                           .ttl_after_done = absl::Minutes(1),
                           .result_key_prefix = "t:",
                           .publish_window = publish_window,
                           .clock = clock,
                           .log =
                               [log = log_](absl::string_view line) {
                                 absl::MutexLock lock(&log->mu);
                                 log->lines.emplace_back(line);
                               }},
        &redis_, &store_, &jobs_, &registry_,
        [solver](const std::string& request, const std::string& tenant,
                 absl::Duration time_limit) -> absl::StatusOr<RebuiltJob> {
          if (tenant != "team-a") return absl::InvalidArgumentError("unexpected tenant");
          if (time_limit != absl::Seconds(30)) return absl::InvalidArgumentError("time limit");
          return RebuiltJob{solver->Spec(request), request};
        });
    coordinator_->Start();
  }
  ~Replica() {
    coordinator_.reset();
    jobs_.Shutdown();
  }

  absl::StatusOr<std::shared_ptr<jobs::Operation>> Submit(const std::string& digest,
                                                          v1::CacheResult* cache) {
    SharedSubmit submit;
    submit.operation.tenant = "team-a";
    submit.operation.request_digest = digest;
    submit.operation.request_index = std::make_shared<const std::vector<int32_t>>(
        std::vector<int32_t>{2, 0, 1});
    submit.operation.algorithm = "test";
    submit.job_key = Solver::JobKeyOf(digest);
    submit.num_devices = kDevices;
    submit.time_limit = absl::Seconds(30);
    submit.serialized_request = digest;
    submit.make_job = [solver = solver_, digest] { return solver->Spec(digest); };
    return coordinator_->Submit(std::move(submit), cache);
  }
  // A replica that dies: no hand-back, no completion, no renewal from now on.
  void Die() {
    coordinator_.reset();
    jobs_.Shutdown();
  }

  OperationCoordinator& coordinator() { return *coordinator_; }
  jobs::OperationRegistry& registry() { return registry_; }
  RedisClient& redis() { return redis_; }
  OperationStore& store() { return store_; }
  LogLines& log() { return *log_; }

 private:
  std::shared_ptr<LogLines> log_ = std::make_shared<LogLines>();
  Solver* solver_;
  jobs::JobManager jobs_;
  jobs::OperationRegistry registry_;
  RedisClient redis_;
  OperationStore store_;
  std::unique_ptr<OperationCoordinator> coordinator_;
};

// Blocks until the operation is done (a listener, no polling), at most `timeout`.
bool AwaitDone(const std::shared_ptr<jobs::Operation>& op, absl::Duration timeout) {
  auto done = std::make_shared<absl::Notification>();
  if (op->AddListener([done](const jobs::Operation& o) {
        if (o.done() && !done->HasBeenNotified()) done->Notify();
      }) == 0) {
    return true;
  }
  return done->WaitForNotificationWithTimeout(timeout);
}

TEST(OperationCoordinatorTest, AnotherReplicaFollowsTheOperationToItsResult) {
  START_REDIS_OR_SKIP(redis);
  Solver solver;
  Replica a(redis.port(), "a", &solver), b(redis.port(), "b", &solver);
  v1::CacheResult cache = v1::CACHE_RESULT_UNSPECIFIED;
  absl::StatusOr<std::shared_ptr<jobs::Operation>> op = a.Submit("d1", &cache);
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ(cache, v1::MISS);
  EXPECT_FALSE((*op)->mirror());
  solver.started.WaitForNotification();

  absl::StatusOr<std::shared_ptr<jobs::Operation>> remote =
      b.coordinator().Find((*op)->name(), "team-a");
  ASSERT_TRUE(remote.ok()) << remote.status();
  EXPECT_TRUE((*remote)->mirror());
  EXPECT_FALSE((*remote)->done());
  EXPECT_EQ((*remote)->request_digest(), "d1");
  // Another tenant and an unknown name: NOT_FOUND, as on the replica that has it.
  EXPECT_TRUE(absl::IsNotFound(b.coordinator().Find((*op)->name(), "team-b").status()));
  EXPECT_TRUE(absl::IsNotFound(
      b.coordinator().Find("operations/00000000000000000000000000000000", "team-a").status()));

  solver.release.Notify();
  ASSERT_TRUE(AwaitDone(*op, absl::Seconds(10)));
  ASSERT_TRUE(AwaitDone(*remote, absl::Seconds(10)));
  const jobs::Operation::Snapshot local = (*op)->snapshot();
  const jobs::Operation::Snapshot mirrored = (*remote)->snapshot();
  ASSERT_NE(local.placement, nullptr);
  ASSERT_NE(mirrored.placement, nullptr) << mirrored.error;
  EXPECT_EQ(mirrored.placement->SerializeAsString(), local.placement->SerializeAsString());
  EXPECT_EQ(*(*remote)->request_index(), (std::vector<int32_t>{2, 0, 1}));
  EXPECT_EQ(solver.runs.load(), 1);
}

TEST(OperationCoordinatorTest, IdenticalSubmitsOnTwoReplicasSolveOnce) {
  START_REDIS_OR_SKIP(redis);
  Solver solver;
  Replica a(redis.port(), "a", &solver), b(redis.port(), "b", &solver);
  v1::CacheResult cache_a, cache_b;
  absl::StatusOr<std::shared_ptr<jobs::Operation>> first = a.Submit("d2", &cache_a);
  absl::StatusOr<std::shared_ptr<jobs::Operation>> second = b.Submit("d2", &cache_b);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(cache_b, v1::COALESCED);
  EXPECT_TRUE((*second)->mirror());
  solver.release.Notify();
  ASSERT_TRUE(AwaitDone(*first, absl::Seconds(10)));
  ASSERT_TRUE(AwaitDone(*second, absl::Seconds(10)));
  ASSERT_NE((*second)->snapshot().placement, nullptr) << (*second)->snapshot().error;
  EXPECT_EQ(solver.runs.load(), 1);
}

TEST(OperationCoordinatorTest, CancelOnAnotherReplicaStopsTheJobWithinASecond) {
  START_REDIS_OR_SKIP(redis);
  Solver solver;  // never released: only a cancel ends the job
  Replica a(redis.port(), "a", &solver), b(redis.port(), "b", &solver);
  v1::CacheResult cache;
  absl::StatusOr<std::shared_ptr<jobs::Operation>> op = a.Submit("d3", &cache);
  ASSERT_TRUE(op.ok());
  solver.started.WaitForNotification();
  const absl::Time begin = absl::Now();
  absl::StatusOr<std::shared_ptr<jobs::Operation>> cancelled =
      b.coordinator().Cancel((*op)->name(), "team-a");
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ((*cancelled)->snapshot().error.code(), absl::StatusCode::kCancelled);
  // The operation on a ends CANCELLED and its job stops.
  ASSERT_TRUE(AwaitDone(*op, absl::Seconds(5)));
  EXPECT_EQ((*op)->snapshot().error.code(), absl::StatusCode::kCancelled);
  ASSERT_TRUE(solver.stopped.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_EQ(solver.cancelled.load(), 1);
  EXPECT_LT(absl::Now() - begin, absl::Seconds(1));
  EXPECT_GE(a.coordinator().Stats().remote_cancels, 1);
}

TEST(OperationCoordinatorTest, JobOfADeadReplicaIsTakenOverUnderTheSameName) {
  START_REDIS_OR_SKIP(redis);
  Solver solver_a;  // never released: a dies with it
  Solver solver_b;
  solver_b.release.Notify();
  auto a = std::make_unique<Replica>(redis.port(), "a", &solver_a);
  Replica b(redis.port(), "b", &solver_b);
  v1::CacheResult cache;
  absl::StatusOr<std::shared_ptr<jobs::Operation>> op = a->Submit("d4", &cache);
  ASSERT_TRUE(op.ok());
  const std::string name = (*op)->name();
  solver_a.started.WaitForNotification();
  absl::StatusOr<std::shared_ptr<jobs::Operation>> remote = b.coordinator().Find(name, "team-a");
  ASSERT_TRUE(remote.ok());
  const absl::Time died = absl::Now();
  a->Die();
  ASSERT_TRUE(AwaitDone(*remote, absl::Seconds(10)));
  const absl::Duration takeover = absl::Now() - died;
  ASSERT_NE((*remote)->snapshot().placement, nullptr) << (*remote)->snapshot().error;
  EXPECT_EQ((*remote)->name(), name);
  EXPECT_EQ(solver_b.runs.load(), 1);
  EXPECT_EQ(b.coordinator().Stats().taken_over, 1);
  EXPECT_LE(takeover, absl::Seconds(1) + absl::Seconds(1));  // lease + 1 s
}

TEST(OperationCoordinatorTest, RedisDownFallsBackLocallyAndLookupsAreRetryable) {
  START_REDIS_OR_SKIP(redis);
  Solver solver;
  solver.release.Notify();
  Replica a(redis.port(), "a", &solver);
  redis.Kill();
  v1::CacheResult cache;
  absl::StatusOr<std::shared_ptr<jobs::Operation>> op = a.Submit("d5", &cache);
  ASSERT_TRUE(op.ok()) << op.status();
  ASSERT_TRUE(AwaitDone(*op, absl::Seconds(10)));
  EXPECT_NE((*op)->snapshot().placement, nullptr);
  EXPECT_EQ(a.coordinator().Stats().fallbacks["submit"], 1);
  // Known here: found without Redis. Unknown here: UNAVAILABLE (not NOT_FOUND) while Redis is away.
  EXPECT_TRUE(a.coordinator().Find((*op)->name(), "team-a").ok());
  absl::Status unknown =
      a.coordinator().Find("operations/00000000000000000000000000000001", "team-a").status();
  EXPECT_TRUE(absl::IsUnavailable(unknown)) << unknown;
  // A name this service never makes is NOT_FOUND without asking Redis.
  EXPECT_TRUE(absl::IsNotFound(a.coordinator().Find("operations/x", "team-a").status()));
  EXPECT_TRUE(absl::IsNotFound(a.coordinator().Cancel(std::string(1 << 20, 'A'), "team-a").status()));
}

TEST(OperationCoordinatorTest, TamperedResultIsNeverAnAnswer) {
  START_REDIS_OR_SKIP(redis);
  Solver solver;
  Replica a(redis.port(), "a", &solver), b(redis.port(), "b", &solver);
  v1::CacheResult cache;
  absl::StatusOr<std::shared_ptr<jobs::Operation>> op = a.Submit("d6", &cache);
  ASSERT_TRUE(op.ok());
  absl::StatusOr<std::shared_ptr<jobs::Operation>> followed =
      b.coordinator().Find((*op)->name(), "team-a");
  ASSERT_TRUE(followed.ok());
  solver.release.Notify();
  // b's mirror ends once a's completion is in Redis.
  ASSERT_TRUE(AwaitDone(*followed, absl::Seconds(10)));
  ASSERT_NE((*followed)->snapshot().placement, nullptr);

  // Devices out of range in the stored value: a replica reading it now gets an error, not it.
  v1::Placement bad;
  for (int i = 0; i < kOps; ++i) bad.add_device(kDevices + 5);
  bad.mutable_provenance()->set_request_digest("d6");
  ASSERT_TRUE(
      b.redis().Command({"SET", "t:r1:d6", cache::RedisResultCache::EncodeValue(bad)}).ok());
  Replica c(redis.port(), "c", &solver);
  absl::StatusOr<std::shared_ptr<jobs::Operation>> remote =
      c.coordinator().Find((*op)->name(), "team-a");
  ASSERT_TRUE(remote.ok()) << remote.status();
  ASSERT_TRUE((*remote)->done());
  EXPECT_EQ((*remote)->snapshot().placement, nullptr);
  EXPECT_EQ((*remote)->snapshot().error.code(), absl::StatusCode::kDataLoss);
}

TEST(OperationCoordinatorTest, FastJobsAreSolvedOncePerSubmit) {
  START_REDIS_OR_SKIP(redis);
  Solver solver;
  solver.release.Notify();  // every job finishes at once
  Replica a(redis.port(), "a", &solver);
  std::vector<std::shared_ptr<jobs::Operation>> ops;
  for (int i = 0; i < 100; ++i) {
    // In rounds of 32, each awaited, so that a slow machine never fills the 64-job queue (a full
    // queue answers UNAVAILABLE, which is not what this test is about).
    if (i % 32 == 0) {
      for (const auto& op : ops) ASSERT_TRUE(AwaitDone(op, absl::Seconds(10)));
    }
    v1::CacheResult cache;
    absl::StatusOr<std::shared_ptr<jobs::Operation>> op = a.Submit(absl::StrCat("fast", i), &cache);
    ASSERT_TRUE(op.ok()) << op.status();
    ops.push_back(*op);
  }
  for (const auto& op : ops) ASSERT_TRUE(AwaitDone(op, absl::Seconds(10)));
  // The cluster's hold joins the job just admitted; it never admits a finished one again.
  EXPECT_EQ(solver.runs.load(), 100);
}

TEST(OperationCoordinatorTest, AnOperationMadeWhileRedisWasAwayIsPublishedOnceItIsBack) {
  START_REDIS_OR_SKIP(redis);
  Solver solver;
  Replica a(redis.port(), "a", &solver), b(redis.port(), "b", &solver);
  redis.Kill();
  v1::CacheResult cache;
  absl::StatusOr<std::shared_ptr<jobs::Operation>> op = a.Submit("d8", &cache);
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_TRUE(a.log().Contains("published to Redis once it answers"));
  EXPECT_EQ(a.coordinator().Stats().unpublished, 1);
  ASSERT_TRUE(redis.Restart().ok());
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (a.coordinator().Stats().published == 0 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(10));  // the background thread publishes on its own
  }
  EXPECT_EQ(a.coordinator().Stats().published, 1);
  // Another replica knows it now, and follows it to its end.
  absl::StatusOr<std::shared_ptr<jobs::Operation>> remote =
      b.coordinator().Find((*op)->name(), "team-a");
  ASSERT_TRUE(remote.ok()) << remote.status();
  solver.release.Notify();
  ASSERT_TRUE(AwaitDone(*remote, absl::Seconds(10)));
  ASSERT_NE((*remote)->snapshot().placement, nullptr) << (*remote)->snapshot().error;
  EXPECT_EQ(solver.runs.load(), 1);
}

TEST(OperationCoordinatorTest, ALocalOperationCancelledWhileRedisIsAwayStopsItsJob) {
  START_REDIS_OR_SKIP(redis);
  Solver solver;  // never released: only a cancel ends the job
  Replica a(redis.port(), "a", &solver);
  redis.Kill();
  v1::CacheResult cache;
  absl::StatusOr<std::shared_ptr<jobs::Operation>> op = a.Submit("d12", &cache);
  ASSERT_TRUE(op.ok()) << op.status();
  solver.started.WaitForNotification();
  ASSERT_TRUE(a.coordinator().Cancel((*op)->name(), "team-a").ok());
  // The hold kept for publishing does not keep the job running for nobody.
  EXPECT_TRUE(solver.stopped.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_EQ((*op)->snapshot().error.code(), absl::StatusCode::kCancelled);
}

TEST(OperationCoordinatorTest, ASubmitThatTimedOutInAStalledRedisIsAdoptedNotSolvedTwice) {
  START_REDIS_OR_SKIP(redis);
  Solver solver;
  Replica a(redis.port(), "a", &solver), b(redis.port(), "b", &solver);
  v1::CacheResult cache;
  ASSERT_TRUE(a.Submit("warm", &cache).ok());  // scripts loaded, stream made
  solver.release.Notify();
  redis.Pause();
  // The submit script reaches Redis, which runs it only when it resumes, after the caller gave up.
  absl::StatusOr<std::shared_ptr<jobs::Operation>> op = a.Submit("d9", &cache);
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ(a.coordinator().Stats().fallbacks["submit"], 1);
  redis.Resume();
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (a.coordinator().Stats().published == 0 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(a.coordinator().Stats().published, 1);
  absl::StatusOr<std::shared_ptr<jobs::Operation>> remote =
      b.coordinator().Find((*op)->name(), "team-a");
  ASSERT_TRUE(remote.ok()) << remote.status();
  ASSERT_TRUE(AwaitDone(*remote, absl::Seconds(10)));
  ASSERT_NE((*remote)->snapshot().placement, nullptr) << (*remote)->snapshot().error;
  // Three leases later nobody took an orphan over: one run for "warm", one for "d9".
  absl::SleepFor(absl::Seconds(3));
  EXPECT_EQ(b.coordinator().Stats().taken_over, 0);
  EXPECT_EQ(solver.runs.load(), 2);
}

TEST(OperationCoordinatorTest, TimeComesFromTheInjectedClock) {
  START_REDIS_OR_SKIP(redis);
  FakeClock clock(absl::FromUnixSeconds(1'234'567));
  Solver solver;
  solver.release.Notify();
  Replica a(redis.port(), "a", &solver, &clock);
  v1::CacheResult cache;
  absl::StatusOr<std::shared_ptr<jobs::Operation>> op = a.Submit("d10", &cache);
  ASSERT_TRUE(op.ok()) << op.status();
  ViewOrGone view = a.store().Lookup((*op)->name());
  ASSERT_TRUE(view.ok() && view->has_value()) << view.status();
  EXPECT_EQ((*view)->operation.created_at_ns, absl::ToUnixNanos(absl::FromUnixSeconds(1'234'567)));
}

TEST(OperationCoordinatorTest, AnEvictedResultIsAbortedAndAWrongTypeIsInternal) {
  START_REDIS_OR_SKIP(redis);
  Solver solver;
  solver.release.Notify();
  Replica a(redis.port(), "a", &solver), b(redis.port(), "b", &solver);
  v1::CacheResult cache;
  absl::StatusOr<std::shared_ptr<jobs::Operation>> op = a.Submit("d11", &cache);
  ASSERT_TRUE(op.ok());
  ASSERT_TRUE(AwaitDone(*op, absl::Seconds(10)));
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (a.coordinator().Stats().owned_jobs > 0 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(10));  // the completion is written by the background thread
  }
  ASSERT_TRUE(redis.Command({"DEL", "t:r1:d11"}).ok());
  absl::StatusOr<std::shared_ptr<jobs::Operation>> remote =
      b.coordinator().Find((*op)->name(), "team-a");
  ASSERT_TRUE(remote.ok()) << remote.status();
  ASSERT_TRUE((*remote)->done());
  EXPECT_EQ((*remote)->snapshot().error.code(), absl::StatusCode::kAborted);
  // A record of the wrong type: INTERNAL naming the reply, no retry hint.
  const std::string name = "operations/0123456789abcdef0123456789abcdef";
  ASSERT_TRUE(redis.Command({"SET", a.store().OperationKey(name), "not a hash"}).ok());
  absl::Status wrong = b.coordinator().Find(name, "team-a").status();
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInternal) << wrong;
  EXPECT_TRUE(absl::StrContains(wrong.message(), "WRONGTYPE")) << wrong;
  EXPECT_FALSE(status_payloads::RetryDelayOf(wrong).has_value());
  // Unknown while Redis is young (it just started): retry, not NOT_FOUND, until the replicas have had
  // time to publish what they made while it was away.
  Replica c(redis.port(), "c", &solver, nullptr, absl::Seconds(30));
  absl::Status young =
      c.coordinator().Find("operations/fedcba9876543210fedcba9876543210", "team-a").status();
  EXPECT_EQ(young.code(), absl::StatusCode::kUnavailable) << young;
  EXPECT_TRUE(status_payloads::RetryDelayOf(young).has_value());
  EXPECT_TRUE(absl::IsNotFound(
      b.coordinator().Find("operations/fedcba9876543210fedcba9876543210", "team-a").status()));
}

}  // namespace
}  // namespace placement::shared_ops
