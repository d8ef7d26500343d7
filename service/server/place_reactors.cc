#include "service/server/place_reactors.h"

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "service/common/status_payloads.h"
#include "service/server/first_wins.h"
#include "service/server/raw_call.h"
#include "service/server/status_mapping.h"

namespace placement::server {
namespace {

// Exactly one of {job done, caller cancelled, shutdown grace over, immediate answer} finishes the
// call: whoever wins the FirstWins claim (first_wins.h). The reactor stays alive until Finish() has
// been called (OnDone comes after), so the winner may use it; listeners hold only a copy of the claim.
//
// Start() runs on gRPC's thread inside the handler, or on the service's offload pool (StartOn). In
// the second case gRPC may already call OnCancel while Start() runs: OnCancel then only leaves a note
// that the pool task acts on once Start() returns, and the pool task holds the reactor alive (holds_)
// until it is done with it, even when Start() itself finished the call.
class JobWaitReactor : public grpc::ServerUnaryReactor {
 public:
  JobWaitReactor(PlacementServiceImpl* service, grpc::CallbackServerContext* context,
                 Method method)
      : service_(service),
        context_(context),
        record_(service, method),
        deadline_(DeadlineOf(context)) {}

  CallRecord& record() { return record_; }
  // Called once Start() no longer needs the request (before waiting for the job).
  void set_drop_request(std::function<void()> drop_request) {
    drop_request_ = std::move(drop_request);
  }
  // Answers at once (authentication or decoding failed) instead of Start().
  void FinishEarly(const absl::Status& status) {
    if (Claim()) Complete(status);
  }

  // Validates, looks up the cache and admits or answers; on gRPC's thread or the pool's.
  virtual void Start() = 0;

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
        ReleaseJob();
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
    ReleaseJob();
    Complete(CancelStatus());
  }

  void OnDone() override { Unhold(); }

 protected:
  virtual ~JobWaitReactor() = default;

  absl::Status CancelStatus() const {
    if (service_->drain().aborted()) return ShuttingDown();
    return absl::Now() >= deadline_
               ? absl::DeadlineExceededError("the deadline passed before the answer was ready")
               : absl::CancelledError("the caller cancelled the call");
  }

  absl::Status ShuttingDown() const {
    return common::WithRetryDelay(
        absl::UnavailableError("the server is shutting down and the answer was not ready within "
                               "its grace period; retry (another replica, or this one once it "
                               "is back)"),
        service_->options().retry_delay);
  }

  // Deletes the reactor once gRPC is done with it (OnDone) and so is a pool task running Start().
  void Unhold() {
    if (holds_.fetch_sub(1) == 1) delete this;
  }

  // Fills the response from a successful job result.
  virtual absl::Status Respond(const jobs::JobResult& result) = 0;

  bool Claim() { return first_wins_.Claim(); }

  // Only after a successful Claim().
  void Complete(const absl::Status& status) {
    service_->drain().Unsubscribe(abort_subscription_.exchange(0));
    Finish(ToGrpcStatus(record_.Done(status)));
  }

  // Waits for `job` (this call is one of its waiters, see JobManager::Acquire).
  void WaitFor(std::shared_ptr<jobs::Job> job) {
    if (drop_request_) {
      drop_request_();
      drop_request_ = nullptr;
    }
    {
      absl::MutexLock lock(&mu_);
      job_ = job;
    }
    if (first_wins_.claimed()) {  // cancelled meanwhile
      ReleaseJob();
      return;
    }
    const uint64_t id =
        job->AddListener([first_wins = first_wins_, reactor = this](const jobs::Job& changed) mutable {
          if (changed.done() && first_wins.Claim()) reactor->OnJobDone(changed);
        });
    if (id == 0) {
      if (Claim()) OnJobDone(*job);
      return;
    }
    // At the end of the shutdown grace, calls still waiting are answered UNAVAILABLE by us (gRPC
    // would cancel them, and the caller would see only CANCELLED).
    const uint64_t abort_id =
        service_->drain().SubscribeAbort([first_wins = first_wins_, reactor = this]() mutable {
          if (!first_wins.Claim()) return;
          reactor->ReleaseJob();
          reactor->Complete(reactor->ShuttingDown());
        });
    if (abort_id == 0) {
      if (Claim()) {
        ReleaseJob();
        Complete(ShuttingDown());
      }
    } else {
      abort_subscription_.store(abort_id);
      if (first_wins_.claimed()) service_->drain().Unsubscribe(abort_subscription_.exchange(0));
    }
    bool stale = false;
    {
      absl::MutexLock lock(&mu_);
      if (job_ == job) {
        listener_ = id;
      } else {
        stale = true;
      }
    }
    if (stale) job->RemoveListener(id);
  }

  PlacementServiceImpl* service_;
  grpc::CallbackServerContext* context_;
  CallRecord record_;
  const absl::Time deadline_;

 private:
  void OnJobDone(const jobs::Job& job) {
    ReleaseJob();
    const jobs::JobResult& result = job.result();
    record_.entry().queue_time = result.queue_time;
    record_.entry().solve_time = result.solve_time;
    Complete(result.placement.ok() ? Respond(result) : result.placement.status());
  }

  void ReleaseJob() {
    std::shared_ptr<jobs::Job> job;
    uint64_t listener = 0;
    {
      absl::MutexLock lock(&mu_);
      job = std::move(job_);
      job_ = nullptr;
      listener = listener_;
      listener_ = 0;
    }
    if (job == nullptr) return;
    job->RemoveListener(listener);
    service_->core().Release(job);
  }

