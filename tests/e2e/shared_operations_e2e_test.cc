// End-to-end tests of shared long-running operations (issue 15): two or three real placement_server
// replicas sharing a real redis-server on 127.0.0.1 (ports picked at run time); each test skips without
// redis-server. They check what a caller sees:
//   - an operation submitted to A is the same operation on B: Get, Wait, Watch and Cancel through B
//     answer what A would; another tenant's name is NOT_FOUND there too;
//   - SIGKILL of the replica running a job: another replica takes it over after the lease and the
//     operation completes there under the same name, solved once after A is gone;
//   - the same request submitted to two replicas at once costs one solve;
//   - a rolling restart of three replicas under a bounded load loses no operation and answers none
//     wrongly;
//   - Redis killed: no crash, submits stay local and complete, a name only Redis knows is a fast
//     UNAVAILABLE (retryable), never NOT_FOUND and never a wrong answer.
#include <signal.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "client/placement_client.h"
#include "gtest/gtest.h"
#include "tests/e2e/redis_replicas.h"
#include "tests/e2e/server_process.h"
#include "tests/e2e/test_requests.h"

namespace placement::e2e {
namespace {

using client::PlacementClient;

constexpr char kSlowSolves[] = "placement_solves_total{algorithm=\"testing_wait\"}";
constexpr char kTakenOver[] = "placement_operations_taken_over_total";

class SharedOperationsTest : public RedisReplicasTest {};

TEST_F(SharedOperationsTest, GetWaitWatchAndCancelOnAnotherReplicaAnswerAsTheFirst) {
  std::unique_ptr<ServerProcess> a = StartReplica();
  std::unique_ptr<ServerProcess> b = StartReplica();
  ASSERT_TRUE(a && b);
  auto on_a = Client(*a);
  auto on_b = Client(*b);

  // A quick job: Wait through B returns A's answer, in the caller's op order.
  absl::StatusOr<v1::Operation> submitted = on_a->Submit(RandomRequest(60, FreshSeed(), "m_topo"));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  absl::StatusOr<v1::Operation> waited = on_b->WaitOperation(submitted->name(), absl::Seconds(20));
  ASSERT_TRUE(waited.ok()) << waited.status();
  ASSERT_TRUE(waited->done());
  ASSERT_TRUE(waited->has_response()) << waited->error().message();
  absl::StatusOr<v1::Operation> on_a_done = on_a->GetOperation(submitted->name());
  ASSERT_TRUE(on_a_done.ok() && on_a_done->done());
  EXPECT_EQ(waited->name(), submitted->name());
  EXPECT_EQ(waited->response().placement().device_size(), 60);
  for (int i = 0; i < 60; ++i) {
    ASSERT_EQ(waited->response().placement().device(i),
              on_a_done->response().placement().device(i));
  }
  EXPECT_EQ(waited->metadata().request_digest(), on_a_done->metadata().request_digest());
  // Another tenant: NOT_FOUND on B as on A.
  auto team_b_on_b = Client(*b, kTeamB);
  EXPECT_EQ(team_b_on_b->GetOperation(submitted->name()).status().code(),
            absl::StatusCode::kNotFound);
  auto team_b_on_a = Client(*a, kTeamB);
  EXPECT_EQ(team_b_on_a->GetOperation(submitted->name()).status().code(),
            absl::StatusCode::kNotFound);

  // A job that runs until cancelled: Watch through B sees it run, Cancel through B ends it on A.
  absl::StatusOr<v1::Operation> slow = on_a->Submit(SlowRequest(FreshSeed(), absl::Minutes(5)));
  ASSERT_TRUE(slow.ok()) << slow.status();
  ASSERT_TRUE(AwaitRunning(*on_b, slow->name()));
  std::atomic<int> updates{0};
  absl::Notification watching_started;
  absl::StatusOr<v1::Operation> watched = absl::UnknownError("not watched");
  std::thread watcher([&] {
    auto watching = Client(*b);
    watched = watching->WatchOperation(
        slow->name(),
        [&](const v1::Operation&) {
          if (updates.fetch_add(1) == 0) watching_started.Notify();
        },
        absl::Now() + absl::Seconds(20));
    if (!watching_started.HasBeenNotified()) watching_started.Notify();
  });
  watching_started.WaitForNotification();
  const absl::Time cancelled_at = absl::Now();
  absl::StatusOr<v1::Operation> cancelled = on_b->CancelOperation(slow->name());
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_TRUE(cancelled->done());
  EXPECT_EQ(cancelled->error().code(), static_cast<int>(absl::StatusCode::kCancelled));
  // A sees the cancel, and its worker is free again, within a second.
  absl::StatusOr<v1::Operation> on_a_cancelled =
      on_a->WaitOperation(slow->name(), absl::Seconds(5));
  ASSERT_TRUE(on_a_cancelled.ok()) << on_a_cancelled.status();
  EXPECT_TRUE(on_a_cancelled->done());
  EXPECT_EQ(on_a_cancelled->error().code(), static_cast<int>(absl::StatusCode::kCancelled));
  const absl::Time give_up = cancelled_at + absl::Seconds(5);
  while (Metric(*a, "placement_jobs_running") > 0 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(Metric(*a, "placement_jobs_running"), 0);
  EXPECT_LT(absl::Now() - cancelled_at, absl::Seconds(1) + absl::Milliseconds(500));
  watcher.join();
  ASSERT_TRUE(watched.ok()) << watched.status();
  EXPECT_TRUE(watched->done());
  EXPECT_EQ(watched->error().code(), static_cast<int>(absl::StatusCode::kCancelled));
  EXPECT_GE(updates.load(), 1);
  EXPECT_EQ(Metric(*a, "placement_operation_remote_cancels_total"), 1);

  on_a.reset();
  on_b.reset();
  team_b_on_a.reset();
  team_b_on_b.reset();
  StopServer(*a);
  StopServer(*b);
}

TEST_F(SharedOperationsTest, JobOfAKilledReplicaCompletesOnAnotherUnderTheSameName) {
  std::unique_ptr<ServerProcess> a = StartReplica();
  std::unique_ptr<ServerProcess> b = StartReplica();
  ASSERT_TRUE(a && b);
  auto on_a = Client(*a);
  auto on_b = Client(*b);
  // testing_wait holds its worker for its time limit, then answers (time-limited).
  absl::StatusOr<v1::Operation> submitted = on_a->Submit(SlowRequest(FreshSeed(), absl::Seconds(3)));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  ASSERT_TRUE(AwaitRunning(*on_b, submitted->name()));
  EXPECT_EQ(Metric(*b, kSlowSolves), 0);

  const absl::Time killed = absl::Now();
  a->Signal(SIGKILL);
  ASSERT_TRUE(a->WaitForExit(absl::Seconds(10)).ok());
  on_a.reset();
  // The caller waits through B: the lease (1 s) runs out, B takes the job over and solves it.
  absl::StatusOr<v1::Operation> done =
      on_b->WaitUntilDone(submitted->name(), absl::Now() + absl::Seconds(25));
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_TRUE(done->done());
  ASSERT_TRUE(done->has_response()) << done->error().message();
  EXPECT_EQ(done->name(), submitted->name());
  EXPECT_EQ(done->response().placement().device_size(),
            SlowRequest(1, absl::Seconds(3)).graph().ops_size());
  // Lease (1 s) + takeover interval (~1 s) + the 3 s solve, with room for a loaded machine.
  EXPECT_LT(absl::Now() - killed, absl::Seconds(3) + absl::Seconds(5));
  EXPECT_EQ(Metric(*b, kTakenOver), 1);
  EXPECT_EQ(Metric(*b, kSlowSolves), 1);  // solved once after A went away

  on_b.reset();
  StopServer(*b);
}

TEST_F(SharedOperationsTest, TheSameRequestSubmittedToTwoReplicasAtOnceIsSolvedOnce) {
  std::unique_ptr<ServerProcess> a = StartReplica();
  std::unique_ptr<ServerProcess> b = StartReplica();
  ASSERT_TRUE(a && b);
  const v1::PlaceRequest request = SlowRequest(FreshSeed(), absl::Seconds(1));
  absl::StatusOr<v1::Operation> on_a_op = absl::UnknownError("");
  absl::StatusOr<v1::Operation> on_b_op = absl::UnknownError("");
  {
    absl::Notification go;
    std::thread first([&] {
      auto client = Client(*a);
      go.WaitForNotification();
      on_a_op = client->Submit(request);
    });
    std::thread second([&] {
      auto client = Client(*b);
      go.WaitForNotification();
      on_b_op = client->Submit(request);
    });
    go.Notify();
    first.join();
    second.join();
  }
  ASSERT_TRUE(on_a_op.ok()) << on_a_op.status();
  ASSERT_TRUE(on_b_op.ok()) << on_b_op.status();
  EXPECT_NE(on_a_op->name(), on_b_op->name());
  auto on_a = Client(*a);
  auto on_b = Client(*b);
  absl::StatusOr<v1::Operation> done_a =
      on_a->WaitUntilDone(on_a_op->name(), absl::Now() + absl::Seconds(20));
  absl::StatusOr<v1::Operation> done_b =
      on_b->WaitUntilDone(on_b_op->name(), absl::Now() + absl::Seconds(20));
  ASSERT_TRUE(done_a.ok() && done_b.ok());
  ASSERT_TRUE(done_a->has_response() && done_b->has_response());
  EXPECT_EQ(done_a->response().placement().device_size(),
            done_b->response().placement().device_size());
  EXPECT_EQ(Metric(*a, kSlowSolves) + Metric(*b, kSlowSolves), 1);
  // Each replica answers for the other's operation too.
  EXPECT_TRUE(on_a->GetOperation(on_b_op->name()).ok());
  EXPECT_TRUE(on_b->GetOperation(on_a_op->name()).ok());
  on_a.reset();
  on_b.reset();
  StopServer(*a);
  StopServer(*b);
}

TEST_F(SharedOperationsTest, RedisKilledMeansLocalWorkAndFastRetryableErrorsNeverWrongOnes) {
  std::unique_ptr<ServerProcess> a = StartReplica();
  std::unique_ptr<ServerProcess> b = StartReplica();
  ASSERT_TRUE(a && b);
  auto on_a = Client(*a);
  auto on_b = Client(*b);
  absl::StatusOr<v1::Operation> before = on_a->Submit(RandomRequest(40, FreshSeed(), "m_topo"));
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_TRUE(on_a->WaitUntilDone(before->name(), absl::Now() + absl::Seconds(20)).ok());

  redis_->Kill();
  // New work stays on the replica that got it, and completes there.
  absl::StatusOr<v1::Operation> during = on_a->Submit(RandomRequest(40, FreshSeed(), "m_topo"));
  ASSERT_TRUE(during.ok()) << during.status();
  absl::StatusOr<v1::Operation> during_done =
      on_a->WaitUntilDone(during->name(), absl::Now() + absl::Seconds(20));
  ASSERT_TRUE(during_done.ok()) << during_done.status();
  EXPECT_TRUE(during_done->has_response());
  EXPECT_GE(Metric(*a, "placement_shared_operations_fallback_total{reason=\"submit\"}"), 1);
  // B cannot know A's operations without Redis: a fast UNAVAILABLE (retry), not NOT_FOUND.
  const absl::Time asked = absl::Now();
  absl::StatusOr<v1::Operation> unknown_here = on_b->GetOperation(during->name());
  EXPECT_EQ(unknown_here.status().code(), absl::StatusCode::kUnavailable) << unknown_here.status();
  EXPECT_LT(absl::Now() - asked, absl::Seconds(1));
  EXPECT_TRUE(on_a->GetOperation(before->name()).ok());  // what a replica knows itself stays known

  ASSERT_TRUE(redis_->Restart().ok());
  // Shared again once Redis is back (the client pool's backoff is at most a couple of seconds).
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  absl::StatusOr<v1::Operation> after = absl::UnknownError("not tried");
  absl::StatusOr<v1::Operation> seen_on_b = absl::UnknownError("not tried");
  while (absl::Now() < give_up) {
    after = on_a->Submit(RandomRequest(40, FreshSeed(), "m_topo"));
    ASSERT_TRUE(after.ok()) << after.status();
    seen_on_b = on_b->WaitOperation(after->name(), absl::Seconds(10));
    if (seen_on_b.ok()) break;
    absl::SleepFor(absl::Milliseconds(200));
  }
  ASSERT_TRUE(seen_on_b.ok()) << seen_on_b.status();
  EXPECT_TRUE(seen_on_b->done());
  EXPECT_TRUE(seen_on_b->has_response());
  on_a.reset();
  on_b.reset();
  StopServer(*a);
  StopServer(*b);
}

// One submitted operation and what its answer must look like.
struct Submitted {
  std::string name;
  std::string request_digest;
  int ops = 0;
  int devices = 0;
};

TEST_F(SharedOperationsTest, RollingRestartOfThreeReplicasLosesNothing) {
  std::vector<std::unique_ptr<ServerProcess>> replicas;
  for (int i = 0; i < 3; ++i) {
    replicas.push_back(StartReplica({"--shutdown_grace=500ms"}));
    ASSERT_TRUE(replicas.back());
  }
  std::vector<Submitted> submitted;
  // A bounded load: a few quick jobs and a few that hold a worker across the restart, on every replica.
  auto submit_batch = [&](int batch) {
    for (int i = 0; i < 6; ++i) {
      ServerProcess& target = *replicas[(batch + i) % replicas.size()];
      const v1::PlaceRequest request = i % 2 == 0
                                           ? SlowRequest(FreshSeed(), absl::Milliseconds(800))
                                           : RandomRequest(40, FreshSeed(), "m_topo");
      auto client = Client(target);
      absl::StatusOr<v1::Operation> op = client->Submit(request);
      ASSERT_TRUE(op.ok()) << op.status();
      submitted.push_back({op->name(), op->metadata().request_digest(), request.graph().ops_size(),
                           request.cluster().devices_size()});
    }
  };
  for (int round = 0; round < 3; ++round) {
    submit_batch(round);
    // Graceful restart of one replica: it hands its unfinished jobs back, a new one takes its place.
    StopServer(*replicas[round]);
    replicas[round] = StartReplica({"--shutdown_grace=500ms"});
    ASSERT_TRUE(replicas[round]);
  }
  submit_batch(3);

  int lost = 0;
  int wrong = 0;
  for (size_t i = 0; i < submitted.size(); ++i) {
    const Submitted& expected = submitted[i];
    absl::StatusOr<v1::Operation> done = absl::UnknownError("not asked");
    // Any replica answers for any operation; try another if one is busy restarting.
    for (size_t attempt = 0; attempt < replicas.size(); ++attempt) {
      auto client = Client(*replicas[(i + attempt) % replicas.size()]);
      done = client->WaitUntilDone(expected.name, absl::Now() + absl::Seconds(20));
      if (done.ok()) break;
    }
    if (!done.ok() || !done->done() || !done->has_response()) {
      ++lost;
      ADD_FAILURE() << expected.name << ": "
                    << (done.ok() ? done->error().message() : done.status().ToString());
      continue;
    }
    const v1::Placement& placement = done->response().placement();
    bool ok = placement.device_size() == expected.ops &&
              done->metadata().request_digest() == expected.request_digest;
    for (int32_t device : placement.device()) ok = ok && device >= 0 && device < expected.devices;
    if (!ok) ++wrong;
  }
  EXPECT_EQ(lost, 0);
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(submitted.size(), 24u);
  // The job running on the last replica restarted was handed back and finished by one of the others.
  EXPECT_GE(Metric(*replicas[0], kTakenOver) + Metric(*replicas[1], kTakenOver), 1);
  for (std::unique_ptr<ServerProcess>& replica : replicas) StopServer(*replica);
}

TEST_F(SharedOperationsTest, LeaseAndPollIntervalOutsideTheirRangesAreRefused) {
  for (const char* flag : {"--operation_lease=500ms", "--operation_lease=11s",
                           "--operation_poll_interval=1ms", "--operation_poll_interval=1m"}) {
    absl::StatusOr<std::unique_ptr<ServerProcess>> server =
        ServerProcess::Start({absl::StrCat("--redis=", redis_->address()), flag});
    ASSERT_FALSE(server.ok()) << flag;
    EXPECT_NE(std::string(server.status().message()).find("must be in ["), std::string::npos)
        << server.status();
  }
}

TEST_F(SharedOperationsTest, ALargeRequestIsSharedToo) {
  std::unique_ptr<ServerProcess> a = StartReplica();
  std::unique_ptr<ServerProcess> b = StartReplica();
  ASSERT_TRUE(a && b);
  auto on_a = Client(*a);
  auto on_b = Client(*b);
  // Megabytes in Redis (the request for a takeover, then the result): still one round trip each.
  const v1::PlaceRequest request = RandomRequest(100'000, FreshSeed(), "m_topo");
  absl::StatusOr<v1::Operation> submitted = on_a->Submit(request);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  absl::StatusOr<v1::Operation> done =
      on_b->WaitUntilDone(submitted->name(), absl::Now() + absl::Seconds(60));
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_TRUE(done->has_response()) << done->error().message();
  EXPECT_EQ(done->response().placement().device_size(), 100'000);
  EXPECT_EQ(Metric(*a, "placement_shared_operations_fallback_total{reason=\"submit\"}"), 0);
  on_a.reset();
  on_b.reset();
  StopServer(*a);
  StopServer(*b);
}

TEST_F(SharedOperationsTest, TamperedRecordsInRedisAreNeverAnswersAndNeverCrashAReplica) {
  std::unique_ptr<ServerProcess> a = StartReplica();
  std::unique_ptr<ServerProcess> b = StartReplica();
  ASSERT_TRUE(a && b);
  auto on_a = Client(*a);
  auto on_b = Client(*b);
  absl::StatusOr<v1::Operation> submitted = on_a->Submit(RandomRequest(40, FreshSeed(), "m_topo"));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  absl::StatusOr<v1::Operation> done =
      on_a->WaitUntilDone(submitted->name(), absl::Now() + absl::Seconds(20));
  ASSERT_TRUE(done.ok() && done->has_response()) << done.status();
  const std::string key_prefix = Key("");
  const std::string op_key = Key("op:" + submitted->name());

  // The caller's op order rewritten so that mapping the result back would write far out of bounds
  // (40 entries of 0x7fffffff): B, which knows the operation only from Redis, must refuse it.
  ASSERT_TRUE(redis_->Command({"HSET", op_key, "request_index", std::string(160, '\x7f')}).ok());
  absl::StatusOr<v1::Operation> got = on_b->GetOperation(submitted->name());
  EXPECT_TRUE(!got.ok() || (got->done() && !got->has_response()))
      << "a tampered record became an answer";

  // An invented record whose result is garbage, and one whose fields are all nonsense.
  const std::string invented = "operations/0123456789abcdef0123456789abcdef";
  ASSERT_TRUE(redis_->Command({"HSET", key_prefix + "op:" + invented, "tenant", "team-a", "state",
                               "done", "result", key_prefix + "junk", "num_devices", "-5",
                               "request_index", "", "job", ""})
                  .ok());
  ASSERT_TRUE(redis_->Command({"SET", key_prefix + "junk", "\x01garbage"}).ok());
  absl::StatusOr<v1::Operation> invented_got = on_b->GetOperation(invented);
  EXPECT_TRUE(!invented_got.ok() || !invented_got->has_response());
  const std::string nonsense = "operations/fedcba9876543210fedcba9876543210";
  ASSERT_TRUE(redis_->Command({"HSET", key_prefix + "op:" + nonsense, "tenant", "team-a", "state",
                               "pending", "job", "nojob", "request_index", "abc"})
                  .ok());
  ASSERT_TRUE(redis_->Command({"HSET", key_prefix + "job:nojob", "state", "failed", "error_code",
                               "0", "fraction", "nan", "waiters", "x"})
                  .ok());
  absl::StatusOr<v1::Operation> nonsense_got = on_b->GetOperation(nonsense);
  EXPECT_TRUE(!nonsense_got.ok() || !nonsense_got->has_response());

  // B is alive and still answers correctly from the shared store.
  absl::StatusOr<v1::Operation> fresh = on_a->Submit(RandomRequest(30, FreshSeed(), "m_topo"));
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  absl::StatusOr<v1::Operation> fresh_on_b =
      on_b->WaitUntilDone(fresh->name(), absl::Now() + absl::Seconds(20));
  ASSERT_TRUE(fresh_on_b.ok()) << fresh_on_b.status();
  EXPECT_TRUE(fresh_on_b->has_response()) << fresh_on_b->error().message();
  EXPECT_EQ(fresh_on_b->response().placement().device_size(), 30);
  on_a.reset();
  on_b.reset();
  StopServer(*a);
  StopServer(*b);
}

}  // namespace
}  // namespace placement::e2e
