// placement_server.h — the placement server: gRPC (PlacementService, health, reflection), the metrics
// endpoint, and everything behind them, with an orderly shutdown.
//
// Start() checks the transport security (TLS, mutual TLS, or plaintext only with `insecure`), binds
// both ports (0 = pick a free one) and logs `listening on <host:port>` and
// `metrics on <host:port>`. Shutdown() (called from main's signal thread on SIGTERM/SIGINT):
//   1. health → NOT_SERVING for "" and placement.v1.PlacementService;
//   2. keep serving for `shutdown_drain_delay` (load balancers move away);
//   3. stop admitting jobs (UNAVAILABLE) and end long waits (WaitOperation returns, WatchOperation
//      streams end with UNAVAILABLE); with a shared operations store (--redis), hand the jobs this
//      replica runs for the cluster back at once (on a thread of its own, so that a Redis that does
//      not answer delays nothing), so another replica takes them over (same operation names) instead
//      of waiting for their leases to expire;
//   4. grpc::Server::Shutdown(grace end): in-flight calls finish; at the end of the grace the calls
//      still waiting are answered UNAVAILABLE ("the server is shutting down ...; retry", RetryInfo)
//      and their jobs released (logged only when there were some); gRPC cancels what is left shortly
//      after;
//   5. close the Redis connections (round trips still waiting end now), cancel the remaining jobs,
//      join the workers, stop the metrics endpoint; Wait() returns. All of it within
//      shutdown_drain_delay + shutdown_grace + about half a second, whatever Redis does.
// main() blocks SIGTERM/SIGINT before any thread starts and receives them on a sigwait thread:
// calling grpc::Server::Shutdown from a signal handler can deadlock.
//
// Example:
//   PlacementServer server(options);
//   if (absl::Status started = server.Start(); !started.ok()) return 1;
//   ... on SIGTERM: server.Shutdown();
//   server.Wait();
#ifndef PLACEMENT_SERVICE_SERVER_PLACEMENT_SERVER_H_
#define PLACEMENT_SERVICE_SERVER_PLACEMENT_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "service/server/tenant_limits.h"
#include "service/server/access_control.h"
#include "service/server/auth_tokens.h"
#include "service/cache/redis_client.h"
#include "service/cache/redis_result_cache.h"
#include "service/core/placement_core.h"
#include "service/server/placement_service.h"
#include "service/server/transport_security.h"
#include "service/shared_ops/operation_coordinator.h"
#include "service/shared_ops/operation_store.h"

namespace grpc {
class Server;
}  // namespace grpc
namespace prometheus {
class Exposer;
}  // namespace prometheus

namespace placement::cache {
class LruResultCache;
class TieredResultCache;
}  // namespace placement::cache

namespace placement::server {

struct PlacementServerOptions {
  // Address both ports bind to.
  std::string host = "0.0.0.0";
  // gRPC port; 0 = any free port (see port()).
  int port = 50051;
  // Prometheus port (/metrics); 0 = any free port; -1 = no metrics endpoint.
  int metrics_port = 9464;
  // Worker threads; 0 = the cgroup CPU quota, else the hardware's threads.
  int workers = 0;
  // Bound of the in-process result cache, in bytes (0 = no cache).
  int64_t cache_bytes = int64_t{256} << 20;
  // Jobs that may wait for a worker.
  int max_queued_jobs = 64;
  // Estimated memory of all queued and running jobs.
  int64_t job_memory_budget_bytes = int64_t{4} << 30;
  // Callers whose deadline leaves less than this get DEADLINE_EXCEEDED at once.
  absl::Duration min_time_budget = absl::Milliseconds(100);
  // Retry hint sent with UNAVAILABLE.
  absl::Duration retry_delay = absl::Seconds(1);
  // Finished operations stay visible this long.
  absl::Duration operation_ttl = absl::Minutes(15);
  size_t max_operations = 100'000;
  // Longest WaitOperation call.
  absl::Duration max_wait_timeout = absl::Minutes(5);
  // Largest request or response message, in bytes (both directions).
  int max_message_bytes = 256 << 20;
  // Estimated memory (20x the wire size) of requests being decoded and validated at once; a call that
  // would exceed it gets UNAVAILABLE + RetryInfo (a call alone always fits). 0 = unbounded.
  int64_t max_decoding_bytes = int64_t{2} << 30;
  // gRPC resource quota over its transports' buffers (0 = gRPC's default).
  int64_t grpc_memory_bytes = int64_t{1} << 30;
  // Connections are closed (gracefully) after this age so clients re-resolve; zero = never.
  absl::Duration max_connection_age = absl::ZeroDuration();
  // Shutdown: time serving with health NOT_SERVING before refusing work, then grace for in-flight calls.
  absl::Duration shutdown_drain_delay = absl::ZeroDuration();
  absl::Duration shutdown_grace = absl::Seconds(10);
  // One log line per request.
  bool log_requests = true;
  // Offer the testing_* algorithms (end-to-end tests only).
  bool testing_algorithms = false;
  // TLS / mTLS / explicit plaintext. Start() refuses to serve with none of them.
  TransportSecurityOptions security;
  // Tokens file (auth_tokens.h); "" = no authentication, everyone is tenant "".
  std::string auth_tokens_file;
  // How often the tokens file is checked for changes (on calls; 0 = every call).
  absl::Duration auth_tokens_poll = absl::Seconds(1);
  // Every tenant's limits unless the tokens file overrides them (tenant_limits.h; 0 = unlimited).
  TenantLimits tenant_limits;
  // Shared cache tier behind the in-process cache: Redis at "HOST:PORT"; empty = none. `redis` holds
  // the rest of its options (its host and port are taken from redis_address). Its timeout is capped
  // at half of min_time_budget, so a slow Redis cannot eat the deadline of a call that was admitted.
  std::string redis_address;
  cache::RedisCacheOptions redis;
  // With a redis_address: Place and SubmitPlacement start (validation, cache lookups, admission) on
  // this many service threads, so that no gRPC thread waits for Redis; 0 = on gRPC's threads.
  int offload_threads = 4;
  // With a redis_address: long-running operations are shared by every replica through the same Redis
  // (service/shared_ops/): lease (--operation_lease) and poll_interval (--operation_poll_interval) are
  // taken from here; the TTLs, key prefix and retry hint from the options above.
  shared_ops::CoordinatorOptions shared_operations;
  core::PlacementCoreOptions core;
};

class PlacementServer {
 public:
  explicit PlacementServer(PlacementServerOptions options);
  // Shuts down first if still running.
  ~PlacementServer();
  PlacementServer(const PlacementServer&) = delete;
  PlacementServer& operator=(const PlacementServer&) = delete;

