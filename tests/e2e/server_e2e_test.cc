// End-to-end tests of placement_server: the real binary on 127.0.0.1 port 0, talked to over real
// sockets with the client library, scraped over HTTP. Slow jobs use the server's `testing_wait`
// algorithm (--testing_algorithms), which holds a worker until cancelled or out of time.
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
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/engine/io/message_io.h"
#include "tests/e2e/server_process.h"
#include "tests/e2e/test_requests.h"
#include "tests/testutil/random_graph.h"

namespace placement::e2e {
namespace {

using client::ClientOptions;
using client::PlacementClient;
using ::testing::HasSubstr;
using testutil::DevicesByName;

constexpr char kRealWorkload[] = "tests/data/service/inception_v1_request.json.gz";

ClientOptions Options(const ServerProcess& server, int attempts = 1) {
  ClientOptions options;
  options.target = server.address();
  options.default_timeout = absl::Seconds(120);
  options.retry.max_attempts = attempts;
  return options;
}

// Waits (on the watch stream) until the operation's job is running on a worker.
void AwaitRunning(PlacementClient& client, const std::string& name) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::WatchOperationRequest request;
  request.set_name(name);
  auto reader = client.stub().WatchOperation(&context, request);
  v1::WatchOperationResponse update;
  while (reader->Read(&update)) {
    const std::string& stage = update.operation().metadata().stage();
    if (stage != "queued" || update.operation().done()) {
      context.TryCancel();
      break;
    }
  }
  reader->Finish();
}

class ServerE2ETest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = StartSuiteServer({"--workers=2", "--testing_algorithms"}); }
  static void TearDownTestSuite() { StopSuiteServer(server_); }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    client_ = std::make_unique<PlacementClient>(Options(*server_));
  }

  static ServerProcess* server_;
  std::unique_ptr<PlacementClient> client_;
};

ServerProcess* ServerE2ETest::server_ = nullptr;

TEST_F(ServerE2ETest, HealthIsServingAndUnknownServicesAreReported) {
  EXPECT_EQ(client_->CheckHealth("").value(), client::ServingStatus::kServing);
  EXPECT_EQ(client_->CheckHealth("placement.v1.PlacementService").value(),
            client::ServingStatus::kServing);
  EXPECT_EQ(client_->CheckHealth("no.such.Service").value(),
            client::ServingStatus::kServiceUnknown);
}

TEST_F(ServerE2ETest, ListsTheEngineAlgorithms) {
  absl::StatusOr<v1::ListAlgorithmsResponse> algorithms = client_->ListAlgorithms();
  ASSERT_TRUE(algorithms.ok()) << algorithms.status();
  std::vector<std::string> names;
  for (const v1::AlgorithmInfo& info : algorithms->algorithms()) {
    names.push_back(info.name());
    EXPECT_FALSE(info.version().empty()) << info.name();
  }
  EXPECT_THAT(names, ::testing::Contains("round_robin"));
  EXPECT_THAT(names, ::testing::Contains("testing_wait"));
}

