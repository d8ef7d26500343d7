// End-to-end fault tests: a real placement_server whose algorithm throws, overruns its time limit, or
// whose process is killed with SIGKILL under load. Each fault must cost at most the jobs it touches:
// the others complete, and the server (or its restarted successor) keeps serving.
//
// The faulty algorithms are the server's test-only ones (--testing_algorithms): `testing_throw` throws
// a std::runtime_error from the worker thread; `testing_overrun` ignores its time limit until it is
// cancelled; `testing_wait` holds a worker until its time limit and then answers.
#include <signal.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/placement_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/server_process.h"
#include "tests/e2e/test_requests.h"
#include "tests/testutil/random_graph.h"

namespace placement::e2e {
namespace {

using client::ClientOptions;
using client::PlacementClient;
using ::testing::HasSubstr;

v1::PlaceRequest Request(uint64_t seed, const std::string& algorithm,
                         absl::Duration time_limit = absl::Seconds(10)) {
  v1::PlaceRequest request = RandomRequest(60, seed, algorithm, 3, 2.0);
  SetTimeLimit(time_limit, &request);
  return request;
}

ClientOptions Options(const std::string& target, int attempts = 1) {
  ClientOptions options;
  options.target = target;
  options.default_timeout = absl::Seconds(120);
  options.retry.max_attempts = attempts;
  return options;
}

TEST(FaultsE2ETest, AnAlgorithmThatThrowsFailsOnlyItsJobWithInternal) {
  absl::StatusOr<std::unique_ptr<ServerProcess>> server =
      ServerProcess::Start({"--workers=1", "--testing_algorithms"});
  ASSERT_TRUE(server.ok()) << server.status();
  PlacementClient client(Options((*server)->address()));

  // Unary: the caller gets INTERNAL with the exception's message.
  absl::StatusOr<v1::PlaceResponse> thrown = client.Place(Request(FreshSeed(), "testing_throw"));
  ASSERT_EQ(thrown.status().code(), absl::StatusCode::kInternal) << thrown.status();
  EXPECT_THAT(std::string(thrown.status().message()), HasSubstr("testing_throw: deliberate failure"));

  // As an operation: done, with the error in it.
  absl::StatusOr<v1::Operation> op = client.Submit(Request(FreshSeed(), "testing_throw"));
  ASSERT_TRUE(op.ok()) << op.status();
  absl::StatusOr<v1::Operation> done = client.WaitUntilDone(op->name(), absl::Now() + absl::Seconds(60));
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_TRUE(done->has_error()) << done->DebugString();
  EXPECT_EQ(client::FromStatusProto(done->error()).code(), absl::StatusCode::kInternal);

  // The only worker survived: the server still serves and computes.
  EXPECT_EQ(client.CheckHealth("").value_or(client::ServingStatus::kUnknown),
            client::ServingStatus::kServing);
  absl::StatusOr<v1::PlaceResponse> placed = client.Place(Request(FreshSeed(), "round_robin"));
  ASSERT_TRUE(placed.ok()) << placed.status();
  absl::StatusOr<std::string> metrics = ScrapeMetrics((*server)->metrics_port());
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(MetricValue(*metrics, "placement_requests_total{code=\"INTERNAL\",method=\"Place\"}"), 1);
  EXPECT_THAT((*server)->Log(), ::testing::Not(HasSubstr("terminate called")));
  StopServer(**server);
}

TEST(FaultsE2ETest, AnAlgorithmOverrunningItsTimeLimitFailsOnlyItsCallAndFreesTheWorker) {
  absl::StatusOr<std::unique_ptr<ServerProcess>> server =
      ServerProcess::Start({"--workers=1", "--testing_algorithms"});
  ASSERT_TRUE(server.ok()) << server.status();
  PlacementClient client(Options((*server)->address()));

  // The job ignores its 2 s limit (it would run 20 s); the caller's 4 s deadline ends the call.
  const absl::Time start = absl::Now();
  absl::StatusOr<v1::PlaceResponse> overrun =
      client.Place(Request(FreshSeed(), "testing_overrun", absl::Seconds(2)), absl::Seconds(4));
  EXPECT_EQ(overrun.status().code(), absl::StatusCode::kDeadlineExceeded) << overrun.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));

  // With its only caller gone the job is cancelled, so the single worker takes the next job long
  // before the overrunning one would have stopped by itself.
  const absl::Time next_start = absl::Now();
  absl::StatusOr<v1::PlaceResponse> next = client.Place(Request(FreshSeed(), "round_robin"));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_LT(absl::Now() - next_start, absl::Seconds(12));
  EXPECT_EQ(client.CheckHealth("").value_or(client::ServingStatus::kUnknown),
            client::ServingStatus::kServing);

  // A cooperative algorithm at its limit answers with its best so far, marked time_limited.
  absl::StatusOr<v1::PlaceResponse> limited =
      client.Place(Request(FreshSeed(), "testing_wait", absl::Milliseconds(300)));
  ASSERT_TRUE(limited.ok()) << limited.status();
  EXPECT_TRUE(limited->placement().provenance().time_limited());
  StopServer(**server);
}

TEST(FaultsE2ETest, KillDashNineUnderLoadThenRestartOnTheSamePortLosesNoRequest) {
  absl::StatusOr<std::unique_ptr<ServerProcess>> first =
      ServerProcess::Start({"--workers=2", "--testing_algorithms"});
  ASSERT_TRUE(first.ok()) << first.status();
  const int port = (*first)->port();
  const std::string target = (*first)->address();

  constexpr int kCallers = 4;
  constexpr int kPerCaller = 12;
  std::atomic<int> completed{0};
  absl::Mutex mu;
  std::vector<absl::Status> failures;
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&] {
      ClientOptions options = Options(target, /*attempts=*/60);
      options.retry.initial_backoff = absl::Milliseconds(50);
      options.retry.max_backoff = absl::Milliseconds(500);
      PlacementClient client(options);
      for (int i = 0; i < kPerCaller; ++i) {
        // Each holds a worker for 150 ms, so calls are in flight when the server dies.
        absl::StatusOr<v1::PlaceResponse> placed =
            client.Place(Request(FreshSeed(), "testing_wait", absl::Milliseconds(150)));
        if (placed.ok() && placed->placement().device_size() == 60) {
          ++completed;
        } else {
          absl::MutexLock lock(&mu);
          failures.push_back(placed.ok() ? absl::InternalError("wrong answer") : placed.status());
        }
      }
    });
  }
  // Kill once a few calls have completed and others are surely in flight.
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (completed.load() < 6 && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(10));
  ASSERT_GE(completed.load(), 6);
  const int completed_before_kill = completed.load();
  (*first)->Signal(SIGKILL);
  EXPECT_EQ((*first)->WaitForExit(absl::Seconds(30)).value_or(0), -SIGKILL);

  absl::StatusOr<std::unique_ptr<ServerProcess>> second =
      ServerProcess::Start({"--workers=2", "--testing_algorithms", absl::StrCat("--port=", port)});
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_EQ((*second)->port(), port);
  for (std::thread& caller : callers) caller.join();

  for (const absl::Status& failure : failures) ADD_FAILURE() << failure;
  EXPECT_EQ(completed.load(), kCallers * kPerCaller);
  EXPECT_LT(completed_before_kill, kCallers * kPerCaller);  // the kill really happened under load
  StopServer(**second);
}

}  // namespace
}  // namespace placement::e2e