  FirstWins first_wins_;
  absl::Mutex mu_;
  std::shared_ptr<jobs::Job> job_ ABSL_GUARDED_BY(mu_);
  uint64_t listener_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<int> holds_{1};  // gRPC's (until OnDone), plus one while a pool task runs Start()
  std::atomic<uint64_t> abort_subscription_{0};
  std::function<void()> drop_request_;
  absl::Mutex start_mu_;
  bool starting_ ABSL_GUARDED_BY(start_mu_) = false;
  bool cancel_noted_ ABSL_GUARDED_BY(start_mu_) = false;
};

// A JobWaitReactor that answers one decoded exchange of `Request` and `Response` (raw_call.h's Open).
template <typename Request, typename Response>
class ExchangeReactor : public JobWaitReactor {
 public:
  using RequestType = Request;
  using ResponseType = Response;

  ExchangeReactor(PlacementServiceImpl* service, grpc::CallbackServerContext* context,
                  Method method)
      : JobWaitReactor(service, context, method) {}

  void Bind(const Request* request, Response* response) {
    request_ = request;
    response_ = response;
  }

 protected:
  const Request* request_ = nullptr;
  Response* response_ = nullptr;
};

class PlaceReactor final : public ExchangeReactor<v1::PlaceRequest, v1::PlaceResponse> {
 public:
  PlaceReactor(PlacementServiceImpl* service, grpc::CallbackServerContext* context)
      : ExchangeReactor(service, context, Method::kPlace) {}

  void Start() override {
    const std::string* tenant = &record_.entry().tenant;  // authenticated before decoding
    core::PlacementCore& core = service_->core();
    std::string fingerprint;
    if (core.TryRepeatHit(*request_, &fingerprint, &record_.entry().digest, response_)) {
      record_.entry().cache = v1::HIT;
      if (Claim()) Complete(absl::OkStatus());
      return;
    }
    absl::StatusOr<std::shared_ptr<const core::PreparedRequest>> prepared = core.Prepare(*request_);
    if (!prepared.ok()) {
      if (Claim()) Complete(prepared.status());
      return;
    }
    prepared_ = *std::move(prepared);
    core.RememberFingerprint(fingerprint, *prepared_);
    record_.entry().digest = prepared_->request_digest;
    absl::StatusOr<core::PlaceStart> start = core.StartPlace(prepared_, deadline_, *tenant);
    if (!start.ok()) {
      if (Claim()) Complete(start.status());
      return;
    }
    if (start->hit != nullptr) {
      if (!Claim()) return;
      record_.entry().cache = v1::HIT;
      core.FillPlaceResponse(*prepared_, *start->hit, v1::HIT, absl::ZeroDuration(), response_);
      Complete(absl::OkStatus());
      return;
    }
    cache_ = start->admission.coalesced ? v1::COALESCED : v1::MISS;
    record_.entry().cache = cache_;
    WaitFor(std::move(start->admission.job));
  }

 private:
  absl::Status Respond(const jobs::JobResult& result) override {
    service_->core().FillPlaceResponse(*prepared_, **result.placement, cache_, result.queue_time,
                                       response_);
    return absl::OkStatus();
  }

  std::shared_ptr<const core::PreparedRequest> prepared_;
  v1::CacheResult cache_ = v1::MISS;
};

class EvaluateReactor final : public ExchangeReactor<v1::EvaluateRequest, v1::EvaluateResponse> {
 public:
  EvaluateReactor(PlacementServiceImpl* service, grpc::CallbackServerContext* context)
      : ExchangeReactor(service, context, Method::kEvaluate) {}

  void Start() override {
    const std::string* tenant = &record_.entry().tenant;  // authenticated before decoding
    absl::StatusOr<core::EvaluateStart> start =
        service_->core().StartEvaluate(*request_, deadline_, *tenant);
    if (!start.ok()) {
      if (Claim()) Complete(start.status());
      return;
    }
    output_ = std::move(start->output);
    WaitFor(std::move(start->admission.job));
  }

 private:
  absl::Status Respond(const jobs::JobResult& /*result*/) override {
    // Nobody else reads the output of an Evaluate job (it is never shared).
    response_->Swap(&output_->response);
    return absl::OkStatus();
  }

  std::shared_ptr<core::EvaluateOutput> output_;
};

// Decodes the call into a new `Reactor` and starts it: on `offload` when given, else on gRPC's
// thread. A call that does not authenticate or decode is answered at once.
template <typename Reactor>
grpc::ServerUnaryReactor* StartExchangeCall(PlacementServiceImpl* service,
                                            grpc::CallbackServerContext* context,
                                            const grpc::ByteBuffer* request,
                                            grpc::ByteBuffer* response, OffloadPool* offload) {
  auto* reactor = new Reactor(service, context);
  auto exchange = Open<typename Reactor::RequestType, typename Reactor::ResponseType>(
      service, context, request, response, reactor->record());
  if (!exchange.ok()) {
    reactor->FinishEarly(exchange.status());
    return reactor;
  }
  reactor->Bind(&(*exchange)->request, &(*exchange)->response);
  reactor->set_drop_request([exchange = std::weak_ptr(*exchange)] {
    if (auto alive = exchange.lock()) alive->DropRequest();
  });
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
  return StartExchangeCall<PlaceReactor>(service, context, request, response, service->offload());
}

// Evaluate never waits on the shared cache tier, so it starts on gRPC's thread (offload_pool.h).
grpc::ServerUnaryReactor* StartEvaluateCall(PlacementServiceImpl* service,
                                            grpc::CallbackServerContext* context,
                                            const grpc::ByteBuffer* request,
                                            grpc::ByteBuffer* response) {
  return StartExchangeCall<EvaluateReactor>(service, context, request, response,
                                            /*offload=*/nullptr);
}

}  // namespace placement::server
