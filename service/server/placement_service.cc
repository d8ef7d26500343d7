#include "service/server/placement_service.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "service/status_payloads/status_payloads.h"
#include "service/server/operation_reactors.h"
#include "service/server/place_call.h"
#include "service/server/place_reactors.h"
#include "service/server/raw_call.h"
#include "service/server/status_mapping.h"

namespace placement::server {
namespace {

grpc::ServerUnaryReactor* FinishWith(grpc::ServerUnaryReactor* reactor, CallRecord& record,
                                     const absl::Status& status) {
  reactor->Finish(ToGrpcStatus(record.Done(status)));
  return reactor;
}

grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* context, CallRecord& record,
                                    const absl::Status& status) {
  return FinishWith(context->DefaultReactor(), record, status);
}

// A unary call answered by one core call `answer(exchange, tenant, notes)` in the handler — on an
// offload thread when there are some (see PlacementServiceOptions::offload_threads).
template <typename Request, typename Response, typename Answer>
grpc::ServerUnaryReactor* AnswerInHandler(
    PlacementServiceImpl* service, grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response, Method method, Decoding decoding, Answer answer) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // Times the wait for an offload thread too; shared with the task that may finish the call.
  auto record = std::make_shared<CallRecord>(service, method);
  auto exchange = Open<Request, Response>(service, context, request, response, *record, decoding);
  if (!exchange.ok()) return FinishWith(reactor, *record, exchange.status());
  auto run = [reactor, record, exchange = *exchange, answer = std::move(answer)] {
    core::CallNotes notes;
    const absl::Status status = answer(*exchange, record->entry().tenant, &notes);
    RpcLogEntry& entry = record->entry();
    entry.digest = std::move(notes.request_digest);
    entry.cache = notes.cache;
    entry.operation = std::move(notes.operation);  // logged quoted and cut, once authenticated
    FinishWith(reactor, *record, status);
  };
  // With --redis the core may wait for Redis (a shared cache lookup, a name only Redis knows): that
  // runs on an offload thread, never on gRPC's. The default reactor may be finished from any thread;
  // gRPC keeps the context until it is.
  if (service->offload() == nullptr) {
    run();
  } else if (!service->offload()->TryPost(std::move(run))) {
    FinishWith(reactor, *record, service->OffloadQueueFull());
  }
  return reactor;
}

// GetOperation and CancelOperation: `operation_call` (the core's) on the request's operation name.
template <typename Request, typename Response>
grpc::ServerUnaryReactor* AnswerByName(
    PlacementServiceImpl* service, grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* request, grpc::ByteBuffer* response, Method method,
    absl::Status (core::PlacementCore::*operation_call)(const std::string&, const std::string&,
                                                        v1::Operation*, core::CallNotes*)) {
  return AnswerInHandler<Request, Response>(
      service, context, request, response, method, Decoding::kNow,
      [service, operation_call](auto& exchange, const std::string& tenant,
                                core::CallNotes* notes) {
        notes->operation = exchange.request.name();
        return (service->core().*operation_call)(exchange.request.name(), tenant,
                                                 exchange.response.mutable_operation(), notes);
      });
}

}  // namespace

PlacementServiceImpl::PlacementServiceImpl(core::PlacementCore* core, ServiceMetrics* metrics,
                                           const RequestLog* log, PlacementServiceOptions options)
    : core_(core),
      metrics_(metrics),
      log_(log),
      options_(options),
      decoding_(options.max_decoding_bytes) {
  if (options_.offload_threads > 0) {
    offload_ = std::make_unique<OffloadPool>(options_.offload_threads, options_.offload_max_queued);
  }
}

absl::Status PlacementServiceImpl::OffloadQueueFull() const {
  return status_payloads::WithRetryDelay(
      absl::UnavailableError(absl::StrCat("the server is busy (", options_.offload_max_queued,
                                          " calls wait to start); retry later")),
      options_.retry_delay);
}

