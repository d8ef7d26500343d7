// placement_server — the placement service (api.md §3). Flags only; everything else is
// PlacementServer (placement_server.h).
//
//   placement_server --tls_cert=server.pem --tls_key=server.key --auth_tokens=/etc/placement/tokens
//   placement_server --insecure --port=50051 --metrics_port=9464     (plaintext: local use, tests)
//   placement_server --flagfile=/etc/placement/flags
//
// SIGTERM / SIGINT start a graceful shutdown (see placement_server.h) from a sigwait thread — never
// from a signal handler — and the process exits 0 once it is done. SIGHUP reloads the tokens file.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <grpc/support/log.h>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
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
ABSL_FLAG(int, max_recommend_candidates, 64,
          "Candidates one Recommend call may place (every count 1..max_devices with every "
          "data-parallel split: 8 devices give 20); more is INVALID_ARGUMENT naming max_devices.");
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
ABSL_FLAG(int64_t, max_decoding_bytes, int64_t{2} << 30,
          "Bound of the memory that requests being decoded and validated may take at once, "
          "estimated as 20x their wire size; a call that would exceed it gets UNAVAILABLE with a "
          "retry hint (a call alone is always admitted; 0 = unbounded).");
ABSL_FLAG(int64_t, grpc_memory_bytes, int64_t{1} << 30,
          "gRPC resource quota: bound of the memory gRPC's transports (read buffers of every "
          "connection) may take (0 = gRPC's default, unbounded).");
ABSL_FLAG(absl::Duration, max_connection_age, absl::ZeroDuration(),
          "Close connections after this age so clients re-resolve DNS (0 = never).");
ABSL_FLAG(absl::Duration, shutdown_drain_delay, absl::ZeroDuration(),
          "On SIGTERM: serve this long with health NOT_SERVING before refusing new work.");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(10),
          "On SIGTERM: how long in-flight calls may take before they are cancelled.");
ABSL_FLAG(bool, cache_time_limited, true,
          "Cache results that the time limit cut short.");
ABSL_FLAG(bool, recommend_second_round_within_budget, true,
          "A Recommend's second round (its contenders solved again) gets what the call's budget has "
          "left after the first round, less a tenth of it, or none: the call ends near its budget. "
          "false: a fixed share (15 % of the budget) whenever the first round ended (a call can end "
          "past its budget on a loaded machine).");
ABSL_FLAG(int64_t, repeat_index_bytes, int64_t{64} << 20,
          "Bound of the index that answers byte-identical repeat requests from the cache without "
          "re-validating them (0 disables it).");
ABSL_FLAG(bool, log_requests, true, "Log one line per request on stderr.");
ABSL_FLAG(bool, insecure, false,
          "Serve plaintext gRPC (local use and tests). Without it the server needs --tls_cert and "
          "--tls_key and refuses to start otherwise.");
ABSL_FLAG(std::string, tls_cert, "", "PEM file of the server's certificate chain (TLS).");
ABSL_FLAG(std::string, tls_key, "", "PEM file of the server's private key (TLS).");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM file of the CA(s) that sign client certificates: mutual TLS, every client must "
          "present a certificate this CA verifies.");
ABSL_FLAG(std::string, auth_tokens, "",
          "Tokens file (lines `TOKEN TENANT [max_running=N max_queued=N rate_qps=X burst=N]`, "
          "# comments): callers must send `authorization: Bearer TOKEN`; reloaded when it changes "
          "and on SIGHUP. Empty = no authentication (everyone is tenant \"\").");
ABSL_FLAG(absl::Duration, auth_tokens_poll, absl::Seconds(1),
          "How often the tokens file is checked for changes (on calls; 0 = on every call).");
ABSL_FLAG(int, tenant_max_running, 0,
          "Jobs one tenant may have on workers at once; more wait in the queue (0 = unlimited).");
ABSL_FLAG(int, tenant_max_queued, 0,
          "Jobs one tenant may have waiting for a worker; one more gets RESOURCE_EXHAUSTED with a "
          "retry hint (0 = unlimited).");