TEST_F(ServerE2ETest, PlacesARealWorkload) {
  absl::StatusOr<v1::PlaceRequest> request =
      engine::ReadMessageFile<v1::PlaceRequest>(SourcePath(kRealWorkload));
  ASSERT_TRUE(request.ok()) << request.status();
  request->mutable_options()->set_skip_cache(true);  // compute it, even if an earlier test did
  absl::StatusOr<v1::PlaceResponse> placed = client_->Place(*request);
  ASSERT_TRUE(placed.ok()) << placed.status();
  const v1::Placement& placement = placed->placement();
  ASSERT_EQ(placement.device_size(), request->graph().ops_size());
  for (int32_t device : placement.device()) {
    ASSERT_GE(device, 0);
    ASSERT_LT(device, request->cluster().devices_size());
  }
  EXPECT_NE(placement.outcome(), v1::OUTCOME_UNSPECIFIED);
  EXPECT_GT(placement.metrics().makespan_ns(), 0);
  EXPECT_GE(placement.metrics().makespan_ns(), placement.metrics().lower_bound_ns());
  EXPECT_EQ(placement.metrics().devices_size(), request->cluster().devices_size());
  EXPECT_EQ(placement.provenance().cache(), v1::MISS);
  EXPECT_EQ(placement.provenance().request_digest().size(), 64u);

  // The simulator agrees when asked to score the same assignment.
  v1::EvaluateRequest evaluate;
  *evaluate.mutable_graph() = request->graph();
  *evaluate.mutable_cluster() = request->cluster();
  *evaluate.mutable_options() = request->options();
  *evaluate.mutable_device() = placement.device();
  absl::StatusOr<v1::EvaluateResponse> scored = client_->Evaluate(evaluate);
  ASSERT_TRUE(scored.ok()) << scored.status();
  EXPECT_EQ(scored->placement().metrics().makespan_ns(), placement.metrics().makespan_ns());
  EXPECT_EQ(scored->placement().outcome(), placement.outcome());
}

TEST_F(ServerE2ETest, TheSameGraphInAnotherOpOrderIsAHitWithItsOwnOrder) {
  v1::PlaceRequest first = RandomRequest(400, FreshSeed(), "");  // the default algorithm
  v1::PlaceRequest shuffled = testutil::ShuffleRequest(first, /*seed=*/99);
  ASSERT_NE(first.graph().ops(0).name(), shuffled.graph().ops(0).name());

  absl::StatusOr<v1::PlaceResponse> miss = client_->Place(first);
  ASSERT_TRUE(miss.ok()) << miss.status();
  EXPECT_EQ(miss->placement().provenance().cache(), v1::MISS);
  absl::StatusOr<v1::PlaceResponse> hit = client_->Place(shuffled);
  ASSERT_TRUE(hit.ok()) << hit.status();
  EXPECT_EQ(hit->placement().provenance().cache(), v1::HIT);
  EXPECT_EQ(hit->placement().provenance().request_digest(),
            miss->placement().provenance().request_digest());
  EXPECT_EQ(DevicesByName(shuffled, hit->placement()), DevicesByName(first, miss->placement()));
  EXPECT_EQ(hit->placement().metrics().makespan_ns(), miss->placement().metrics().makespan_ns());

  // skip_cache computes afresh (and gets the same deterministic answer).
  shuffled.mutable_options()->set_skip_cache(true);
  absl::StatusOr<v1::PlaceResponse> again = client_->Place(shuffled);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->placement().provenance().cache(), v1::MISS);
  EXPECT_EQ(DevicesByName(shuffled, again->placement()), DevicesByName(first, miss->placement()));
}

// A byte-identical repeat is answered from its bytes (the repeat index); Place and SubmitPlacement
// share the index, so each is a hit after the other, with the same answer in the same op order.
TEST_F(ServerE2ETest, ByteIdenticalRepeatsAreHitsForPlaceAndSubmitAlike) {
  const v1::PlaceRequest request = RandomRequest(300, FreshSeed(), "round_robin");
  absl::StatusOr<v1::Operation> first = client_->Submit(request);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<v1::Operation> solved =
      client_->WaitUntilDone(first->name(), absl::Now() + absl::Seconds(60));
  ASSERT_TRUE(solved.ok()) << solved.status();
  ASSERT_TRUE(solved->has_response()) << solved->error().message();
  const v1::Placement& computed = solved->response().placement();
  EXPECT_NE(computed.provenance().cache(), v1::HIT);

  for (int repeat = 0; repeat < 2; ++repeat) {
    absl::StatusOr<v1::PlaceResponse> placed = client_->Place(request);
    ASSERT_TRUE(placed.ok()) << placed.status();
    EXPECT_EQ(placed->placement().provenance().cache(), v1::HIT);
    EXPECT_EQ(DevicesByName(request, placed->placement()), DevicesByName(request, computed));

    absl::StatusOr<v1::Operation> submitted = client_->Submit(request);
    ASSERT_TRUE(submitted.ok()) << submitted.status();
    ASSERT_TRUE(submitted->done());  // a hit is done at once
    EXPECT_NE(submitted->name(), first->name());  // no request_id: a new operation each time
    EXPECT_EQ(submitted->response().placement().provenance().cache(), v1::HIT);
    EXPECT_EQ(DevicesByName(request, submitted->response().placement()),
              DevicesByName(request, computed));
  }

  // With a request_id the bytes differ (a first sighting), then repeat: the same operation.
  v1::PlaceRequest keyed = request;
  keyed.set_request_id(absl::StrCat("repeat-", FreshSeed()));
  absl::StatusOr<v1::Operation> keyed_first = client_->Submit(keyed);
  ASSERT_TRUE(keyed_first.ok()) << keyed_first.status();
  absl::StatusOr<v1::Operation> keyed_again = client_->Submit(keyed);
  ASSERT_TRUE(keyed_again.ok()) << keyed_again.status();
  EXPECT_EQ(keyed_again->name(), keyed_first->name());
  EXPECT_EQ(keyed_again->response().placement().provenance().cache(), v1::HIT);
}

