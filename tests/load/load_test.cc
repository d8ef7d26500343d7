// Bounded load tests (CTest label `load`): client/placement_load drives a real placement_server over
// loopback and reports a `summary:` line, which these tests check.
//
// - A mix of cache hits, misses, submit-and-cancel and invalid requests from several callers of three
//   tenants (bearer tokens, one job each on a worker at a time) for about 20 s: no unexpected answer,
//   every tenant served, and the server's RSS grows by no more than its cache bounds plus a fixed
//   allowance.
// - Overload at 5x capacity (15 callers; 1 worker + 2 queue slots): the excess is rejected at once with
//   a retryable code and a retry hint, every accepted request gets its answer, and the server's own
//   count of answered calls matches the callers'.
// The 5-minute soak is the same tool with longer flags (bench/README.md).
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/server_process.h"

namespace placement::e2e {
namespace {

constexpr int64_t kCacheBytes = 16 << 20;
constexpr int64_t kRepeatIndexBytes = 8 << 20;
// Allocator arenas of the server's threads, gRPC buffers of the callers' connections, jobs in flight.
constexpr int64_t kRssAllowance = 64 << 20;

// key=value pairs of placement_load's last `summary:` line.
std::map<std::string, double> Summary(const std::string& out) {
  std::map<std::string, double> values;
  const size_t at = out.rfind("summary:");
  if (at == std::string::npos) return values;
  const std::string line = out.substr(at, out.find('\n', at) - at);
  for (absl::string_view pair : absl::StrSplit(line, ' ')) {
    std::vector<std::string> kv = absl::StrSplit(pair, absl::MaxSplits('=', 1));
    double value = 0;
    if (kv.size() == 2 && absl::SimpleAtod(kv[1], &value)) values[kv[0]] = value;
  }
  return values;
}

CommandResult RunLoad(const ServerProcess& server, std::vector<std::string> flags) {
  std::vector<std::string> argv = {PLACEMENT_LOAD_BINARY, "--server=" + server.address(),
                                   absl::StrCat("--metrics=127.0.0.1:", server.metrics_port())};
  argv.insert(argv.end(), flags.begin(), flags.end());
  return RunCommand(argv);
}

// A tokens file for three tenants, in the format of both --auth_tokens and placement_load --tokens.
std::string WriteTenantTokens() {
  std::string path = ::testing::TempDir() + "/load_test_tokens.XXXXXX";
  const int fd = mkstemp(path.data());
  EXPECT_GE(fd, 0);
  if (fd >= 0) close(fd);
  std::ofstream out(path, std::ios::trunc);
  out << "# token tenant\n"
         "load-tenant-a-0123456789abcdef team-a\n"
         "load-tenant-b-0123456789abcdef team-b\n"
         "load-tenant-c-0123456789abcdef team-c\n";
  return path;
}

TEST(LoadTest, MixedLoadHasNoUnexpectedAnswersAndBoundedMemory) {
  const std::string tokens = WriteTenantTokens();
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(
      {"--workers=2", absl::StrCat("--cache_bytes=", kCacheBytes),
       absl::StrCat("--repeat_index_bytes=", kRepeatIndexBytes), "--log_requests=false",
       "--auth_tokens=" + tokens, "--tenant_max_running=1"});
  ASSERT_TRUE(server.ok()) << server.status();
  const CommandResult load = RunLoad(
      **server, {"--duration=20s", "--requests=100000", "--concurrency=6", "--ops=300",
                 "--hot_graphs=8", "--miss_fraction=0.1", "--cancel_fraction=0.1",
                 "--bad_fraction=0.1", "--algorithm=pardnn", "--time_limit=2s",
                 "--tokens=" + tokens,
                 absl::StrCat("--max_rss_growth=", kCacheBytes + kRepeatIndexBytes + kRssAllowance)});
  std::remove(tokens.c_str());
  std::printf("%s", load.out.c_str());
  EXPECT_EQ(load.exit_status, 0) << load.out << load.err;
  const std::map<std::string, double> summary = Summary(load.out);
  ASSERT_TRUE(summary.count("requests")) << load.out << load.err;
  EXPECT_GT(summary.at("requests"), 50);
  EXPECT_EQ(summary.at("unexpected"), 0);
  EXPECT_EQ(summary.at("rejected"), 0);  // the queue (64) is deeper than the callers (6)
  EXPECT_EQ(summary.at("tenants"), 3);
  EXPECT_GT(summary.at("min_tenant_answered"), 3) << "a tenant was starved";
  EXPECT_THAT(load.out, ::testing::HasSubstr("tenant team-b"));
  EXPECT_LE(summary.at("rss_after") - summary.at("rss_before"),
            kCacheBytes + kRepeatIndexBytes + kRssAllowance);
  EXPECT_THAT(load.out, ::testing::HasSubstr("cancel "));
  EXPECT_THAT(load.out, ::testing::HasSubstr("bad     status INVALID_ARGUMENT"));
  StopServer(**server);
}

TEST(LoadTest, OverloadAtFiveTimesCapacityIsRejectedFastAndLosesNothing) {
  // Capacity: one worker and two queue slots; each job holds the worker for 1 s.
  absl::StatusOr<std::unique_ptr<ServerProcess>> server =
      ServerProcess::Start({"--workers=1", "--max_queued_jobs=2", "--testing_algorithms",
                            "--retry_delay=250ms", "--log_requests=false"});
  ASSERT_TRUE(server.ok()) << server.status();
  const CommandResult load =
      RunLoad(**server, {"--duration=10s", "--requests=100000", "--concurrency=15", "--ops=50",
                         "--miss_fraction=1", "--algorithm=testing_wait", "--time_limit=1s",
                         "--attempts=1", "--expect_rejections"});
  std::printf("%s", load.out.c_str());
  EXPECT_EQ(load.exit_status, 0) << load.out << load.err;
  const std::map<std::string, double> summary = Summary(load.out);
  ASSERT_TRUE(summary.count("requests")) << load.out << load.err;
  EXPECT_EQ(summary.at("unexpected"), 0);
  EXPECT_GT(summary.at("rejected"), 0);
  // Rejected without waiting for a worker: faster than one job (1 s) even at the 99th percentile.
  EXPECT_LT(summary.at("rejected_p99_ms"), 1000);

  // Nothing lost: every call the server answered OK reached its caller, and the rest were rejected.
  absl::StatusOr<std::string> metrics = ScrapeMetrics((*server)->metrics_port());
  ASSERT_TRUE(metrics.ok());
  const double answered =
      MetricValue(*metrics, "placement_requests_total{code=\"OK\",method=\"Place\"}");
  const double unavailable =
      MetricValue(*metrics, "placement_requests_total{code=\"UNAVAILABLE\",method=\"Place\"}");
  EXPECT_EQ(answered + unavailable, summary.at("requests"));
  EXPECT_EQ(unavailable, summary.at("rejected"));
  EXPECT_EQ(MetricValue(*metrics, "placement_queue_depth"), 0);
  EXPECT_EQ(MetricValue(*metrics, "placement_jobs_running"), 0);
  StopServer(**server);
}

}  // namespace
}  // namespace placement::e2e