ABSL_FLAG(double, tenant_rate_qps, 0,
          "Calls per second one tenant may make on average; more get RESOURCE_EXHAUSTED with a "
          "retry hint (0 = unlimited).");
ABSL_FLAG(double, tenant_burst, 0,
          "Calls one tenant may make at once after a quiet period (0 = max(1, --tenant_rate_qps)).");
ABSL_FLAG(int64_t, max_ops, 2'000'000, "Most ops one graph may have (INVALID_ARGUMENT beyond).");
ABSL_FLAG(int64_t, max_edges, 8'000'000,
          "Most edges one graph may have (INVALID_ARGUMENT beyond).");
ABSL_FLAG(int32_t, max_devices, 1024,
          "Most devices one cluster may have (INVALID_ARGUMENT beyond).");
ABSL_FLAG(int64_t, max_name_bytes, 1024,
          "Longest op, device, type, kind, node or colocation-group name in bytes "
          "(INVALID_ARGUMENT beyond).");
ABSL_FLAG(std::string, redis, "",
          "Shared result cache tier behind the in-process cache: Redis at HOST:PORT (empty = none). "
          "Best effort: when Redis is down or slow the server serves from its own cache.");
ABSL_FLAG(absl::Duration, redis_ttl, absl::Hours(24),
          "Expiry of results stored in Redis (0 = none; then Redis's maxmemory policy evicts).");
ABSL_FLAG(int64_t, redis_max_value_bytes, int64_t{8} << 20,
          "Results larger than this (serialized) are not stored in Redis.");
ABSL_FLAG(absl::Duration, redis_timeout, absl::Milliseconds(50),
          "Bound of one Redis lookup or write (pool wait, connect and command); capped at half "
          "of --min_time_budget.");
ABSL_FLAG(int, redis_connections, 4, "Connections to Redis (a pool shared by all threads).");
ABSL_FLAG(int, offload_threads, 4,
          "With --redis: threads that start Place and SubmitPlacement calls (validation, cache "
          "lookups, admission), so that no gRPC thread waits for Redis; 0 = gRPC's threads.");
ABSL_FLAG(std::string, redis_key_prefix, "placement:",
          "Prefix of every Redis key (separates deployments sharing one Redis).");
ABSL_FLAG(absl::Duration, operation_lease, absl::Seconds(5),
          "With --redis: a job whose replica stops renewing its lease for this long (it died, or "
          "lost Redis) is taken over by another replica and finishes there under the same "
          "operation names, within about half a second after that. 1s..10s.");
ABSL_FLAG(absl::Duration, operation_poll_interval, absl::Milliseconds(100),
          "With --redis: how often a replica reads the state of operations another replica runs "
          "(for Wait and Watch through it). 10ms..10s.");
ABSL_FLAG(int64_t, operation_max_request_bytes, int64_t{8} << 20,
          "With --redis: requests larger than this (serialized) are not stored in Redis. Their "
          "operations are shared all the same, but no other replica can take their job over if "
          "this one dies (the operations then end ABORTED). 0 = store none.");
ABSL_FLAG(int64_t, operation_tenant_request_bytes, int64_t{64} << 20,
          "With --redis: bytes of requests one tenant may have stored in Redis at once (pending "
          "jobs, for takeovers); beyond it the tenant's requests are not stored, as above, so one "
          "tenant cannot crowd the others' records out of Redis (0 = unlimited).");
ABSL_FLAG(bool, testing_algorithms, false,
          "Offer the `testing_wait` algorithm, which holds a worker until cancelled or out of "
          "time, `testing_throw` (throws from the worker) and `testing_overrun` (ignores its time "
          "limit until cancelled); for end-to-end tests only.");

