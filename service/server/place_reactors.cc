#include "service/server/place_reactors.h"

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "service/status_payloads/status_payloads.h"
#include "service/server/first_wins.h"
#include "service/server/place_call.h"
#include "service/server/raw_call.h"
#include "service/server/status_mapping.h"

namespace placement::server {
namespace {

// Exactly one of {answer ready, caller cancelled, shutdown grace over, immediate answer} finishes the
// call: whoever wins the FirstWins claim (first_wins.h). The reactor stays alive until Finish() has
// been called (OnDone comes after), so the winner may use it; listeners hold only a copy of the claim.
//
// Start() runs on gRPC's thread inside the handler, or on the service's offload pool (StartOn). In
// the second case gRPC may already call OnCancel while Start() runs: OnCancel then only leaves a note
// that the pool task acts on once Start() returns, and the pool task holds the reactor alive (holds_)
// until it is done with it, even when Start() itself finished the call.
template <typename Request, typename Response>
class AnswerWaitReactor : public grpc::ServerUnaryReactor {
 public:
  using RequestType = Request;
  using ResponseType = Response;
  using ExchangeType = Exchange<Request, Response>;

  AnswerWaitReactor(PlacementServiceImpl* service, grpc::CallbackServerContext* context,
                    Method method)
      : service_(service), record_(service, method), deadline_(DeadlineOf(context)) {}

  CallRecord& record() { return record_; }
  void Bind(std::shared_ptr<ExchangeType> exchange) { exchange_ = std::move(exchange); }
  // Answers at once (authentication or decoding failed) instead of Start().
  void FinishEarly(const absl::Status& status) {
    if (Claim()) Complete(status);
  }

  // Asks the core (validation, cache, admission) and answers or waits; on gRPC's thread or the pool's.
  void Start() {
    core::CallNotes notes;
    absl::StatusOr<std::shared_ptr<core::PendingAnswer>> pending = Ask(&notes);
    record_.entry().digest = std::move(notes.request_digest);
    record_.entry().cache = notes.cache;
    exchange_->DropRequest();  // answered, or the job holds what it needs
    if (!pending.ok()) {
      if (Claim()) Complete(pending.status());
    } else if (*pending == nullptr) {  // answered from the cache
      if (Claim()) Complete(absl::OkStatus());
    } else {
      WaitFor(*std::move(pending));
    }
  }

  // Runs Start() on `pool`. False when the pool's queue is full; the call is then answered
  // UNAVAILABLE with RetryInfo here.
  bool StartOn(OffloadPool* pool) {
    holds_.fetch_add(1);
    {
      absl::MutexLock lock(&start_mu_);
      starting_ = true;
    }
    const bool posted = pool->TryPost([this] {
      Start();
      bool cancelled = false;
      {
        absl::MutexLock lock(&start_mu_);
        starting_ = false;
        cancelled = cancel_noted_;
      }
      if (cancelled && Claim()) {
        ReleaseAnswer();
        Complete(CancelStatus());
      }
      Unhold();
    });
    if (posted) return true;
    {
      absl::MutexLock lock(&start_mu_);
      starting_ = false;
    }
    holds_.fetch_sub(1);
    if (Claim()) Complete(service_->OffloadQueueFull());
    return false;
  }

  void OnCancel() override {
    {
      absl::MutexLock lock(&start_mu_);
      if (starting_) {  // Start() runs on the pool; its task ends the call when Start() returns
        cancel_noted_ = true;
        return;
      }
    }
    if (!Claim()) return;
    ReleaseAnswer();
    Complete(CancelStatus());
  }

  void OnDone() override { Unhold(); }

 protected:
  virtual ~AnswerWaitReactor() = default;

  // The core's one call for this RPC: null = answered at once (`exchange_->response` holds it).
  virtual absl::StatusOr<std::shared_ptr<core::PendingAnswer>> Ask(core::CallNotes* notes) = 0;

  const std::string& tenant() { return record_.entry().tenant; }  // authenticated first

  PlacementServiceImpl* const service_;
  CallRecord record_;
  const absl::Time deadline_;
  std::shared_ptr<ExchangeType> exchange_;

 private:
  absl::Status CancelStatus() const {
    if (service_->drain().aborted()) return ShuttingDown();
    return absl::Now() >= deadline_
               ? absl::DeadlineExceededError("the deadline passed before the answer was ready")
               : absl::CancelledError("the caller cancelled the call");
  }

  absl::Status ShuttingDown() const {
    return status_payloads::WithRetryDelay(
        absl::UnavailableError("the server is shutting down and the answer was not ready within "
                               "its grace period; retry (another replica, or this one once it "
                               "is back)"),
        service_->options().retry_delay);
  }

  // Deletes the reactor once gRPC is done with it (OnDone) and so is a pool task running Start().
  void Unhold() {
    if (holds_.fetch_sub(1) == 1) delete this;
  }

  bool Claim() { return first_wins_.Claim(); }

  // Only after a successful Claim().
  void Complete(const absl::Status& status) {
    service_->drain().Unsubscribe(abort_subscription_.exchange(0));
    Finish(ToGrpcStatus(record_.Done(status)));
  }

