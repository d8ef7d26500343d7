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
// Every call first passes AccessControl, from its metadata and before its message is decoded (UNAUTHENTICATED without a valid `authorization: Bearer` token
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

#include <atomic>
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
#include "service/core/placement_core.h"
#include "service/server/access_control.h"
#include "service/server/decoding_budget.h"
#include "service/server/drain_signal.h"
#include "service/server/offload_pool.h"
#include "service/server/request_log.h"
#include "service/server/service_metrics.h"

namespace placement::server {

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
  // Estimated memory (kDecodedBytesPerWireByte x wire size) of the requests being decoded and
  // validated at once; a call that would exceed it gets UNAVAILABLE + RetryInfo (a call alone always
  // fits). 0 = unbounded.
  int64_t max_decoding_bytes = 0;
};

// Every method is registered on gRPC's raw (ByteBuffer) callback API: the caller is authenticated from
// its metadata before its message is decoded (an unauthenticated 20 MB body never becomes a 400 MB
// message), the decoding memory is bounded by a DecodingBudget, and a body that does not parse is
// INVALID_ARGUMENT with a message (gRPC's own decoding answers UNIMPLEMENTED with none).
using RawPlacementService = v1::PlacementService::WithRawCallbackMethod_Place<
    v1::PlacementService::WithRawCallbackMethod_SubmitPlacement<
        v1::PlacementService::WithRawCallbackMethod_GetOperation<
            v1::PlacementService::WithRawCallbackMethod_WaitOperation<
                v1::PlacementService::WithRawCallbackMethod_CancelOperation<
                    v1::PlacementService::WithRawCallbackMethod_WatchOperation<
                        v1::PlacementService::WithRawCallbackMethod_Evaluate<
                            v1::PlacementService::WithRawCallbackMethod_ListAlgorithms<
                                v1::PlacementService::WithRawCallbackMethod_Recommend<
                                    v1::PlacementService::Service>>>>>>>>>;

class PlacementServiceImpl final : public RawPlacementService {
 public:
  // Everything passed must outlive the service; `metrics` may be null.
  PlacementServiceImpl(core::PlacementCore* core, ServiceMetrics* metrics, const RequestLog* log,
                       PlacementServiceOptions options);

  // From now on WaitOperation returns the current state at once and WatchOperation streams end with
  // UNAVAILABLE (the server is going away; long waits should not hold up its shutdown).
  void Drain();
  // At the end of the shutdown grace: Place and Evaluate calls still waiting for a job are answered
  // UNAVAILABLE ("the server is shutting down", RetryInfo) and release their jobs. Returns how many.
  size_t AbortWaits();

  grpc::ServerUnaryReactor* Place(grpc::CallbackServerContext* context,
                                  const grpc::ByteBuffer* request,
                                  grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* SubmitPlacement(grpc::CallbackServerContext* context,
                                            const grpc::ByteBuffer* request,
                                            grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetOperation(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* WaitOperation(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* CancelOperation(grpc::CallbackServerContext* context,
                                            const grpc::ByteBuffer* request,
                                            grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* WatchOperation(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* Evaluate(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListAlgorithms(grpc::CallbackServerContext* context,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Recommend(grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* request,
                                      grpc::ByteBuffer* response) override;

  // Internals shared with the reactors (place_reactors.h, operation_reactors.h, raw_call.h).
  core::PlacementCore& core() { return *core_; }
  DrainSignal& drain() { return drain_; }
  DecodingBudget& decoding() { return decoding_; }
  ServiceMetrics* metrics() { return metrics_; }
  const PlacementServiceOptions& options() const { return options_; }
  void Record(const RpcLogEntry& entry);
  // The caller's tenant (AccessControl::Admit on its `authorization` metadata).
  absl::StatusOr<std::string> Admit(const grpc::CallbackServerContext* context);
  // Where Place, SubmitPlacement, GetOperation and CancelOperation start; null = on gRPC's thread
  // (see offload_threads).
  OffloadPool* offload() { return offload_.get(); }
  // UNAVAILABLE with RetryInfo: the offload queue is full.
  absl::Status OffloadQueueFull() const;

 private:
  core::PlacementCore* const core_;
  ServiceMetrics* const metrics_;
  const RequestLog* const log_;
  const PlacementServiceOptions options_;
  DrainSignal drain_;
  DecodingBudget decoding_;
  // Last member: destroyed (and joined) first, while everything its tasks use still exists.
  std::unique_ptr<OffloadPool> offload_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVICE_SERVER_PLACEMENT_SERVICE_H_