  // Binds and starts serving. UNAVAILABLE when a port cannot be bound; INVALID_ARGUMENT for a
  // contradictory security configuration (or none: neither TLS files nor `insecure`); NOT_FOUND /
  // INVALID_ARGUMENT for unreadable or invalid certificate, key or tokens files.
  // INVALID_ARGUMENT for a malformed redis_address or one where something other than Redis (7.0 or
  // newer) answers, FAILED_PRECONDITION for a Redis that wants a password (an unreachable Redis is
  // not an error, only logged: the shared tier is best effort).
  absl::Status Start();
  // Re-reads the tokens file now (SIGHUP). FAILED_PRECONDITION without one; on a bad file the
  // previous tokens stay in force and the error is returned.
  absl::Status ReloadAuthTokens();
  // The bound ports (valid after Start()); metrics_port() is -1 without a metrics endpoint.
  int port() const { return port_; }
  int metrics_port() const { return metrics_port_; }

  // The graceful shutdown described above. Idempotent; blocks until done.
  void Shutdown();
  // Blocks until Shutdown() has completed.
  void Wait();

  ServiceMetrics& metrics() { return *metrics_; }

 private:
  // Stops the Prometheus endpoint (at the end of a shutdown) in milliseconds.
  void StopMetricsEndpoint();

  const PlacementServerOptions options_;
  std::unique_ptr<ServiceMetrics> metrics_;
  std::unique_ptr<engine::AlgorithmRegistry> algorithms_;
  std::unique_ptr<cache::LruResultCache> cache_;
  // With a redis_address: the shared tier and the tiering wrapper the core uses (declared before
  // jobs_ so that they outlive the workers that write to them).
  std::unique_ptr<cache::RedisResultCache> redis_;
  std::unique_ptr<cache::TieredResultCache> tiered_;
  std::unique_ptr<jobs::JobManager> jobs_;
  std::unique_ptr<jobs::OperationRegistry> operations_;
  std::unique_ptr<core::PlacementCore> core_;
  // With a redis_address: shared operations (declared after jobs_, operations_ and core_, so that the
  // coordinator's thread stops before they go away).
  std::unique_ptr<shared_ops::RedisClient> shared_redis_;
  std::unique_ptr<shared_ops::RedisClient> background_redis_;
  std::unique_ptr<shared_ops::OperationStore> shared_store_;
  std::unique_ptr<shared_ops::OperationStore> background_store_;
  std::unique_ptr<shared_ops::OperationCoordinator> coordinator_;
  std::string replica_id_;
  std::unique_ptr<RequestLog> log_;
  std::unique_ptr<TokenAuthenticator> authenticator_;
  absl::Status authenticator_status_;
  std::unique_ptr<AccessControl> access_;
  std::unique_ptr<PlacementServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
  int metrics_port_ = -1;

  absl::Mutex shutdown_mu_;
  bool started_ = false;
  bool shut_down_ = false;
  absl::Notification shutdown_done_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVICE_SERVER_PLACEMENT_SERVER_H_