namespace {

constexpr char kUsage[] =
    "placement_server [flags]: the placement service (gRPC PlacementService, health, reflection,\n"
    "Prometheus metrics). Needs --tls_cert and --tls_key (TLS), or --insecure (plaintext).\n"
    "Logs `listening on HOST:PORT` when ready; SIGTERM/SIGINT shut it down gracefully (exit\n"
    "status 0); SIGHUP reloads the --auth_tokens file. Flags may come from --flagfile=FILE.\n";

// Reads each flag into its option and checks its range before anything starts, each flag in one
// line: a value outside its range is a failed start naming the flag (INVALID_ARGUMENT, exit status 1),
// never a server that fails every call or silently listens somewhere else (a port of 70000 would
// wrap around to 4464).
class FlagReader {
 public:
  // Flags without a range (strings, switches).
  template <typename T, typename Out>
  void Copy(const absl::Flag<T>& flag, Out* out) {
    *out = absl::GetFlag(flag);
  }
  // An integer in [lo, hi]; `meaning` explains the special values.
  template <typename T, typename Out>
  void Int(const absl::Flag<T>& flag, int64_t lo, int64_t hi, Out* out,
           absl::string_view meaning = "") {
    const T value = absl::GetFlag(flag);
    *out = static_cast<Out>(value);
    if (value >= lo && value <= hi) return;
    Fail(flag, absl::StrCat(value), absl::StrCat("must be in [", lo, ", ", hi, "]", meaning));
  }
  void Double(const absl::Flag<double>& flag, double lo, double hi, double* out) {
    *out = absl::GetFlag(flag);
    if (*out >= lo && *out <= hi) return;  // also false for NaN
    Fail(flag, absl::StrCat(*out), absl::StrCat("must be in [", lo, ", ", hi, "]"));
  }
  // A finite duration of at least `lo` (`allow_infinite`: +inf too).
  void DurationAtLeast(const absl::Flag<absl::Duration>& flag, absl::Duration lo,
                       absl::Duration* out, bool allow_infinite = false) {
    *out = absl::GetFlag(flag);
    if (*out == absl::InfiniteDuration() && allow_infinite) return;
    if (*out >= lo && *out != absl::InfiniteDuration()) return;
    Fail(flag, absl::FormatDuration(*out),
         absl::StrCat("must be a finite duration of at least ", absl::FormatDuration(lo)));
  }
  void DurationIn(const absl::Flag<absl::Duration>& flag, absl::Duration lo, absl::Duration hi,
                  absl::Duration* out) {
    *out = absl::GetFlag(flag);
    if (*out >= lo && *out <= hi) return;
    Fail(flag, absl::FormatDuration(*out),
         absl::StrCat("must be in [", absl::FormatDuration(lo), ", ", absl::FormatDuration(hi), "]"));
  }
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  template <typename T>
  void Fail(const absl::Flag<T>& flag, absl::string_view value, absl::string_view why) {
    errors_.push_back(
        absl::StrCat("--", absl::GetFlagReflectionHandle(flag).Name(), "=", value, ": ", why));
  }
  std::vector<std::string> errors_;
};

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

absl::StatusOr<placement::server::PlacementServerOptions> OptionsFromFlags() {
  placement::server::PlacementServerOptions o;
  FlagReader read;
  read.Copy(FLAGS_host, &o.host);
  read.Int(FLAGS_port, 0, 65535, &o.port, " (0 = any free port)");
  read.Int(FLAGS_metrics_port, -1, 65535, &o.metrics_port, " (0 = any free port, -1 = none)");
  read.Int(FLAGS_workers, 0, 4096, &o.workers, " (0 = the CPU quota)");
  read.Int(FLAGS_cache_bytes, 0, kInt64Max, &o.cache_bytes, " (0 = no cache)");
  read.Int(FLAGS_max_queued_jobs, 1, kInt32Max, &o.max_queued_jobs);
  read.Int(FLAGS_max_recommend_candidates, 1, 4096, &o.core.max_recommend_candidates);
  read.Int(FLAGS_job_memory_budget_bytes, 1, kInt64Max, &o.job_memory_budget_bytes);
  read.DurationAtLeast(FLAGS_default_time_limit, absl::Milliseconds(1),
                       &o.core.default_time_limit);
  read.DurationAtLeast(FLAGS_max_time_limit, absl::Milliseconds(1), &o.core.max_time_limit);
  read.DurationAtLeast(FLAGS_min_time_budget, absl::ZeroDuration(), &o.min_time_budget);
  read.DurationAtLeast(FLAGS_retry_delay, absl::Milliseconds(1), &o.retry_delay);
  read.DurationAtLeast(FLAGS_operation_ttl, absl::Seconds(1), &o.operation_ttl);
  read.Int(FLAGS_max_operations, 1, kInt32Max, &o.max_operations);
  read.DurationAtLeast(FLAGS_max_wait_timeout, absl::Milliseconds(1), &o.max_wait_timeout);
  read.Int(FLAGS_max_message_bytes, 1024, kInt32Max, &o.max_message_bytes);
  read.Int(FLAGS_max_decoding_bytes, 0, kInt64Max, &o.max_decoding_bytes, " (0 = unbounded)");
  read.Int(FLAGS_grpc_memory_bytes, 0, kInt64Max, &o.grpc_memory_bytes, " (0 = gRPC's default)");
  read.DurationAtLeast(FLAGS_max_connection_age, absl::ZeroDuration(), &o.max_connection_age);
  read.DurationAtLeast(FLAGS_shutdown_drain_delay, absl::ZeroDuration(), &o.shutdown_drain_delay);
  read.DurationAtLeast(FLAGS_shutdown_grace, absl::ZeroDuration(), &o.shutdown_grace);
  read.Copy(FLAGS_cache_time_limited, &o.core.cache_time_limited_results);
  read.Copy(FLAGS_recommend_second_round_within_budget, &o.core.recommend_second_round_within_budget);
  read.Int(FLAGS_repeat_index_bytes, 0, kInt64Max, &o.core.repeat_index_bytes,
           " (0 = no repeat index)");
  read.Copy(FLAGS_log_requests, &o.log_requests);
  read.Copy(FLAGS_insecure, &o.security.insecure);
  read.Copy(FLAGS_tls_cert, &o.security.cert_file);
  read.Copy(FLAGS_tls_key, &o.security.key_file);
  read.Copy(FLAGS_tls_client_ca, &o.security.client_ca_file);
  read.Copy(FLAGS_auth_tokens, &o.auth_tokens_file);
  read.DurationAtLeast(FLAGS_auth_tokens_poll, absl::ZeroDuration(), &o.auth_tokens_poll);
  read.Int(FLAGS_tenant_max_running, 0, kInt32Max, &o.tenant_limits.jobs.max_running,
           " (0 = unlimited)");
  read.Int(FLAGS_tenant_max_queued, 0, kInt32Max, &o.tenant_limits.jobs.max_queued,
           " (0 = unlimited)");
  read.Double(FLAGS_tenant_rate_qps, 0, 1e9, &o.tenant_limits.rate_qps);
  read.Double(FLAGS_tenant_burst, 0, 1e9, &o.tenant_limits.burst);
  read.Int(FLAGS_max_ops, 1, kInt32Max, &o.core.model_limits.max_ops);
  read.Int(FLAGS_max_edges, 0, kInt32Max, &o.core.model_limits.max_edges);
  read.Int(FLAGS_max_devices, 1, kInt32Max, &o.core.model_limits.max_devices);
  read.Int(FLAGS_max_name_bytes, 1, kInt32Max, &o.core.model_limits.max_name_bytes);
  read.Copy(FLAGS_redis, &o.redis_address);
  read.DurationAtLeast(FLAGS_redis_ttl, absl::ZeroDuration(), &o.redis.ttl,
                       /*allow_infinite=*/true);
  read.Int(FLAGS_redis_max_value_bytes, 1, kInt64Max, &o.redis.max_value_bytes);
  read.DurationAtLeast(FLAGS_redis_timeout, absl::Milliseconds(1), &o.redis.timeout);
  read.Int(FLAGS_redis_connections, 1, 1024, &o.redis.connections);
  read.Int(FLAGS_offload_threads, 0, 1024, &o.offload_threads);
  read.Copy(FLAGS_redis_key_prefix, &o.redis.key_prefix);
  read.DurationIn(FLAGS_operation_lease, absl::Seconds(1), absl::Seconds(10),
                  &o.shared_operations.lease);
  read.DurationIn(FLAGS_operation_poll_interval, absl::Milliseconds(10), absl::Seconds(10),
                  &o.shared_operations.poll_interval);
  read.Int(FLAGS_operation_max_request_bytes, 0, kInt64Max, &o.shared_operations.max_request_bytes,
           " (0 = store no request)");
  read.Int(FLAGS_operation_tenant_request_bytes, 0, kInt64Max,
           &o.shared_operations.tenant_request_bytes, " (0 = unlimited)");
  read.Copy(FLAGS_testing_algorithms, &o.testing_algorithms);
  if (!read.errors().empty()) {
    return absl::InvalidArgumentError(absl::StrJoin(read.errors(), "; "));
  }
  if (o.core.default_time_limit > o.core.max_time_limit) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--default_time_limit=", absl::FormatDuration(o.core.default_time_limit),
        ": must not exceed --max_time_limit=", absl::FormatDuration(o.core.max_time_limit)));
  }
  return o;
}

