#include "service/server/placement_service.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "service/common/status_payloads.h"
#include "service/server/operation_reactors.h"
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

}  // namespace

// ---- DrainSignal ----

uint64_t DrainSignal::Add(bool abort, std::function<void()> callback) {
  absl::MutexLock lock(&mu_);
  if (abort ? aborted_ : fired_) return 0;
  const uint64_t id = next_id_++;
  (abort ? abort_subscribers_ : subscribers_).emplace_back(id, std::move(callback));
  return id;
}

uint64_t DrainSignal::Subscribe(std::function<void()> on_drain) {
  return Add(/*abort=*/false, std::move(on_drain));
}

uint64_t DrainSignal::SubscribeAbort(std::function<void()> on_abort) {
  return Add(/*abort=*/true, std::move(on_abort));
}

void DrainSignal::Unsubscribe(uint64_t id) {
  if (id == 0) return;
  absl::MutexLock lock(&mu_);
  for (Subscribers* list : {&subscribers_, &abort_subscribers_}) {
    list->erase(std::remove_if(list->begin(), list->end(),
                               [id](const auto& entry) { return entry.first == id; }),
                list->end());
  }
}

size_t DrainSignal::CallOnce(bool* flag, Subscribers* list) {
  Subscribers to_call;
  {
    absl::MutexLock lock(&mu_);
    if (*flag) return 0;
    *flag = true;
    to_call.swap(*list);
  }
  for (auto& [id, callback] : to_call) callback();
  return to_call.size();
}

void DrainSignal::Fire() { CallOnce(&fired_, &subscribers_); }

size_t DrainSignal::Abort() { return CallOnce(&aborted_, &abort_subscribers_); }

bool DrainSignal::fired() const {
  absl::MutexLock lock(&mu_);
  return fired_;
}

bool DrainSignal::aborted() const {
  absl::MutexLock lock(&mu_);
  return aborted_;
}

// ---- DecodingBudget ----

bool DecodingBudget::TryReserve(int64_t bytes) {
  int64_t current = in_use_.load();
  while (true) {
    // A request alone always fits (else the largest allowed message could never be served).
    if (max_bytes_ > 0 && current > 0 && current + bytes > max_bytes_) return false;
    if (in_use_.compare_exchange_weak(current, current + bytes)) return true;
  }
}

void DecodingBudget::Release(int64_t bytes) { in_use_.fetch_sub(bytes); }

// ---- PlacementServiceImpl ----

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
  return common::WithRetryDelay(
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
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // Times the wait for an offload thread too; shared with the task that may finish the call.
  auto record = std::make_shared<CallRecord>(this, Method::kSubmitPlacement);
  auto exchange = Open<v1::SubmitPlacementRequest, v1::SubmitPlacementResponse>(
      this, context, request, response, *record);
  if (!exchange.ok()) return FinishWith(reactor, *record, exchange.status());
  auto submit = [this, reactor, record, exchange = *exchange] {
    const std::string& tenant = record->entry().tenant;
    v1::CacheResult cache = v1::CACHE_RESULT_UNSPECIFIED;
    absl::StatusOr<std::shared_ptr<jobs::Operation>> operation =
        core_->Submit(exchange->request.request(), tenant, &cache, &record->entry().digest);
    record->entry().cache = cache;
    if (!operation.ok()) {
      FinishWith(reactor, *record, operation.status());
      return;
    }
    record->entry().operation = (*operation)->name();
    core_->FillOperation(**operation, exchange->response.mutable_operation());
    FinishWith(reactor, *record, absl::OkStatus());
  };
  if (offload_ == nullptr) {
    submit();
    return reactor;
  }
  // The default reactor may be finished from any thread; gRPC keeps the context until it is.
  if (!offload_->TryPost(submit)) FinishWith(reactor, *record, OffloadQueueFull());
  return reactor;
}

grpc::ServerUnaryReactor* PlacementServiceImpl::GetOperation(grpc::CallbackServerContext* context,
                                                             const grpc::ByteBuffer* request,
                                                             grpc::ByteBuffer* response) {
  return LookUpOperation<v1::GetOperationRequest, v1::GetOperationResponse>(
      context, request, response, Method::kGetOperation,
      [this](const std::string& name, const std::string& tenant) {
        return core_->FindOperation(name, tenant);
      });
}

grpc::ServerUnaryReactor* PlacementServiceImpl::WaitOperation(grpc::CallbackServerContext* context,
                                                              const grpc::ByteBuffer* request,
                                                              grpc::ByteBuffer* response) {
  return StartWaitOperationCall(this, context, request, response);
}

grpc::ServerUnaryReactor* PlacementServiceImpl::CancelOperation(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return LookUpOperation<v1::CancelOperationRequest, v1::CancelOperationResponse>(
      context, request, response, Method::kCancelOperation,
      [this](const std::string& name, const std::string& tenant) {
        return core_->CancelOperation(name, tenant);
      });
}

template <typename Request, typename Response, typename Lookup>
grpc::ServerUnaryReactor* PlacementServiceImpl::LookUpOperation(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response, Method method, Lookup lookup) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto record = std::make_shared<CallRecord>(this, method);
  auto exchange = Open<Request, Response>(this, context, request, response, *record);
  if (!exchange.ok()) return FinishWith(reactor, *record, exchange.status());
  auto look_up = [this, reactor, record, exchange = *exchange, lookup = std::move(lookup)] {
    const std::string& name = exchange->request.name();
    record->entry().operation = name;  // logged quoted and cut, once authenticated
    absl::StatusOr<std::shared_ptr<jobs::Operation>> operation =
        lookup(name, record->entry().tenant);
    if (!operation.ok()) {
      FinishWith(reactor, *record, operation.status());
      return;
    }
    record->entry().digest = (*operation)->request_digest();
    core_->FillOperation(**operation, exchange->response.mutable_operation());
    FinishWith(reactor, *record, absl::OkStatus());
  };
  // With --redis a name this replica does not know is looked up in Redis: like Submit, that runs on
  // an offload thread, never on gRPC's.
  if (offload_ == nullptr) {
    look_up();
    return reactor;
  }
  if (!offload_->TryPost(look_up)) FinishWith(reactor, *record, OffloadQueueFull());
  return reactor;
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