TEST_F(ServerE2ETest, SixteenIdenticalConcurrentRequestsShareOneSolve) {
  const std::string solves = "placement_solves_total{algorithm=\"testing_wait\"}";
  const double solves_before =
      MetricValue(ScrapeMetrics(server_->metrics_port()).value(), solves);
  const v1::PlaceRequest request = SlowRequest(FreshSeed(), absl::Milliseconds(1500));

  std::vector<absl::StatusOr<v1::PlaceResponse>> results(16, absl::UnknownError("not run"));
  std::vector<std::thread> callers;
  for (int i = 0; i < 16; ++i) {
    callers.emplace_back([&, i] {
      PlacementClient client(Options(*server_));
      results[i] = client.Place(request);
    });
  }
  for (std::thread& caller : callers) caller.join();

  // The same answer for everyone, but for what each caller's own wait adds (a caller that came after
  // the job ended is a HIT with no queue time).
  const auto shared_part = [](v1::Placement placement) {
    placement.mutable_provenance()->clear_cache();
    placement.mutable_provenance()->clear_queue_ns();
    return placement.SerializeAsString();
  };
  int misses = 0, coalesced = 0, hits = 0;
  for (const auto& result : results) {
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(shared_part(result->placement()), shared_part(results[0]->placement()));
    EXPECT_EQ(std::vector<int32_t>(result->placement().device().begin(),
                                   result->placement().device().end()),
              std::vector<int32_t>(results[0]->placement().device().begin(),
                                   results[0]->placement().device().end()));
    switch (result->placement().provenance().cache()) {
      case v1::MISS: ++misses; break;
      case v1::COALESCED: ++coalesced; break;
      case v1::HIT: ++hits; break;
      default: ADD_FAILURE() << "no cache result";
    }
  }
  EXPECT_EQ(misses, 1);
  EXPECT_GE(coalesced, 1);
  EXPECT_EQ(coalesced + hits, 15);
  EXPECT_EQ(MetricValue(ScrapeMetrics(server_->metrics_port()).value(), solves) - solves_before,
            1.0);
}

