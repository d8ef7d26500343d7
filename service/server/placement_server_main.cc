// placement_server — the placement service (api.md §3). Flags only; everything else is
// PlacementServer (placement_server.h).
//
//   placement_server --port=50051 --metrics_port=9464 --workers=0 --cache_bytes=268435456
//   placement_server --flagfile=/etc/placement/flags
//
// SIGTERM / SIGINT start a graceful shutdown (see placement_server.h) from a sigwait thread — never
// from a signal handler — and the process exits 0 once it is done.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "service/server/placement_server.h"
#include "service/server/request_log.h"

ABSL_FLAG(std::string, host, "0.0.0.0", "Address the gRPC and metrics ports bind to.");
ABSL_FLAG(int, port, 50051, "gRPC port; 0 = pick a free port (logged as `listening on HOST:PORT`).");
ABSL_FLAG(int, metrics_port, 9464,
          "Prometheus /metrics port; 0 = pick a free port (logged as `metrics on HOST:PORT`); "
          "-1 = no metrics endpoint.");
ABSL_FLAG(int, workers, 0,
          "Worker threads running placement jobs; 0 = the cgroup v2 CPU quota "
          "(/sys/fs/cgroup/cpu.max), else the hardware's threads.");
ABSL_FLAG(int64_t, cache_bytes, int64_t{256} << 20,
          "Bound of the in-process result cache in bytes (0 disables it).");
ABSL_FLAG(int, max_queued_jobs, 64,
          "Jobs that may wait for a worker; one more gets UNAVAILABLE with a retry hint.");
ABSL_FLAG(int64_t, job_memory_budget_bytes, int64_t{4} << 30,
          "Budget for the estimated memory of all queued and running jobs; a job that would "
          "exceed it gets UNAVAILABLE (a job alone is always admitted).");
ABSL_FLAG(absl::Duration, default_time_limit, absl::Seconds(60),
          "Time limit of a placement whose request sets none.");
ABSL_FLAG(absl::Duration, max_time_limit, absl::Minutes(10), "Upper bound of any time limit.");
ABSL_FLAG(absl::Duration, min_time_budget, absl::Milliseconds(100),
          "A Place call whose deadline leaves less than this gets DEADLINE_EXCEEDED at once.");
ABSL_FLAG(absl::Duration, retry_delay, absl::Seconds(1),
          "Retry hint (RetryInfo) sent with UNAVAILABLE.");
ABSL_FLAG(absl::Duration, operation_ttl, absl::Minutes(15),
          "How long a finished operation stays visible to GetOperation / WaitOperation.");
ABSL_FLAG(int64_t, max_operations, 100000, "Operations kept at once (pending + finished).");
ABSL_FLAG(absl::Duration, max_wait_timeout, absl::Minutes(5), "Longest WaitOperation call.");
ABSL_FLAG(int, max_message_bytes, 256 << 20,
          "Largest request or response message in bytes (gRPC's default is 4 MiB; large graphs "
          "are tens of MB).");
ABSL_FLAG(absl::Duration, max_connection_age, absl::ZeroDuration(),
          "Close connections after this age so clients re-resolve DNS (0 = never).");
ABSL_FLAG(absl::Duration, shutdown_drain_delay, absl::ZeroDuration(),
          "On SIGTERM: serve this long with health NOT_SERVING before refusing new work.");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(10),
          "On SIGTERM: how long in-flight calls may take before they are cancelled.");
ABSL_FLAG(bool, cache_time_limited, true,
          "Cache results that the time limit cut short.");
ABSL_FLAG(int64_t, repeat_index_bytes, int64_t{64} << 20,
          "Bound of the index that answers byte-identical repeat requests from the cache without "
          "re-validating them (0 disables it).");
ABSL_FLAG(bool, log_requests, true, "Log one line per request on stderr.");
ABSL_FLAG(bool, testing_algorithms, false,
          "Offer the `testing_wait` algorithm, which holds a worker until cancelled or out of "
          "time, `testing_throw` (throws from the worker) and `testing_overrun` (ignores its time "
          "limit until cancelled); for end-to-end tests only.");

namespace {

constexpr char kUsage[] =
    "placement_server [flags]: the placement service (gRPC PlacementService, health, reflection,\n"
    "Prometheus metrics). Logs `listening on HOST:PORT` when ready; SIGTERM/SIGINT shut it down\n"
    "gracefully (exit status 0). Flags may come from a file with --flagfile=FILE.\n";

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  absl::ParseCommandLine(argc, argv);

  // Block the shutdown signals before any thread exists, so that every thread inherits the mask and
  // only the sigwait thread below receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  placement::server::PlacementServerOptions options;
  options.host = absl::GetFlag(FLAGS_host);
  options.port = absl::GetFlag(FLAGS_port);
  options.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  options.workers = absl::GetFlag(FLAGS_workers);
  options.cache_bytes = absl::GetFlag(FLAGS_cache_bytes);
  options.max_queued_jobs = absl::GetFlag(FLAGS_max_queued_jobs);
  options.job_memory_budget_bytes = absl::GetFlag(FLAGS_job_memory_budget_bytes);
  options.min_time_budget = absl::GetFlag(FLAGS_min_time_budget);
  options.retry_delay = absl::GetFlag(FLAGS_retry_delay);
  options.operation_ttl = absl::GetFlag(FLAGS_operation_ttl);
  options.max_operations = static_cast<size_t>(absl::GetFlag(FLAGS_max_operations));
  options.max_wait_timeout = absl::GetFlag(FLAGS_max_wait_timeout);
  options.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  options.max_connection_age = absl::GetFlag(FLAGS_max_connection_age);
  options.shutdown_drain_delay = absl::GetFlag(FLAGS_shutdown_drain_delay);
  options.shutdown_grace = absl::GetFlag(FLAGS_shutdown_grace);
  options.log_requests = absl::GetFlag(FLAGS_log_requests);
  options.testing_algorithms = absl::GetFlag(FLAGS_testing_algorithms);
  options.core.default_time_limit = absl::GetFlag(FLAGS_default_time_limit);
  options.core.max_time_limit = absl::GetFlag(FLAGS_max_time_limit);
  options.core.cache_time_limited_results = absl::GetFlag(FLAGS_cache_time_limited);
  options.core.fingerprint_bytes = absl::GetFlag(FLAGS_repeat_index_bytes);

  placement::server::PlacementServer server(options);
  if (absl::Status started = server.Start(); !started.ok()) {
    std::fprintf(stderr, "%s: %s\n", absl::StatusCodeToString(started.code()).c_str(),
                 std::string(started.message()).c_str());
    return 1;
  }

  std::thread signal_thread([&server, signals] {
    int received = 0;
    sigwait(&signals, &received);
    placement::server::LogLine(
        absl::StrCat("received ", received == SIGTERM ? "SIGTERM" : "SIGINT"));
    server.Shutdown();
  });
  server.Wait();
  signal_thread.join();
  return 0;
}
