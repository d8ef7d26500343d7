// placement_service.h — the gRPC adapter: PlacementService on the callback API, over PlacementCore.
//
// Handlers decode, ask the core and return a reactor at once; they never block gRPC's threads. Work runs
// on the JobManager's workers, and whichever thread completes a job finishes the waiting calls:
//   Place / Evaluate   a unary reactor waits for its job; if the caller goes away (cancel, deadline) it
//                      releases the job, which stops only when nobody else waits for it.
//   SubmitPlacement, GetOperation, CancelOperation, ListAlgorithms   answered in the handler.
//   WaitOperation      finishes when the operation is done, its timeout (capped by the call's deadline
//                      and max_wait_timeout) passes, or the server drains — always with the current state.
//   WatchOperation     streams the operation: the current state at once, then every change (at most one
//                      write in flight; changes during a write are merged), the last message done = true.
// Every call first passes AccessControl (UNAUTHENTICATED without a valid `authorization: Bearer` token
// when tokens are configured; RESOURCE_EXHAUSTED over the tenant's request rate); the tenant it yields
// scopes operations (another tenant's are NOT_FOUND) and the fair queue. Every call ends with one log
// line and the request metrics (method, code, latency).
//
// Example:
//   PlacementServiceImpl service(&core, &metrics, &log, {});
//   builder.RegisterService(&service);
//   ...
//   service.Drain();  // at shutdown: Wait calls return, Watch streams end with UNAVAILABLE
#ifndef PLACEMENT_SERVICE_SERVER_PLACEMENT_SERVICE_H_
#define PLACEMENT_SERVICE_SERVER_PLACEMENT_SERVICE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "placement/v1/placement_service.grpc.pb.h"
#include "service/server/access_control.h"
#include "service/server/offload_pool.h"
#include "service/server/placement_core.h"
#include "service/server/request_log.h"
#include "service/server/service_metrics.h"

namespace placement::server {

class CallRecord;  // placement_service.cc: times one call and reports it when it ends

struct PlacementServiceOptions {
  // Longest a WaitOperation call waits (also when it sets no timeout and has no deadline).
  absl::Duration max_wait_timeout = absl::Minutes(5);
  // Authentication and the per-tenant rate limit of every call (null: everyone is tenant "",
  // unlimited). Must outlive the service.
  AccessControl* access = nullptr;
  // Place and SubmitPlacement start (validation, cache lookups, admission) on this many threads of the
  // service's own instead of gRPC's callback thread: set when a shared cache tier is configured, whose
  // lookups may wait on the network for up to its timeout. 0 = start on gRPC's thread.
  int offload_threads = 0;
  // Calls waiting for an offload thread; one more is answered UNAVAILABLE with RetryInfo.
  size_t offload_max_queued = 1024;
  absl::Duration retry_delay = absl::Seconds(1);
};

// Tells long waits (WaitOperation, WatchOperation) that the server is draining. Thread-safe.
class DrainSignal {
 public:
  // Returns 0 without subscribing when already fired (the caller reacts at once).
  uint64_t Subscribe(std::function<void()> on_drain) ABSL_LOCKS_EXCLUDED(mu_);
  void Unsubscribe(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);
  void Fire() ABSL_LOCKS_EXCLUDED(mu_);
  bool fired() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  bool fired_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::vector<std::pair<uint64_t, std::function<void()>>> subscribers_ ABSL_GUARDED_BY(mu_);
};

class PlacementServiceImpl final : public v1::PlacementService::CallbackService {
 public:
  // Everything passed must outlive the service; `metrics` may be null.
  PlacementServiceImpl(PlacementCore* core, ServiceMetrics* metrics, const RequestLog* log,
                       PlacementServiceOptions options);

  // From now on WaitOperation returns the current state at once and WatchOperation streams end with
  // UNAVAILABLE (the server is going away; long waits should not hold up its shutdown).
  void Drain();

  grpc::ServerUnaryReactor* Place(grpc::CallbackServerContext* context,
                                  const v1::PlaceRequest* request,
                                  v1::PlaceResponse* response) override;
  grpc::ServerUnaryReactor* SubmitPlacement(grpc::CallbackServerContext* context,
                                            const v1::SubmitPlacementRequest* request,
                                            v1::SubmitPlacementResponse* response) override;
  grpc::ServerUnaryReactor* GetOperation(grpc::CallbackServerContext* context,
                                         const v1::GetOperationRequest* request,
                                         v1::GetOperationResponse* response) override;
  grpc::ServerUnaryReactor* WaitOperation(grpc::CallbackServerContext* context,
                                          const v1::WaitOperationRequest* request,
                                          v1::WaitOperationResponse* response) override;
  grpc::ServerUnaryReactor* CancelOperation(grpc::CallbackServerContext* context,
                                            const v1::CancelOperationRequest* request,
                                            v1::CancelOperationResponse* response) override;
  grpc::ServerWriteReactor<v1::WatchOperationResponse>* WatchOperation(
      grpc::CallbackServerContext* context, const v1::WatchOperationRequest* request) override;
  grpc::ServerUnaryReactor* Evaluate(grpc::CallbackServerContext* context,
                                     const v1::EvaluateRequest* request,
                                     v1::EvaluateResponse* response) override;
  grpc::ServerUnaryReactor* ListAlgorithms(grpc::CallbackServerContext* context,
                                           const v1::ListAlgorithmsRequest* request,
                                           v1::ListAlgorithmsResponse* response) override;

  // Internals shared with the reactors (placement_service.cc).
  PlacementCore& core() { return *core_; }
  DrainSignal& drain() { return drain_; }
  const PlacementServiceOptions& options() const { return options_; }
  void Record(const RpcLogEntry& entry);
  // The caller's tenant (AccessControl::Admit on its `authorization` metadata).
  absl::StatusOr<std::string> Admit(const grpc::CallbackServerContext* context);
  // Where Place and SubmitPlacement start; null = on gRPC's thread (see offload_threads).
  OffloadPool* offload() { return offload_.get(); }
  // UNAVAILABLE with RetryInfo: the offload queue is full.
  absl::Status OffloadQueueFull() const;

 private:
  // The body of SubmitPlacement; finishes `reactor` (the call's default reactor).
  void Submit(grpc::CallbackServerContext* context, const v1::SubmitPlacementRequest* request,
              v1::SubmitPlacementResponse* response, grpc::ServerUnaryReactor* reactor,
              CallRecord& record);

  PlacementCore* const core_;
  ServiceMetrics* const metrics_;
  const RequestLog* const log_;
  const PlacementServiceOptions options_;
  DrainSignal drain_;
  // Last member: destroyed (and joined) first, while everything its tasks use still exists.
  std::unique_ptr<OffloadPool> offload_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVICE_SERVER_PLACEMENT_SERVICE_H_