  // Waits for `pending` (this call is one of its job's waiters).
  void WaitFor(std::shared_ptr<core::PendingAnswer> pending) {
    {
      absl::MutexLock lock(&mu_);
      pending_ = pending;
    }
    if (first_wins_.claimed()) {  // cancelled meanwhile
      ReleaseAnswer();
      return;
    }
    pending->OnDone([first_wins = first_wins_, reactor = this]() mutable {
      if (first_wins.Claim()) reactor->OnAnswerReady();
    });
    // At the end of the shutdown grace, calls still waiting are answered UNAVAILABLE by us (gRPC
    // would cancel them, and the caller would see only CANCELLED).
    const uint64_t abort_id =
        service_->drain().SubscribeAbort([first_wins = first_wins_, reactor = this]() mutable {
          if (!first_wins.Claim()) return;
          reactor->ReleaseAnswer();
          reactor->Complete(reactor->ShuttingDown());
        });
    if (abort_id == 0) {
      if (Claim()) {
        ReleaseAnswer();
        Complete(ShuttingDown());
      }
    } else {
      abort_subscription_.store(abort_id);
      if (first_wins_.claimed()) service_->drain().Unsubscribe(abort_subscription_.exchange(0));
    }
  }

  void OnAnswerReady() {
    std::shared_ptr<core::PendingAnswer> pending = TakeAnswer();
    record_.entry().queue_time = pending->queue_time();
    record_.entry().solve_time = pending->solve_time();
    Complete(pending->Finish());
  }

  std::shared_ptr<core::PendingAnswer> TakeAnswer() {
    absl::MutexLock lock(&mu_);
    return std::move(pending_);
  }

  void ReleaseAnswer() {
    if (std::shared_ptr<core::PendingAnswer> pending = TakeAnswer()) pending->Release();
  }

  FirstWins first_wins_;
  absl::Mutex mu_;
  std::shared_ptr<core::PendingAnswer> pending_ ABSL_GUARDED_BY(mu_);
  std::atomic<int> holds_{1};  // gRPC's (until OnDone), plus one while a pool task runs Start()
  std::atomic<uint64_t> abort_subscription_{0};
  absl::Mutex start_mu_;
  bool starting_ ABSL_GUARDED_BY(start_mu_) = false;
  bool cancel_noted_ ABSL_GUARDED_BY(start_mu_) = false;
};

class PlaceReactor final : public AnswerWaitReactor<v1::PlaceRequest, v1::PlaceResponse> {
 public:
  static constexpr Decoding kDecoding = Decoding::kOnDemand;  // a repeat is answered from its bytes

  PlaceReactor(PlacementServiceImpl* service, grpc::CallbackServerContext* context)
      : AnswerWaitReactor(service, context, Method::kPlace) {}

 private:
  absl::StatusOr<std::shared_ptr<core::PendingAnswer>> Ask(core::CallNotes* notes) override {
    return service_->core().Place(PlaceCallOf(*exchange_, deadline_, tenant()),
                                  &exchange_->response, notes);
  }
};

class EvaluateReactor final
    : public AnswerWaitReactor<v1::EvaluateRequest, v1::EvaluateResponse> {
 public:
  static constexpr Decoding kDecoding = Decoding::kNow;

  EvaluateReactor(PlacementServiceImpl* service, grpc::CallbackServerContext* context)
      : AnswerWaitReactor(service, context, Method::kEvaluate) {}

 private:
  absl::StatusOr<std::shared_ptr<core::PendingAnswer>> Ask(core::CallNotes*) override {
    return service_->core().Evaluate(std::move(exchange_->request), deadline_, tenant(),
                                     &exchange_->response);
  }
};

class RecommendReactor final
    : public AnswerWaitReactor<v1::RecommendRequest, v1::RecommendResponse> {
 public:
  static constexpr Decoding kDecoding = Decoding::kNow;

  RecommendReactor(PlacementServiceImpl* service, grpc::CallbackServerContext* context)
      : AnswerWaitReactor(service, context, Method::kRecommend) {}

 private:
  absl::StatusOr<std::shared_ptr<core::PendingAnswer>> Ask(core::CallNotes* notes) override {
    return service_->core().Recommend(exchange_->request, deadline_, tenant(), &exchange_->response,
                                      notes);
  }
};

// Opens the call into a new `Reactor` and starts it: on `offload` when given, else on gRPC's thread.
// A call that does not authenticate or decode is answered at once.
template <typename Reactor>
grpc::ServerUnaryReactor* StartAnswerCall(PlacementServiceImpl* service,
                                          grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response, OffloadPool* offload) {
  auto* reactor = new Reactor(service, context);
  auto exchange = Open<typename Reactor::RequestType, typename Reactor::ResponseType>(
      service, context, request, response, reactor->record(), Reactor::kDecoding);
  if (!exchange.ok()) {
    reactor->FinishEarly(exchange.status());
    return reactor;
  }
  reactor->Bind(*std::move(exchange));
  if (offload != nullptr) {
    reactor->StartOn(offload);
  } else {
    reactor->Start();
  }
  return reactor;
}

}  // namespace

grpc::ServerUnaryReactor* StartPlaceCall(PlacementServiceImpl* service,
                                         grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) {
  return StartAnswerCall<PlaceReactor>(service, context, request, response, service->offload());
}

// Recommend looks its candidates up in the cache like Place: on the offload pool when there is one.
grpc::ServerUnaryReactor* StartRecommendCall(PlacementServiceImpl* service,
                                             grpc::CallbackServerContext* context,
                                             const grpc::ByteBuffer* request,
                                             grpc::ByteBuffer* response) {
  return StartAnswerCall<RecommendReactor>(service, context, request, response, service->offload());
}

// Evaluate never waits on the shared cache tier, so it starts on gRPC's thread (offload_pool.h).
grpc::ServerUnaryReactor* StartEvaluateCall(PlacementServiceImpl* service,
                                            grpc::CallbackServerContext* context,
                                            const grpc::ByteBuffer* request,
                                            grpc::ByteBuffer* response) {
  return StartAnswerCall<EvaluateReactor>(service, context, request, response,
                                            /*offload=*/nullptr);
}

}  // namespace placement::server
