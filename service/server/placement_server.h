// placement_server.h — the placement server: gRPC (PlacementService, health, reflection), the metrics
// endpoint, and everything behind them, with an orderly shutdown.
//
// Start() binds both ports (0 = pick a free one) and logs `listening on <host:port>` and
// `metrics on <host:port>`. Shutdown() (called from main's signal thread on SIGTERM/SIGINT):
//   1. health → NOT_SERVING for "" and placement.v1.PlacementService;
//   2. keep serving for `shutdown_drain_delay` (load balancers move away);
//   3. stop admitting jobs (UNAVAILABLE) and end long waits (WaitOperation returns, WatchOperation
//      streams end with UNAVAILABLE);
//   4. grpc::Server::Shutdown(now + shutdown_grace): in-flight calls finish; after the grace the rest
//      are cancelled (their jobs are released);
//   5. cancel the remaining jobs and join the workers; Wait() returns.
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
#include "service/server/placement_core.h"
#include "service/server/placement_service.h"

namespace grpc {
class Server;
}  // namespace grpc
namespace prometheus {
class Exposer;
}  // namespace prometheus

namespace placement::cache {
class LruResultCache;
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
  // Connections are closed (gracefully) after this age so clients re-resolve; zero = never.
  absl::Duration max_connection_age = absl::ZeroDuration();
  // Shutdown: time serving with health NOT_SERVING before refusing work, then grace for in-flight calls.
  absl::Duration shutdown_drain_delay = absl::ZeroDuration();
  absl::Duration shutdown_grace = absl::Seconds(10);
  // One log line per request.
  bool log_requests = true;
  // Offer the testing_* algorithms (end-to-end tests only).
  bool testing_algorithms = false;
  PlacementCoreOptions core;
};

class PlacementServer {
 public:
  explicit PlacementServer(PlacementServerOptions options);
  // Shuts down first if still running.
  ~PlacementServer();
  PlacementServer(const PlacementServer&) = delete;
  PlacementServer& operator=(const PlacementServer&) = delete;

  // Binds and starts serving. UNAVAILABLE when a port cannot be bound.
  absl::Status Start();
  // The bound ports (valid after Start()); metrics_port() is -1 without a metrics endpoint.
  int port() const { return port_; }
  int metrics_port() const { return metrics_port_; }

  // The graceful shutdown described above. Idempotent; blocks until done.
  void Shutdown();
  // Blocks until Shutdown() has completed.
  void Wait();

  ServiceMetrics& metrics() { return *metrics_; }

 private:
  const PlacementServerOptions options_;
  std::unique_ptr<ServiceMetrics> metrics_;
  std::unique_ptr<AlgorithmCatalog> catalog_;
  std::unique_ptr<cache::LruResultCache> cache_;
  std::unique_ptr<jobs::JobManager> jobs_;
  std::unique_ptr<jobs::OperationRegistry> operations_;
  std::unique_ptr<PlacementCore> core_;
  std::unique_ptr<RequestLog> log_;
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