TEST_F(ServerE2ETest, SubmitWatchWaitAndCancel) {
  // A finished operation: submit, then wait.
  const v1::PlaceRequest quick = RandomRequest(60, FreshSeed(), "round_robin");
  absl::StatusOr<v1::Operation> submitted = client_->Submit(quick);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  EXPECT_THAT(submitted->name(), ::testing::MatchesRegex("operations/[0-9a-f]{32}"));
  absl::StatusOr<v1::Operation> done =
      client_->WaitUntilDone(submitted->name(), absl::Now() + absl::Seconds(60));
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_TRUE(done->done());
  ASSERT_TRUE(done->has_response());
  EXPECT_FALSE(done->has_error());
  EXPECT_EQ(done->response().placement().device_size(), quick.graph().ops_size());
  absl::StatusOr<v1::Operation> got = client_->GetOperation(submitted->name());
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->done());
  EXPECT_EQ(got->response().placement().provenance().request_digest(),
            done->response().placement().provenance().request_digest());

  // A running operation: watch its progress, cancel it, see the stream end with CANCELLED.
  absl::StatusOr<v1::Operation> slow = client_->Submit(SlowRequest(FreshSeed(), absl::Minutes(2)));
  ASSERT_TRUE(slow.ok()) << slow.status();
  EXPECT_FALSE(slow->done());
  EXPECT_FALSE(slow->has_error());
  EXPECT_FALSE(slow->has_response());
  absl::Notification running;
  std::vector<v1::Operation> updates;
  absl::StatusOr<v1::Operation> watched = absl::UnknownError("not watched");
  std::thread watcher([&] {
    PlacementClient watch_client(Options(*server_));
    watched = watch_client.WatchOperation(
        slow->name(),
        [&](const v1::Operation& update) {
          updates.push_back(update);
          if (update.metadata().stage() == "waiting" && !running.HasBeenNotified()) {
            running.Notify();
          }
        },
        absl::Now() + absl::Seconds(60));
  });
  ASSERT_TRUE(running.WaitForNotificationWithTimeout(absl::Seconds(60)));
  absl::StatusOr<v1::Operation> cancelled = client_->CancelOperation(slow->name());
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  watcher.join();
  ASSERT_TRUE(watched.ok()) << watched.status();
  EXPECT_TRUE(watched->done());
  EXPECT_EQ(watched->error().code(), static_cast<int>(absl::StatusCode::kCancelled));
  ASSERT_GE(updates.size(), 2u);
  EXPECT_FALSE(updates.front().done());
  EXPECT_TRUE(updates.back().done());

  absl::StatusOr<v1::Operation> after = client_->WaitOperation(slow->name(), absl::Seconds(30));
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->done());
  EXPECT_EQ(after->error().code(), static_cast<int>(absl::StatusCode::kCancelled));
}

TEST_F(ServerE2ETest, WaitOperationReturnsNotDoneWhenItsTimeoutPasses) {
  absl::StatusOr<v1::Operation> slow = client_->Submit(SlowRequest(FreshSeed(), absl::Minutes(2)));
  ASSERT_TRUE(slow.ok()) << slow.status();
  absl::StatusOr<v1::Operation> waited = client_->WaitOperation(slow->name(), absl::Milliseconds(200));
  ASSERT_TRUE(waited.ok()) << waited.status();
  EXPECT_FALSE(waited->done());
  EXPECT_FALSE(waited->has_error());
  EXPECT_FALSE(waited->has_response());
  ASSERT_TRUE(client_->CancelOperation(slow->name()).ok());
}

TEST_F(ServerE2ETest, UnknownOperationsAreNotFound) {
  for (absl::StatusCode code :
       {client_->GetOperation("operations/0123").status().code(),
        client_->WaitOperation("operations/0123", absl::Seconds(1)).status().code(),
        client_->CancelOperation("operations/0123").status().code(),
        client_->WatchOperation("operations/0123", nullptr, absl::Now() + absl::Seconds(10))
            .status()
            .code()}) {
    EXPECT_EQ(code, absl::StatusCode::kNotFound);
  }
}