void PlacementServiceImpl::Drain() { drain_.Fire(); }

size_t PlacementServiceImpl::AbortWaits() { return drain_.Abort(); }

absl::StatusOr<std::string> PlacementServiceImpl::Admit(
    const grpc::CallbackServerContext* context) {
  if (options_.access == nullptr) return std::string();
  absl::string_view authorization;
  const std::multimap<grpc::string_ref, grpc::string_ref>& metadata = context->client_metadata();
  if (auto it = metadata.find("authorization"); it != metadata.end()) {
    authorization = absl::string_view(it->second.data(), it->second.size());
  }
  return options_.access->Admit(authorization);
}

void PlacementServiceImpl::Record(const RpcLogEntry& entry) {
  if (metrics_ != nullptr) metrics_->RecordRequest(entry.method, entry.code, entry.total_time);
  if (log_ != nullptr) log_->Rpc(entry);
}

grpc::ServerUnaryReactor* PlacementServiceImpl::Place(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* request,
                                                      grpc::ByteBuffer* response) {
  return StartPlaceCall(this, context, request, response);
}

grpc::ServerUnaryReactor* PlacementServiceImpl::SubmitPlacement(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return AnswerInHandler<v1::SubmitPlacementRequest, v1::SubmitPlacementResponse>(
      this, context, request, response, Method::kSubmitPlacement, Decoding::kOnDemand,
      [this](auto& exchange, const std::string& tenant, core::CallNotes* notes) {
        // A repeat is answered from its bytes, as for Place (place_call.h).
        absl::Status submitted = core_->Submit(PlaceCallOf(exchange, tenant),
                                               exchange.response.mutable_operation(), notes);
        exchange.DropRequest();
        return submitted;
      });
}

grpc::ServerUnaryReactor* PlacementServiceImpl::GetOperation(grpc::CallbackServerContext* context,
                                                             const grpc::ByteBuffer* request,
                                                             grpc::ByteBuffer* response) {
  return AnswerByName<v1::GetOperationRequest, v1::GetOperationResponse>(
      this, context, request, response, Method::kGetOperation, &core::PlacementCore::GetOperation);
}

grpc::ServerUnaryReactor* PlacementServiceImpl::WaitOperation(grpc::CallbackServerContext* context,
                                                              const grpc::ByteBuffer* request,
                                                              grpc::ByteBuffer* response) {
  return StartWaitOperationCall(this, context, request, response);
}

grpc::ServerUnaryReactor* PlacementServiceImpl::CancelOperation(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return AnswerByName<v1::CancelOperationRequest, v1::CancelOperationResponse>(
      this, context, request, response, Method::kCancelOperation,
      &core::PlacementCore::CancelOperation);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* PlacementServiceImpl::WatchOperation(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return StartWatchOperationCall(this, context, request);
}

grpc::ServerUnaryReactor* PlacementServiceImpl::Evaluate(grpc::CallbackServerContext* context,
                                                         const grpc::ByteBuffer* request,
                                                         grpc::ByteBuffer* response) {
  return StartEvaluateCall(this, context, request, response);
}

grpc::ServerUnaryReactor* PlacementServiceImpl::Recommend(grpc::CallbackServerContext* context,
                                                          const grpc::ByteBuffer* request,
                                                          grpc::ByteBuffer* response) {
  return StartRecommendCall(this, context, request, response);
}

grpc::ServerUnaryReactor* PlacementServiceImpl::ListAlgorithms(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  CallRecord record(this, Method::kListAlgorithms);
  auto exchange = Open<v1::ListAlgorithmsRequest, v1::ListAlgorithmsResponse>(
      this, context, request, response, record);
  if (!exchange.ok()) return FinishNow(context, record, exchange.status());
  (*exchange)->response = core_->ListAlgorithms();
  return FinishNow(context, record, absl::OkStatus());
}

}  // namespace placement::server