// End-to-end tests of what an adversarial run found in shared operations (issue 21, "Trust"): real
// placement_server replicas sharing a real redis-server on 127.0.0.1, which the tests kill, stall
// (SIGSTOP), fill, restart, protect with a password or write forged records into. Each test skips
// without redis-server. What they check, from a caller's side:
//   - a dead replica's live job is taken over within lease + ~1 s, however many cancelled jobs and
//     garbage stream entries lie before it;
//   - a tenant's huge pending requests do not evict another tenant's operation records;
//   - a full Redis (noeviction) ends the operations other replicas follow instead of leaving them
//     pending; the error is logged and counted;
//   - the first submit after a Redis restart is shared, and an operation created while Redis was
//     away becomes visible to the other replicas (never NOT_FOUND through another replica);
//   - submits timing out during a Redis stall are solved once each, under the names returned;
//   - a takeover keeps the time limit (and lease) the job was submitted with;
//   - distinct submits are solved once each; error replies and forged fields are reported as what
//     they are; start-up refuses a non-Redis address or a Redis that wants a password; shutdown
//     with Redis down ends within the grace.
#include <signal.h>

#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/placement_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/redis_replicas.h"
#include "tests/e2e/server_process.h"
#include "tests/e2e/test_requests.h"

namespace placement::e2e {
namespace {

using client::PlacementClient;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kTakenOver[] = "placement_operations_taken_over_total";

class SharedOperationsTrustTest : public RedisReplicasTest {};

// Solves of every algorithm these tests use on `server` (the sum of placement_solves_total).
double Solves(const ServerProcess& server) {
  absl::StatusOr<std::string> scrape = ScrapeMetrics(server.metrics_port());
  if (!scrape.ok()) return -1;
  double total = 0;
  for (const char* algorithm : {"m_topo", "testing_wait", "round_robin"}) {
    total += MetricValue(*scrape,
                         absl::StrCat("placement_solves_total{algorithm=\"", algorithm, "\"}"));
  }
  return total;
}

// A request of about `bytes` serialized bytes, held on a worker for `limit` (testing_wait).
v1::PlaceRequest SlowRequestOfSize(int64_t bytes, absl::Duration limit) {
  const int64_t sample = RandomRequest(10'000, 1, "testing_wait").ByteSizeLong();
  v1::PlaceRequest request = RandomRequest(
      static_cast<int32_t>(10'000 * bytes / sample), FreshSeed(), "testing_wait");
  SetTimeLimit(limit, &request);
  return request;
}

// ---- Finding 1: a dead replica's live job waits behind its cancelled ones ----

// Kills `a` and measures how long until `b` has taken a job over.
absl::Duration KillAndTimeTakeover(ServerProcess& a, ServerProcess& b) {
  const absl::Time killed = absl::Now();
  a.Signal(SIGKILL);
  EXPECT_TRUE(a.WaitForExit(absl::Seconds(10)).ok());
  const absl::Time give_up = killed + absl::Seconds(60);
  while (absl::Now() < give_up) {
    absl::StatusOr<std::string> scrape = ScrapeMetrics(b.metrics_port());
    if (scrape.ok() && MetricValue(*scrape, kTakenOver) >= 1) return absl::Now() - killed;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::InfiniteDuration();
}

// Submits a live 2 s job on `a`, kills `a` once the job runs, and expects `b` to take it over within the
// lease (2 s) plus 1.2 s and to finish it; `ahead` says what stood before the live job (printed).
void ExpectLiveJobTakenOverWithinTheLease(ServerProcess& a, ServerProcess& b, PlacementClient& on_a,
                                          PlacementClient& on_b, std::string_view ahead) {
  absl::StatusOr<v1::Operation> live = on_a.Submit(SlowRequest(FreshSeed(), absl::Seconds(2)));
  ASSERT_TRUE(live.ok()) << live.status();
  ASSERT_TRUE(AwaitRunning(on_b, live->name()));
  const absl::Duration takeover = KillAndTimeTakeover(a, b);
  std::cout << "takeover after SIGKILL with " << ahead << " before the live one: "
            << absl::FormatDuration(takeover) << " (lease 2s)\n";
  EXPECT_LT(takeover, absl::Seconds(2) + absl::Milliseconds(1200));
  absl::StatusOr<v1::Operation> done =
      on_b.WaitUntilDone(live->name(), absl::Now() + absl::Seconds(20));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_TRUE(done->has_response()) << done->error().message();
}

TEST_F(SharedOperationsTrustTest, ALiveJobIsTakenOverWithoutWaitingBehindCancelledOnes) {
  ServerProcess* a = Replica({"--operation_lease=2s"});
  ServerProcess* b = Replica({"--operation_lease=2s"});
  ASSERT_TRUE(a && b);
  PlacementClient& on_a = ClientOf(*a);
  PlacementClient& on_b = ClientOf(*b);
  // 40 jobs submitted and cancelled on A (one worker: one runs, the rest queue), then a live job.
  for (int i = 0; i < 40; ++i) {
    absl::StatusOr<v1::Operation> op = on_a.Submit(SlowRequest(FreshSeed(), absl::Minutes(5)));
    ASSERT_TRUE(op.ok()) << op.status();
    ASSERT_TRUE(on_a.CancelOperation(op->name()).ok());
  }
  ASSERT_NO_FATAL_FAILURE(ExpectLiveJobTakenOverWithinTheLease(*a, *b, on_a, on_b, "40 cancelled jobs"));
  EXPECT_THAT(b->Log(), HasSubstr("took over"));
}

TEST_F(SharedOperationsTrustTest, GarbageAndDeadStreamEntriesDrainAtOnceAtTakeover) {
  ServerProcess* a = Replica({"--operation_lease=2s"});
  ServerProcess* b = Replica({"--operation_lease=2s"});
  ASSERT_TRUE(a && b);
  PlacementClient& on_a = ClientOf(*a);
  PlacementClient& on_b = ClientOf(*b);
  // One job creates the stream and its group; it finishes at once.
  absl::StatusOr<v1::Operation> first = on_a.Submit(RandomRequest(20, FreshSeed(), "m_topo"));
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(on_a.WaitUntilDone(first->name(), absl::Now() + absl::Seconds(20)).ok());
  // 40 entries no job owns, delivered to a consumer that never acknowledges them: forged ones, and
  // ones naming jobs that do not exist or ended.
  const std::string stream = Key("jobs");
  for (int i = 0; i < 40; ++i) {
    std::vector<std::string> fields = i % 3 == 0   ? std::vector<std::string>{"junk", "x"}
                                      : i % 3 == 1 ? std::vector<std::string>{"job", "nosuchjob"}
                                                   : std::vector<std::string>{"job", ""};
    std::vector<std::string> xadd = {"XADD", stream, "*"};
    xadd.insert(xadd.end(), fields.begin(), fields.end());
    ASSERT_TRUE(redis_->Command(xadd).ok());
  }
  ASSERT_TRUE(redis_->Command({"XREADGROUP", "GROUP", "replicas", "ghost", "COUNT", "100",
                               "STREAMS", stream, ">"})
                  .ok());
  ASSERT_NO_FATAL_FAILURE(ExpectLiveJobTakenOverWithinTheLease(*a, *b, on_a, on_b, "40 garbage entries"));
  // Nothing is left pending in the group: the garbage went at once.
  absl::StatusOr<std::string> pending = redis_->Command({"XLEN", stream});
  ASSERT_TRUE(pending.ok());
  EXPECT_EQ(*pending, "0");
}

// ---- Finding 2: one tenant evicts every other tenant's records ----

TEST_F(SharedOperationsTrustTest, HugePendingRequestsOfOneTenantDoNotEvictAnotherTenantsRecords) {
  StartRedis({.args = {"--maxmemory", "32mb", "--maxmemory-policy", "volatile-lru"}});
  ServerProcess* a = Replica();
  ServerProcess* b = Replica();
  ASSERT_TRUE(a && b);
  // Tenant B's 20 finished operations.
  PlacementClient& team_b_on_a = ClientOf(*a, kTeamB);
  std::vector<std::string> names;
  for (int i = 0; i < 20; ++i) {
    absl::StatusOr<v1::Operation> op = team_b_on_a.Submit(RandomRequest(30, FreshSeed(), "m_topo"));
    ASSERT_TRUE(op.ok()) << op.status();
    ASSERT_TRUE(team_b_on_a.WaitUntilDone(op->name(), absl::Now() + absl::Seconds(20)).ok());
    names.push_back(op->name());
  }
  // Tenant A: four pending requests of about 10 MiB each (40 MiB in a 32 MB Redis).
  PlacementClient& team_a_on_a = ClientOf(*a, kTeamA);
  std::vector<std::string> huge;
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<v1::Operation> op =
        team_a_on_a.Submit(SlowRequestOfSize(int64_t{10} << 20, absl::Minutes(5)));
    ASSERT_TRUE(op.ok()) << op.status();
    huge.push_back(op->name());
  }
  // Every one of B's records is still there: another replica answers for them.
  PlacementClient& team_b_on_b = ClientOf(*b, kTeamB);
  int missing = 0;
  for (const std::string& name : names) {
    absl::StatusOr<v1::Operation> got =
        team_b_on_b.WaitUntilDone(name, absl::Now() + absl::Seconds(10));
    if (!got.ok() || !got->done() || !got->has_response()) ++missing;
  }
  EXPECT_EQ(missing, 0);
  // A's huge operations are shared too (their records), but their requests were not stored.
  PlacementClient& team_a_on_b = ClientOf(*b, kTeamA);
  for (const std::string& name : huge) {
    absl::StatusOr<v1::Operation> got = team_a_on_b.GetOperation(name);
    EXPECT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(team_a_on_a.CancelOperation(name).ok());
  }
  EXPECT_EQ(Metric(*a, "placement_shared_requests_not_stored_total{reason=\"size\"}"), 4)
      << a->Log();
  EXPECT_THAT(a->Log(), HasSubstr("--operation_max_request_bytes"));
}

// ---- Finding 3: a full Redis with noeviction ----

TEST_F(SharedOperationsTrustTest, AFullRedisEndsFollowersOnOtherReplicasAndIsLoggedAndCounted) {
  StartRedis({.args = {"--maxmemory-policy", "noeviction"}});
  ServerProcess* a = Replica();
  ServerProcess* b = Replica();
  ASSERT_TRUE(a && b);
  PlacementClient& on_a = ClientOf(*a);
  PlacementClient& on_b = ClientOf(*b);
  absl::StatusOr<v1::Operation> op = on_a.Submit(SlowRequest(FreshSeed(), absl::Seconds(2)));
  ASSERT_TRUE(op.ok()) << op.status();
  ASSERT_TRUE(AwaitRunning(on_b, op->name()));
  // Redis is full: it holds more than its maxmemory, and noeviction refuses every write.
  ASSERT_TRUE(redis_->Command({"CONFIG", "SET", "maxmemory", "1"}).ok());
  absl::StatusOr<std::string> refused = redis_->Command({"SET", Key("probe"), "x"});
  ASSERT_FALSE(refused.ok());
  ASSERT_THAT(std::string(refused.status().message()), HasSubstr("OOM"));
  // The job ends on A (2 s); its result cannot be stored. B's follower must not pend forever.
  absl::StatusOr<v1::Operation> on_b_done =
      on_b.WaitUntilDone(op->name(), absl::Now() + absl::Seconds(15));
  ASSERT_TRUE(on_b_done.ok()) << on_b_done.status();
  ASSERT_TRUE(on_b_done->done());
  EXPECT_FALSE(on_b_done->has_response());
  EXPECT_EQ(on_b_done->error().code(), static_cast<int>(absl::StatusCode::kAborted))
      << on_b_done->error().message();
  EXPECT_THAT(on_b_done->error().message(), HasSubstr("memory"));
  // A's own caller has the answer; the refusal is counted and logged.
  absl::StatusOr<v1::Operation> on_a_done = on_a.GetOperation(op->name());
  ASSERT_TRUE(on_a_done.ok());
  EXPECT_TRUE(on_a_done->has_response());
  EXPECT_GE(Metric(*a, "placement_shared_operations_redis_errors_total{kind=\"oom\"}"), 1);
  EXPECT_THAT(a->Log(), HasSubstr("out of memory"));
}

// ---- Finding 4: the first submit after a Redis restart ----

TEST_F(SharedOperationsTrustTest, TheFirstSubmitsAfterARedisRestartAreShared) {
  ServerProcess* a = Replica();
  ServerProcess* b = Replica();
  ASSERT_TRUE(a && b);
  PlacementClient& on_a = ClientOf(*a);
  PlacementClient& on_b = ClientOf(*b);
  // Several submits at once: the pool holds a few connections afterwards.
  std::vector<std::thread> warmers;
  for (int i = 0; i < 4; ++i) {
    warmers.emplace_back([&] {
      std::unique_ptr<PlacementClient> client = Client(*a);
      absl::StatusOr<v1::Operation> op = client->Submit(RandomRequest(20, FreshSeed(), "m_topo"));
      EXPECT_TRUE(op.ok()) << op.status();
    });
  }
  for (std::thread& warmer : warmers) warmer.join();
  ASSERT_TRUE(redis_->Restart().ok());
  absl::SleepFor(absl::Seconds(3));  // Redis is back and quiet, as in the report
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<v1::Operation> op = on_a.Submit(RandomRequest(20, FreshSeed(), "m_topo"));
    ASSERT_TRUE(op.ok()) << op.status();
    absl::StatusOr<v1::Operation> seen = on_b.GetOperation(op->name());
    EXPECT_TRUE(seen.ok()) << "submit " << i << " after the restart: " << seen.status();
  }
  EXPECT_EQ(Metric(*a, "placement_shared_operations_fallback_total{reason=\"submit\"}"), 0);
}

TEST_F(SharedOperationsTrustTest, AnOperationCreatedWhileRedisWasAwayIsPublishedWhenItIsBack) {
  ServerProcess* a = Replica();
  ServerProcess* b = Replica();
  ASSERT_TRUE(a && b);
  PlacementClient& on_a = ClientOf(*a);
  PlacementClient& on_b = ClientOf(*b);
  redis_->Kill();
  absl::StatusOr<v1::Operation> quick = on_a.Submit(RandomRequest(20, FreshSeed(), "m_topo"));
  ASSERT_TRUE(quick.ok()) << quick.status();
  ASSERT_TRUE(on_a.WaitUntilDone(quick->name(), absl::Now() + absl::Seconds(20)).ok());
  absl::StatusOr<v1::Operation> slow = on_a.Submit(SlowRequest(FreshSeed(), absl::Seconds(3)));
  ASSERT_TRUE(slow.ok()) << slow.status();
  // Meanwhile another replica says "retry", never "not found".
  EXPECT_EQ(on_b.GetOperation(quick->name()).status().code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(redis_->Restart().ok());
  // From the moment Redis is back, B never answers NOT_FOUND for them, and soon knows them, the
  // quick one as done with its answer. (A publishes a finished operation as its record, then its
  // end: a poll in between sees it running, for as long as the two Redis calls apart take — under
  // ThreadSanitizer long enough to be seen in most runs.)
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  absl::StatusOr<v1::Operation> quick_on_b = absl::UnknownError("not asked");
  while (absl::Now() < give_up) {
    quick_on_b = on_b.GetOperation(quick->name());
    ASSERT_NE(quick_on_b.status().code(), absl::StatusCode::kNotFound)
        << quick_on_b.status() << "\n" << a->Log();
    if (quick_on_b.ok() && quick_on_b->done()) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE(quick_on_b.ok()) << quick_on_b.status();
  EXPECT_TRUE(quick_on_b->done() && quick_on_b->has_response());
  absl::StatusOr<v1::Operation> slow_on_b =
      on_b.WaitUntilDone(slow->name(), absl::Now() + absl::Seconds(20));
  ASSERT_TRUE(slow_on_b.ok()) << slow_on_b.status();
  EXPECT_TRUE(slow_on_b->has_response()) << slow_on_b->error().message();
  EXPECT_EQ(Solves(*a) + Solves(*b), 2);  // published, not solved again
  EXPECT_THAT(a->Log(), HasSubstr("published"));
}

// ---- Finding 5: submits that time out during a Redis stall ----

TEST_F(SharedOperationsTrustTest, SubmitsTimingOutDuringARedisStallAreSolvedOnceEach) {
  ServerProcess* a = Replica();
  ServerProcess* b = Replica();
  ASSERT_TRUE(a && b);
  PlacementClient& on_a = ClientOf(*a);
  PlacementClient& on_b = ClientOf(*b);
  absl::StatusOr<v1::Operation> warm = on_a.Submit(RandomRequest(20, FreshSeed(), "m_topo"));
  ASSERT_TRUE(warm.ok()) << warm.status();  // the stream, its group, the scripts
  ASSERT_TRUE(on_a.WaitUntilDone(warm->name(), absl::Now() + absl::Seconds(20)).ok());
  const double solves_before = Solves(*a) + Solves(*b);
  redis_->Pause();
  std::vector<std::string> names;
  // 6 distinct requests over 10 s: spaced so that each reaches the stalled Redis (past the
  // client's backoff) and times out there; Redis runs them all when it resumes.
  for (int i = 0; i < 6; ++i) {
    absl::StatusOr<v1::Operation> op = on_a.Submit(RandomRequest(20, FreshSeed(), "m_topo"));
    ASSERT_TRUE(op.ok()) << op.status();
    names.push_back(op->name());
    absl::SleepFor(absl::Milliseconds(1600));
  }
  redis_->Resume();
  // Long enough for any orphan to be taken over (lease 1 s) and solved.
  absl::SleepFor(absl::Seconds(4));
  EXPECT_EQ(Solves(*a) + Solves(*b) - solves_before, 6) << a->Log() << "\n---\n" << b->Log();
  EXPECT_EQ(Metric(*b, kTakenOver), 0);
  for (const std::string& name : names) {
    absl::StatusOr<v1::Operation> seen = on_b.WaitUntilDone(name, absl::Now() + absl::Seconds(10));
    ASSERT_TRUE(seen.ok()) << name << ": " << seen.status();
    EXPECT_TRUE(seen->has_response()) << seen->error().message();
  }
}

// ---- Finding 6: a rolling update that changes --default_time_limit ----

TEST_F(SharedOperationsTrustTest, ATakeoverRunsWithTheTimeLimitTheJobWasSubmittedWith) {
  ServerProcess* a = Replica({"--default_time_limit=2s"});
  ServerProcess* b = Replica({"--default_time_limit=3s"});
  ASSERT_TRUE(a && b);
  PlacementClient& on_a = ClientOf(*a);
  PlacementClient& on_b = ClientOf(*b);
  v1::PlaceRequest request = SlowRequest(FreshSeed(), absl::Seconds(1));
  request.mutable_options()->clear_time_limit();  // the replica's default applies
  absl::StatusOr<v1::Operation> op = on_a.Submit(request);
  ASSERT_TRUE(op.ok()) << op.status();
  ASSERT_TRUE(AwaitRunning(on_b, op->name()));
  a->Signal(SIGKILL);
  ASSERT_TRUE(a->WaitForExit(absl::Seconds(10)).ok());
  absl::StatusOr<v1::Operation> done = on_b.WaitUntilDone(op->name(), absl::Now() + absl::Seconds(20));
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_TRUE(done->has_response()) << done->error().message();
  EXPECT_EQ(done->response().placement().provenance().time_limit_ns(), 2'000'000'000);
  EXPECT_EQ(Metric(*b, kTakenOver), 1);
}

// ---- Rough edges ----

TEST_F(SharedOperationsTrustTest, AReplicaWithAShorterLeaseDoesNotStealLiveJobs) {
  ServerProcess* a = Replica({"--operation_lease=4s"});
  ServerProcess* b = Replica({"--operation_lease=1s"});
  ASSERT_TRUE(a && b);
  PlacementClient& on_a = ClientOf(*a);
  PlacementClient& on_b = ClientOf(*b);
  absl::StatusOr<v1::Operation> op = on_a.Submit(SlowRequest(FreshSeed(), absl::Seconds(5)));
  ASSERT_TRUE(op.ok()) << op.status();
  ASSERT_TRUE(AwaitRunning(on_b, op->name()));
  absl::SleepFor(absl::Seconds(3));  // three of B's leases, less than A's
  EXPECT_EQ(Metric(*b, kTakenOver), 0);
  EXPECT_EQ(Metric(*a, "placement_operation_leases_lost_total"), 0);
  EXPECT_TRUE(b->WaitForLog("lease", absl::Seconds(1))) << b->Log();
  absl::StatusOr<v1::Operation> done = on_b.WaitUntilDone(op->name(), absl::Now() + absl::Seconds(20));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_TRUE(done->has_response());
  EXPECT_EQ(Solves(*a) + Solves(*b), 1);
}

TEST_F(SharedOperationsTrustTest, DistinctFastSubmitsToTwoReplicasAreSolvedOnceEach) {
  // A long lease: a replica slowed down (sanitizers, a loaded machine) must not lose jobs to the
  // other one here; what this counts is admissions.
  ServerProcess* a = Replica({"--workers=2", "--operation_lease=5s"});
  ServerProcess* b = Replica({"--workers=2", "--operation_lease=5s"});
  ASSERT_TRUE(a && b);
  constexpr int kThreads = 4;
  constexpr int kPerThread = 50;
  std::vector<std::thread> threads;
  absl::Mutex mu;
  std::vector<std::pair<int, std::string>> submitted;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::unique_ptr<PlacementClient> client = Client(t % 2 == 0 ? *a : *b);
      for (int i = 0; i < kPerThread; ++i) {
        absl::StatusOr<v1::Operation> op = client->Submit(RandomRequest(20, FreshSeed(), "m_topo"));
        EXPECT_TRUE(op.ok()) << op.status();
        if (!op.ok()) continue;
        absl::MutexLock lock(&mu);
        submitted.emplace_back(t % 2, op->name());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  ASSERT_EQ(submitted.size(), static_cast<size_t>(kThreads * kPerThread));
  for (const auto& [replica, name] : submitted) {
    std::unique_ptr<PlacementClient> client = Client(replica == 0 ? *a : *b);
    absl::StatusOr<v1::Operation> done = client->WaitUntilDone(name, absl::Now() + absl::Seconds(20));
    ASSERT_TRUE(done.ok() && done->has_response()) << name;
  }
  EXPECT_EQ(Solves(*a) + Solves(*b), kThreads * kPerThread);
  EXPECT_EQ(Metric(*a, kTakenOver) + Metric(*b, kTakenOver), 0);
}

TEST_F(SharedOperationsTrustTest, ANonRedisAddressOrARedisWantingAPasswordIsAFailedStart) {
  // Something that is not Redis: another server's Prometheus port (HTTP).
  absl::StatusOr<std::unique_ptr<ServerProcess>> http = ServerProcess::Start({});
  ASSERT_TRUE(http.ok()) << http.status();
  absl::StatusOr<std::unique_ptr<ServerProcess>> at_http = ServerProcess::Start(
      {absl::StrCat("--redis=127.0.0.1:", (*http)->metrics_port())}, absl::Seconds(20));
  ASSERT_FALSE(at_http.ok()) << "started with --redis pointing at an HTTP server";
  EXPECT_THAT(std::string(at_http.status().message()), HasSubstr("not a Redis server"));
  EXPECT_THAT(std::string(at_http.status().message()), Not(HasSubstr("did not answer")));
  StopServer(**http);
  // A Redis that wants a password this server does not have.
  StartRedis({.password = "s3cret-redis-password"});
  absl::StatusOr<std::unique_ptr<ServerProcess>> locked = ServerProcess::Start(
      {absl::StrCat("--redis=", redis_->address())}, absl::Seconds(20));
  ASSERT_FALSE(locked.ok()) << "started against a Redis that requires a password";
  EXPECT_THAT(std::string(locked.status().message()), HasSubstr("password"));
  EXPECT_THAT(std::string(locked.status().message()), Not(HasSubstr("s3cret")));
}

TEST_F(SharedOperationsTrustTest, ErrorRepliesAndForgedFieldsAreReportedAsWhatTheyAre) {
  ServerProcess* a = Replica();
  ServerProcess* b = Replica();
  ASSERT_TRUE(a && b);
  PlacementClient& on_a = ClientOf(*a);
  PlacementClient& on_b = ClientOf(*b);
  // A record of the wrong type: Redis answers WRONGTYPE, which no retry can change.
  absl::StatusOr<v1::Operation> done = on_a.Submit(RandomRequest(20, FreshSeed(), "m_topo"));
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_TRUE(on_a.WaitUntilDone(done->name(), absl::Now() + absl::Seconds(20)).ok());
  ASSERT_TRUE(redis_->Command({"DEL", Key("op:" + done->name())}).ok());
  ASSERT_TRUE(redis_->Command({"SET", Key("op:" + done->name()), "not a hash"}).ok());
  absl::StatusOr<v1::Operation> wrong_type = on_b.GetOperation(done->name());
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_NE(wrong_type.status().code(), absl::StatusCode::kUnavailable) << wrong_type.status();
  EXPECT_THAT(std::string(wrong_type.status().message()), HasSubstr("WRONGTYPE"));
  EXPECT_THAT(std::string(wrong_type.status().message()), Not(HasSubstr("did not answer")));
  EXPECT_FALSE(client::RetryDelayOf(wrong_type.status()).has_value());

  // A 4 MiB stage forged into a running job's record never reaches a caller.
  absl::StatusOr<v1::Operation> slow = on_a.Submit(SlowRequest(FreshSeed(), absl::Seconds(30)));
  ASSERT_TRUE(slow.ok()) << slow.status();
  ASSERT_TRUE(AwaitRunning(on_b, slow->name()));
  absl::StatusOr<std::string> job = redis_->Command({"HGET", Key("op:" + slow->name()), "job"});
  ASSERT_TRUE(job.ok());
  ASSERT_TRUE(redis_->Command({"HSET", Key("job:" + *job), "stage", std::string(4 << 20, 's'),
                               "fraction", "7", "best_makespan_ns", "-9"})
                  .ok());
  PlacementClient& fresh_b = ClientOf(*b);
  absl::StatusOr<v1::Operation> forged = fresh_b.GetOperation(slow->name());
  if (forged.ok()) {
    EXPECT_LE(forged->metadata().stage().size(), 64u);
    EXPECT_GE(forged->metadata().fraction(), 0);
    EXPECT_LE(forged->metadata().fraction(), 1);
    EXPECT_GE(forged->metadata().best_makespan_ns(), 0);
    EXPECT_LT(forged->ByteSizeLong(), 4096u);
  } else {
    EXPECT_EQ(forged.status().code(), absl::StatusCode::kDataLoss) << forged.status();
  }
  EXPECT_TRUE(on_a.CancelOperation(slow->name()).ok());

  // A result evicted from Redis: ABORTED ("submit again"), as the status table says.
  absl::StatusOr<v1::Operation> evicted = on_a.Submit(RandomRequest(20, FreshSeed(), "m_topo"));
  ASSERT_TRUE(evicted.ok()) << evicted.status();
  ASSERT_TRUE(on_a.WaitUntilDone(evicted->name(), absl::Now() + absl::Seconds(20)).ok());
  absl::StatusOr<std::string> evicted_job = redis_->Command({"HGET", Key("op:" + evicted->name()), "job"});
  ASSERT_TRUE(evicted_job.ok());
  // A's background thread writes the completion a moment after its own caller has the answer.
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (redis_->Command({"HGET", Key("job:" + *evicted_job), "state"}).value_or("") != "done" &&
         absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  absl::StatusOr<std::string> result_key =
      redis_->Command({"HGET", Key("job:" + *evicted_job), "result"});
  ASSERT_TRUE(result_key.ok());
  ASSERT_TRUE(redis_->Command({"DEL", *result_key}).ok());
  absl::StatusOr<v1::Operation> gone = on_b.GetOperation(evicted->name());
  ASSERT_TRUE(gone.ok()) << gone.status();
  ASSERT_TRUE(gone->done());
  EXPECT_EQ(gone->error().code(), static_cast<int>(absl::StatusCode::kAborted))
      << gone->error().message();
}

TEST_F(SharedOperationsTrustTest, ShutdownWithRedisStalledAndFollowersEndsWithinTheGrace) {
  ServerProcess* a = Replica();
  ServerProcess* b = Replica({"--shutdown_grace=500ms"});
  ASSERT_TRUE(a && b);
  PlacementClient& on_a = ClientOf(*a);
  absl::StatusOr<v1::Operation> op = on_a.Submit(SlowRequest(FreshSeed(), absl::Minutes(2)));
  ASSERT_TRUE(op.ok()) << op.status();
  // Followers on B: a Watch and a long Wait.
  std::vector<std::thread> followers;
  for (int i = 0; i < 2; ++i) {
    followers.emplace_back([&, i] {
      std::unique_ptr<PlacementClient> on_b = Client(*b);
      if (i == 0) {
        (void)on_b->WatchOperation(op->name(), nullptr, absl::Now() + absl::Seconds(60));
      } else {
        (void)on_b->WaitOperation(op->name(), absl::Seconds(60));
      }
    });
  }
  ASSERT_TRUE(AwaitRunning(*Client(*b), op->name()));
  redis_->Pause();  // Redis unreachable: connections open, nothing answers
  absl::SleepFor(absl::Milliseconds(300));
  const absl::Time stopped = absl::Now();
  b->Signal(SIGTERM);
  EXPECT_EQ(b->WaitForExit(absl::Seconds(30)).value_or(-1), 0) << b->Log();
  const absl::Duration took = absl::Now() - stopped;
  std::cout << "shutdown with Redis stalled and two followers: " << absl::FormatDuration(took)
            << " (grace 500ms)\n";
  // A container runtime kills the process soon after the grace: everything fits in grace + 1 s.
  EXPECT_LT(took, absl::Milliseconds(500) + absl::Seconds(1)) << b->Log();
  for (std::thread& follower : followers) follower.join();
  // No call was waiting for a job: nothing to say about answering them.
  EXPECT_THAT(b->Log(), Not(HasSubstr("still waiting")));
  redis_->Resume();
}

}  // namespace
}  // namespace placement::e2e