// gRPC's own log lines ("E0101 12:00:00.000 chttp2_server.cc:...] ... Address already in use") during
// start-up repeat, in a format of their own, what the one line of a failed start says: they are
// dropped until the server is up, then written through LogLine like every other line. An operator
// who sets GRPC_VERBOSITY gets gRPC's own logging untouched.
std::atomic<bool> grpc_log_quiet{true};

void RouteGrpcLog() {
  if (std::getenv("GRPC_VERBOSITY") != nullptr) return;
  gpr_set_log_function([](gpr_log_func_args* args) {
    if (grpc_log_quiet.load(std::memory_order_relaxed)) return;
    const char* severity = args->severity == GPR_LOG_SEVERITY_ERROR  ? "E"
                           : args->severity == GPR_LOG_SEVERITY_INFO ? "I"
                                                                     : "D";
    placement::server::LogLine(
        absl::StrCat("grpc ", severity, " ", args->file, ":", args->line, "] ", args->message));
  });
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  absl::ParseCommandLine(argc, argv);
  absl::StatusOr<placement::server::PlacementServerOptions> options = OptionsFromFlags();
  if (!options.ok()) {
    std::fprintf(stderr, "%s: %s\n", absl::StatusCodeToString(options.status().code()).c_str(),
                 std::string(options.status().message()).c_str());
    return 1;
  }

  // Block the shutdown and reload signals before any thread exists, so that every thread inherits
  // the mask and only the sigwait thread below receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  RouteGrpcLog();
  placement::server::PlacementServer server(*std::move(options));
  if (absl::Status started = server.Start(); !started.ok()) {
    std::fprintf(stderr, "%s: %s\n", absl::StatusCodeToString(started.code()).c_str(),
                 std::string(started.message()).c_str());
    return 1;
  }
  grpc_log_quiet.store(false, std::memory_order_relaxed);

  std::thread signal_thread([&server, signals] {
    while (true) {
      int received = 0;
      sigwait(&signals, &received);
      if (received == SIGHUP) {
        placement::server::LogLine("received SIGHUP: reloading the tokens file");
        if (absl::Status reloaded = server.ReloadAuthTokens(); !reloaded.ok()) {
          placement::server::LogLine(
              absl::StrCat("reload failed: ", reloaded.message()));
        }
        continue;
      }
      placement::server::LogLine(
          absl::StrCat("received ", received == SIGTERM ? "SIGTERM" : "SIGINT"));
      server.Shutdown();
      return;
    }
  });
  server.Wait();
  signal_thread.join();
  return 0;
}