TEST_F(ServerE2ETest, InvalidRequestsListEveryFieldViolation) {
  v1::PlaceRequest request = RandomRequest(20, 1, "round_robin");
  request.mutable_graph()->mutable_edges(0)->set_dst(912);
  request.mutable_graph()->mutable_ops(3)->set_name(request.graph().ops(2).name());
  request.mutable_options()->set_algorithm("no_such_algorithm");
  absl::StatusOr<v1::PlaceResponse> placed = client_->Place(request);
  ASSERT_EQ(placed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(placed.status().message()), HasSubstr("graph.edges[0].dst"));
  std::vector<std::string> fields;
  for (const auto& [field, description] : client::FieldViolationsOf(placed.status())) {
    fields.push_back(field);
  }
  EXPECT_THAT(fields, ::testing::Contains("graph.edges[0].dst"));
  EXPECT_THAT(fields, ::testing::Contains("graph.ops[3].name"));
  EXPECT_THAT(fields, ::testing::Contains("options.algorithm"));

  v1::EvaluateRequest evaluate;
  *evaluate.mutable_graph() = RandomRequest(20, 1, "").graph();
  *evaluate.mutable_cluster() = RandomRequest(20, 1, "").cluster();
  evaluate.add_device(0);
  EXPECT_EQ(client_->Evaluate(evaluate).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ServerE2ETest, MetricsArePresentAndCounting) {
  absl::StatusOr<std::string> before = ScrapeMetrics(server_->metrics_port());
  ASSERT_TRUE(before.ok()) << before.status();
  const std::string ok_places = "placement_requests_total{code=\"OK\",method=\"Place\"}";
  const std::string misses = "placement_cache_lookups_total{result=\"miss\"}";
  const std::string hits = "placement_cache_lookups_total{result=\"hit\"}";
  const v1::PlaceRequest request = RandomRequest(80, FreshSeed(), "round_robin");
  ASSERT_TRUE(client_->Place(request).ok());
  ASSERT_TRUE(client_->Place(request).ok());
  absl::StatusOr<std::string> after = ScrapeMetrics(server_->metrics_port());
  ASSERT_TRUE(after.ok());
  // Families appear once they have a series (labelled ones after their first event).
  for (const char* family :
       {"placement_requests_total", "placement_request_duration_seconds",
        "placement_cache_lookups_total", "placement_solves_total",
        "placement_solve_duration_seconds", "placement_queue_depth", "placement_jobs_running",
        "placement_cache_bytes", "process_resident_memory_bytes"}) {
    EXPECT_TRUE(HasMetricFamily(*after, family)) << family;
  }
  EXPECT_EQ(MetricValue(*after, ok_places) - MetricValue(*before, ok_places), 2);
  EXPECT_EQ(MetricValue(*after, misses) - MetricValue(*before, misses), 1);
  EXPECT_EQ(MetricValue(*after, hits) - MetricValue(*before, hits), 1);
  EXPECT_GT(MetricValue(*after, "placement_cache_bytes"), 0);
  EXPECT_GT(MetricValue(*after, "placement_solves_total{algorithm=\"round_robin\"}"), 0);
  EXPECT_EQ(MetricValue(*after, "placement_workers"), 2);

  // Names and format pass promtool when it is installed (Debian package `prometheus`).
  if (RunCommand({"/bin/sh", "-c", "command -v promtool"}).exit_status != 0) {
    GTEST_SKIP() << "promtool not installed; metric names not linted";
  }
  const std::string path = ::testing::TempDir() + "/placement_metrics.txt";
  ASSERT_TRUE(engine::WriteFileBytes(path, *after).ok());
  CommandResult lint = RunCommand({"/bin/sh", "-c", "promtool check metrics < " + path});
  EXPECT_EQ(lint.exit_status, 0) << lint.out << lint.err;
}

TEST_F(ServerE2ETest, LogsOneLinePerRequest) {
  const v1::PlaceRequest request = RandomRequest(30, FreshSeed(), "round_robin");
  absl::StatusOr<v1::PlaceResponse> placed = client_->Place(request);
  ASSERT_TRUE(placed.ok());
  const std::string digest = placed->placement().provenance().request_digest().substr(0, 12);
  ASSERT_TRUE(server_->WaitForLog(absl::StrCat("rpc method=Place digest=", digest, " cache=MISS"),
                                  absl::Seconds(10)))
      << server_->Log();
  const std::string log = server_->Log();
  const size_t line_start = log.find(absl::StrCat("digest=", digest));
  const std::string line = log.substr(line_start, log.find('\n', line_start) - line_start);
  EXPECT_THAT(line, HasSubstr("queue_ms="));
  EXPECT_THAT(line, HasSubstr("solve_ms="));
  EXPECT_THAT(line, HasSubstr("status=OK"));
}

// ---- Servers with their own configuration ----

TEST(ServerE2EConfigTest, CallerGoingAwayCancelsTheJobOnlyWhenNobodyElseWaits) {
  absl::StatusOr<std::unique_ptr<ServerProcess>> server =
      ServerProcess::Start({"--workers=1", "--testing_algorithms"});
  ASSERT_TRUE(server.ok()) << server.status();
  PlacementClient client(Options(**server));

  // A unary caller and an operation share one job; the caller leaves; the job goes on.
  const v1::PlaceRequest shared = SlowRequest(FreshSeed(), absl::Seconds(3));
  grpc::ClientContext unary_context;
  v1::PlaceResponse unary_response;
  absl::Notification unary_done;
  grpc::Status unary_status;
  client.stub().async()->Place(&unary_context, &shared, &unary_response,
                               [&](grpc::Status status) {
                                 unary_status = std::move(status);
                                 unary_done.Notify();
                               });
  // Submitting the same request joins the unary call's job (or the other way round).
  absl::StatusOr<v1::Operation> op = client.Submit(shared);
  ASSERT_TRUE(op.ok()) << op.status();
  AwaitRunning(client, op->name());
  unary_context.TryCancel();
  unary_done.WaitForNotification();
  EXPECT_EQ(unary_status.error_code(), grpc::StatusCode::CANCELLED);
  absl::StatusOr<v1::Operation> finished =
      client.WaitUntilDone(op->name(), absl::Now() + absl::Seconds(60));
  ASSERT_TRUE(finished.ok()) << finished.status();
  EXPECT_TRUE(finished->has_response()) << finished->DebugString();

  // A job whose every waiter leaves is cancelled, and frees the only worker.
  const v1::PlaceRequest blocker = SlowRequest(FreshSeed(), absl::Minutes(5));
  absl::StatusOr<v1::Operation> blocking = client.Submit(blocker);
  ASSERT_TRUE(blocking.ok()) << blocking.status();
  AwaitRunning(client, blocking->name());
  grpc::ClientContext second_context;
  v1::PlaceResponse second_response;
  absl::Notification second_done;
  client.stub().async()->Place(&second_context, &blocker, &second_response,
                               [&](grpc::Status) { second_done.Notify(); });
  ASSERT_TRUE(client.CancelOperation(blocking->name()).ok());
  second_context.TryCancel();
  second_done.WaitForNotification();

  const absl::Time start = absl::Now();
  absl::StatusOr<v1::PlaceResponse> next = client.Place(RandomRequest(40, FreshSeed(), "round_robin"));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));  // not the blocker's 5 minutes
  (*server)->Signal(SIGTERM);
  EXPECT_EQ((*server)->WaitForExit(absl::Seconds(60)).value_or(-100), 0);
}

TEST(ServerE2EConfigTest, FullQueueIsAFastUnavailableWithARetryHint) {
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(
      {"--workers=1", "--max_queued_jobs=1", "--testing_algorithms", "--retry_delay=3s"});
  ASSERT_TRUE(server.ok()) << server.status();
  PlacementClient client(Options(**server, /*attempts=*/1));
  absl::StatusOr<v1::Operation> running = client.Submit(SlowRequest(FreshSeed(), absl::Minutes(5)));
  ASSERT_TRUE(running.ok()) << running.status();
  AwaitRunning(client, running->name());
  absl::StatusOr<v1::Operation> queued = client.Submit(SlowRequest(FreshSeed(), absl::Minutes(5)));
  ASSERT_TRUE(queued.ok()) << queued.status();

  const absl::Time start = absl::Now();
  absl::StatusOr<v1::PlaceResponse> rejected =
      client.Place(RandomRequest(40, FreshSeed(), "round_robin"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  ASSERT_EQ(rejected.status().code(), absl::StatusCode::kUnavailable) << rejected.status();
  EXPECT_THAT(std::string(rejected.status().message()), HasSubstr("queue is full"));
  EXPECT_EQ(client::RetryDelayOf(rejected.status()), absl::Seconds(3));
  absl::StatusOr<std::string> metrics = ScrapeMetrics((*server)->metrics_port());
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(MetricValue(*metrics, "placement_admission_rejections_total{reason=\"queue_full\"}"), 1);
  EXPECT_EQ(MetricValue(*metrics, "placement_queue_depth"), 1);
  EXPECT_EQ(MetricValue(*metrics, "placement_jobs_running"), 1);

  ASSERT_TRUE(client.CancelOperation(queued->name()).ok());
  ASSERT_TRUE(client.CancelOperation(running->name()).ok());
  (*server)->Signal(SIGTERM);
  EXPECT_EQ((*server)->WaitForExit(absl::Seconds(60)).value_or(-100), 0);
}

TEST(ServerE2EConfigTest, ExhaustedMemoryBudgetIsAFastUnavailableWithARetryHint) {
  // Two workers and a deep queue, so only the memory budget can refuse: one running job of ~100 KB
  // (64 KiB + 512 B per op + 96 B per edge, EstimateJobMemoryBytes) leaves no room in 150 KB.
  absl::StatusOr<std::unique_ptr<ServerProcess>> server =
      ServerProcess::Start({"--workers=2", "--max_queued_jobs=16", "--job_memory_budget_bytes=150000",
                            "--testing_algorithms", "--retry_delay=2s"});
  ASSERT_TRUE(server.ok()) << server.status();
  PlacementClient client(Options(**server, /*attempts=*/1));
  absl::StatusOr<v1::Operation> running = client.Submit(SlowRequest(FreshSeed(), absl::Minutes(5)));
  ASSERT_TRUE(running.ok()) << running.status();
  AwaitRunning(client, running->name());

  const absl::Time start = absl::Now();
  absl::StatusOr<v1::PlaceResponse> rejected =
      client.Place(RandomRequest(40, FreshSeed(), "round_robin"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  ASSERT_EQ(rejected.status().code(), absl::StatusCode::kUnavailable) << rejected.status();
  EXPECT_THAT(std::string(rejected.status().message()), HasSubstr("memory budget"));
  EXPECT_EQ(client::RetryDelayOf(rejected.status()), absl::Seconds(2));
  absl::StatusOr<std::string> metrics = ScrapeMetrics((*server)->metrics_port());
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(MetricValue(*metrics, "placement_admission_rejections_total{reason=\"memory\"}"), 1);

  // Once the big job is gone, the same request is admitted and answered.
  // The operation is done at once; the worker lets go of the job (and its memory) when it next looks
  // at the cancellation flag, which the metrics show.
  ASSERT_TRUE(client.CancelOperation(running->name()).ok());
  for (const absl::Time until = absl::Now() + absl::Seconds(30); absl::Now() < until;
       absl::SleepFor(absl::Milliseconds(20))) {
    absl::StatusOr<std::string> now = ScrapeMetrics((*server)->metrics_port());
    if (now.ok() && MetricValue(*now, "placement_jobs_running") == 0) break;
  }
  absl::StatusOr<v1::PlaceResponse> admitted =
      client.Place(RandomRequest(40, FreshSeed(), "round_robin"));
  EXPECT_TRUE(admitted.ok()) << admitted.status();
  (*server)->Signal(SIGTERM);
  EXPECT_EQ((*server)->WaitForExit(absl::Seconds(60)).value_or(-100), 0);
}

TEST(ServerE2EConfigTest, DeadlineTooShortIsDeadlineExceededAtOnce) {
  absl::StatusOr<std::unique_ptr<ServerProcess>> server =
      ServerProcess::Start({"--min_time_budget=20s"});
  ASSERT_TRUE(server.ok()) << server.status();
  PlacementClient client(Options(**server));
  const absl::Time start = absl::Now();
  absl::StatusOr<v1::PlaceResponse> placed =
      client.Place(RandomRequest(40, FreshSeed(), "round_robin"), absl::Seconds(10));
  EXPECT_EQ(placed.status().code(), absl::StatusCode::kDeadlineExceeded) << placed.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));  // answered by the server, not by the deadline
  EXPECT_THAT(std::string(placed.status().message()), HasSubstr("deadline leaves"));
  (*server)->Signal(SIGTERM);
  EXPECT_EQ((*server)->WaitForExit(absl::Seconds(60)).value_or(-100), 0);
}

TEST(ServerE2EConfigTest, SigtermDuringLoadFinishesInFlightCallsAndExitsZero) {
  absl::StatusOr<std::unique_ptr<ServerProcess>> server =
      ServerProcess::Start({"--workers=2", "--testing_algorithms", "--shutdown_grace=60s"});
  ASSERT_TRUE(server.ok()) << server.status();
  constexpr int kCalls = 4;
  std::vector<absl::StatusOr<v1::PlaceResponse>> results(kCalls, absl::UnknownError("not run"));
  std::vector<std::thread> callers;
  for (int i = 0; i < kCalls; ++i) {
    callers.emplace_back([&, i] {
      PlacementClient client(Options(**server));
      results[i] = client.Place(SlowRequest(FreshSeed(), absl::Seconds(1)));
    });
  }
  // Every call has reached the server once its jobs are all queued or running.
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (absl::Now() < give_up) {
    absl::StatusOr<std::string> metrics = ScrapeMetrics((*server)->metrics_port());
    ASSERT_TRUE(metrics.ok());
    if (MetricValue(*metrics, "placement_queue_depth") +
            MetricValue(*metrics, "placement_jobs_running") ==
        kCalls) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(10));  // polling the server's own state, bounded
  }
  (*server)->Signal(SIGTERM);
  for (std::thread& caller : callers) caller.join();
  for (const auto& result : results) {
    ASSERT_TRUE(result.ok()) << result.status() << "\n" << (*server)->Log();
    EXPECT_TRUE(result->placement().provenance().time_limited());
  }
  absl::StatusOr<int> exit_status = (*server)->WaitForExit(absl::Seconds(60));
  ASSERT_TRUE(exit_status.ok());
  EXPECT_EQ(*exit_status, 0) << (*server)->Log();
  EXPECT_THAT((*server)->Log(), HasSubstr("received SIGTERM"));
  EXPECT_THAT((*server)->Log(), HasSubstr("shut down in"));

  // Nothing answers any more.
  PlacementClient late(Options(**server));
  EXPECT_FALSE(late.WaitForConnected(absl::Milliseconds(200)).ok());
}

TEST(ServerE2EConfigTest, HelpAndFlagfileWork) {
  CommandResult help = RunCommand({ServerBinary(), "--help"});
  EXPECT_THAT(help.out + help.err, HasSubstr("--cache_bytes"));
  EXPECT_THAT(help.out + help.err, HasSubstr("--metrics_port"));

  const std::string flagfile = ::testing::TempDir() + "/server_flags";
  ASSERT_TRUE(engine::WriteFileBytes(flagfile, "--workers=3\n--cache_bytes=1048576\n").ok());
  absl::StatusOr<std::unique_ptr<ServerProcess>> server =
      ServerProcess::Start({"--flagfile=" + flagfile});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_THAT((*server)->Log(), HasSubstr("workers=3 cache_bytes=1048576"));
  absl::StatusOr<std::string> metrics = ScrapeMetrics((*server)->metrics_port());
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(MetricValue(*metrics, "placement_workers"), 3);
  EXPECT_EQ(MetricValue(*metrics, "placement_cache_max_bytes"), 1048576);
  (*server)->Signal(SIGINT);
  EXPECT_EQ((*server)->WaitForExit(absl::Seconds(60)).value_or(-100), 0);
}

}  // namespace
}  // namespace placement::e2e
