#include "service/server/placement_service.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <optional>

#include <grpcpp/alarm.h>
#include <grpcpp/support/byte_buffer.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "service/common/status_payloads.h"
#include "service/server/status_mapping.h"

namespace placement::server {
// Times one call and reports it (metrics + one log line) when it ends.
class CallRecord {
 public:
  CallRecord(PlacementServiceImpl* service, Method method)
      : service_(service), start_(absl::Now()) {
    entry_.method = method;
  }
  RpcLogEntry& entry() { return entry_; }
  // Runs in Done(), before the call is finished: encodes the response (raw API), may replace an OK
  // status by the encoding's failure.
  void set_before_finish(std::function<absl::Status(const absl::Status&)> before_finish) {
    before_finish_ = std::move(before_finish);
  }
  // Records the call and returns the status to finish it with.
  absl::Status Done(absl::Status status) {
    if (before_finish_) status = before_finish_(status);
    before_finish_ = nullptr;  // drops the request and response it owned
    entry_.code = status.code();
    if (!status.ok()) entry_.message = std::string(status.message());
    entry_.total_time = absl::Now() - start_;
    service_->Record(entry_);
    return status;
  }

 private:
  PlacementServiceImpl* service_;
  absl::Time start_;
  RpcLogEntry entry_;
  std::function<absl::Status(const absl::Status&)> before_finish_;
};

namespace {

absl::Time DeadlineOf(const grpc::CallbackServerContext* context) {
  const std::chrono::system_clock::time_point deadline = context->deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return absl::InfiniteFuture();
  return absl::FromChrono(deadline);
}

grpc::ServerUnaryReactor* FinishWith(grpc::ServerUnaryReactor* reactor, CallRecord& record,
                                     const absl::Status& status) {
  reactor->Finish(ToGrpcStatus(record.Done(status)));
  return reactor;
}

// ---- The raw API: authenticate, bound, decode, encode ----

// A decoded request and its response, owned by the call (through its CallRecord).
template <typename Request, typename Response>
struct Exchange {
  Request request;
  Response response;
  DecodingBudget* budget = nullptr;
  int64_t reserved = 0;
  ~Exchange() { DropRequest(); }
  // Frees the decoded request (and its share of the decoding budget) once the call no longer needs it,
  // e.g. while it waits for its job: the job holds the model, not the message.
  void DropRequest() {
    Request().Swap(&request);
    if (budget != nullptr) budget->Release(reserved);
    budget = nullptr;
  }
};

template <typename Message>
absl::Status Decode(const grpc::ByteBuffer& in, Message* out) {
  grpc::ByteBuffer copy(in);  // shares the slices; Deserialize consumes its argument
  if (!grpc::SerializationTraits<Message>::Deserialize(&copy, out).ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the request body (", in.Length(), " bytes) does not parse as a ",
        Message::descriptor()->full_name(), " message"));
  }
  return absl::OkStatus();
}

template <typename Message>
absl::Status Encode(const Message& message, grpc::ByteBuffer* out) {
  bool own_buffer = false;
  out->Clear();  // gRPC's serializer requires an empty buffer (a stream reuses one)
  if (!grpc::SerializationTraits<Message>::Serialize(message, out, &own_buffer).ok()) {
    return absl::InternalError("cannot encode the response");
  }
  return absl::OkStatus();
}

// What every raw handler does first: the caller is authenticated (and its rate charged) from its
// metadata alone; only then is the body decoded, within the decoding budget. On success the exchange
// is owned by `record`, which encodes the response into `out` when the call finishes; on failure the
// status to finish the call with.
template <typename Request, typename Response>
absl::StatusOr<std::shared_ptr<Exchange<Request, Response>>> Open(
    PlacementServiceImpl* service, grpc::CallbackServerContext* context, const grpc::ByteBuffer* in,
    grpc::ByteBuffer* out, CallRecord& record) {
  absl::StatusOr<std::string> tenant = service->Admit(context);
  if (!tenant.ok()) return tenant.status();
  record.entry().tenant = *tenant;
  auto exchange = std::make_shared<Exchange<Request, Response>>();
  const int64_t estimate = static_cast<int64_t>(in->Length()) * kDecodedBytesPerWireByte;
  if (!service->decoding().TryReserve(estimate)) {
    if (service->metrics() != nullptr) service->metrics()->RecordDecodingRejected();
    return common::WithRetryDelay(
        absl::UnavailableError(absl::StrCat(
            "the server is decoding other large requests (--max_decoding_bytes=",
            service->options().max_decoding_bytes, " would be exceeded); retry later")),
        service->options().retry_delay);
  }
  exchange->budget = &service->decoding();
  exchange->reserved = estimate;
  if (absl::Status decoded = Decode(*in, &exchange->request); !decoded.ok()) return decoded;
  if (out != nullptr) {
    record.set_before_finish([exchange, out](const absl::Status& status) -> absl::Status {
      if (!status.ok()) return status;
      return Encode(exchange->response, out);
    });
  } else {
    record.set_before_finish([exchange](const absl::Status& status) { return status; });
  }
  return exchange;
}

grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* context, CallRecord& record,
                                    const absl::Status& status) {
  return FinishWith(context->DefaultReactor(), record, status);
}

// ---- Unary calls that wait for a job (Place, Evaluate) ----

// Exactly one of {job done, caller cancelled, immediate answer} finishes the call: whoever wins the
// `claimed` flag. The reactor stays alive until Finish() has been called (OnDone comes after), so the
// winner may use it; listeners only hold the small Shared block.
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
        deadline_(DeadlineOf(context)),
        shared_(std::make_shared<Shared>()) {
    shared_->reactor = this;
  }

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

  bool Claim() { return !shared_->claimed.exchange(true); }

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
    if (shared_->claimed.load()) {  // cancelled meanwhile
      ReleaseJob();
      return;
    }
    std::shared_ptr<Shared> shared = shared_;
    const uint64_t id = job->AddListener([shared](const jobs::Job& changed) {
      if (!changed.done() || shared->claimed.exchange(true)) return;
      shared->reactor->OnJobDone(changed);
    });
    if (id == 0) {
      if (Claim()) OnJobDone(*job);
      return;
    }
    // At the end of the shutdown grace, calls still waiting are answered UNAVAILABLE by us (gRPC
    // would cancel them, and the caller would see only CANCELLED).
    const uint64_t abort_id = service_->drain().SubscribeAbort([shared] {
      if (shared->claimed.exchange(true)) return;
      shared->reactor->ReleaseJob();
      shared->reactor->Complete(shared->reactor->ShuttingDown());
    });
    if (abort_id == 0) {
      if (Claim()) {
        ReleaseJob();
        Complete(ShuttingDown());
      }
    } else {
      abort_subscription_.store(abort_id);
      if (shared_->claimed.load()) service_->drain().Unsubscribe(abort_subscription_.exchange(0));
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
  struct Shared {
    std::atomic<bool> claimed{false};
    JobWaitReactor* reactor = nullptr;
  };

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

  std::shared_ptr<Shared> shared_;
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

class PlaceReactor final : public JobWaitReactor {
 public:
  PlaceReactor(PlacementServiceImpl* service, grpc::CallbackServerContext* context)
      : JobWaitReactor(service, context, Method::kPlace) {}

  void Bind(const v1::PlaceRequest* request, v1::PlaceResponse* response) {
    request_ = request;
    response_ = response;
  }

  void Start() override {
    const std::string* tenant = &record_.entry().tenant;  // authenticated before decoding
    PlacementCore& core = service_->core();
    std::string fingerprint;
    if (core.TryRepeatHit(*request_, &fingerprint, &record_.entry().digest, response_)) {
      record_.entry().cache = v1::HIT;
      if (Claim()) Complete(absl::OkStatus());
      return;
    }
    absl::StatusOr<std::shared_ptr<const PreparedRequest>> prepared = core.Prepare(*request_);
    if (!prepared.ok()) {
      if (Claim()) Complete(prepared.status());
      return;
    }
    prepared_ = *std::move(prepared);
    core.RememberFingerprint(fingerprint, *prepared_);
    record_.entry().digest = prepared_->request_digest;
    absl::StatusOr<PlaceStart> start = core.StartPlace(prepared_, deadline_, *tenant);
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

  const v1::PlaceRequest* request_ = nullptr;
  v1::PlaceResponse* response_ = nullptr;
  std::shared_ptr<const PreparedRequest> prepared_;
  v1::CacheResult cache_ = v1::MISS;
};

class EvaluateReactor final : public JobWaitReactor {
 public:
  EvaluateReactor(PlacementServiceImpl* service, grpc::CallbackServerContext* context)
      : JobWaitReactor(service, context, Method::kEvaluate) {}

  void Bind(const v1::EvaluateRequest* request, v1::EvaluateResponse* response) {
    request_ = request;
    response_ = response;
  }

  void Start() override {
    const std::string* tenant = &record_.entry().tenant;  // authenticated before decoding
    absl::StatusOr<EvaluateStart> start =
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

  const v1::EvaluateRequest* request_ = nullptr;
  v1::EvaluateResponse* response_ = nullptr;
  std::shared_ptr<EvaluateOutput> output_;
};

// ---- WaitOperation ----

class WaitReactor final : public grpc::ServerUnaryReactor {
 public:
  WaitReactor(PlacementServiceImpl* service, grpc::CallbackServerContext* context)
      : service_(service),
        context_(context),
        record_(service, Method::kWaitOperation),
        shared_(std::make_shared<Shared>()) {
    shared_->reactor = this;
  }

  CallRecord& record() { return record_; }
  void FinishEarly(const absl::Status& status) {
    if (Claim()) Complete(status);
  }

  void Start(const v1::WaitOperationRequest* request, v1::WaitOperationResponse* response) {
    request_ = request;
    response_ = response;
    record_.entry().operation = request_->name();
    if (request_->has_timeout()) {
      const google::protobuf::Duration& timeout = request_->timeout();
      if (timeout.seconds() < 0 || timeout.nanos() < 0 || timeout.nanos() > 999'999'999) {
        FinishEarly(common::WithFieldViolations(
            absl::InvalidArgumentError(
                "timeout: must be a non-negative duration (seconds ≥ 0, nanos in [0, 999999999])"),
            {{"timeout", "must be a non-negative duration (seconds ≥ 0, nanos in [0, 999999999])"}}));
        return;
      }
    }
    absl::StatusOr<std::shared_ptr<jobs::Operation>> op =
        service_->core().FindOperation(request_->name(), record_.entry().tenant);
    if (!op.ok()) {
      if (Claim()) Complete(op.status());
      return;
    }
    operation_ = *std::move(op);
    record_.entry().digest = operation_->request_digest();

    const absl::Time now = absl::Now();
    absl::Time until = now + service_->options().max_wait_timeout;
    if (request_->has_timeout()) {
      until = std::min(until, now + absl::Seconds(request_->timeout().seconds()) +
                                  absl::Nanoseconds(request_->timeout().nanos()));
    }
    const absl::Time deadline = DeadlineOf(context_);
    if (deadline != absl::InfiniteFuture()) {
      until = std::min(until, deadline - service_->core().options().reply_margin);
    }

    std::shared_ptr<Shared> shared = shared_;
    operation_listener_ = operation_->AddListener([shared](const jobs::Operation& changed) {
      if (changed.done() && !shared->claimed.exchange(true)) shared->reactor->Reply();
    });
    if (operation_listener_ == 0) {  // done already
      if (Claim()) Reply();
      return;
    }
    drain_subscription_ = service_->drain().Subscribe([shared] {
      if (!shared->claimed.exchange(true)) shared->reactor->Reply();
    });
    if (drain_subscription_ == 0) {
      if (Claim()) Reply();
      return;
    }
    if (until <= now) {
      if (Claim()) Reply();
      return;
    }
    alarm_.Set(absl::ToChronoTime(until), [shared](bool fired) {
      if (fired && !shared->claimed.exchange(true)) shared->reactor->Reply();
    });
  }

  void OnCancel() override {
    if (Claim()) Complete(absl::CancelledError("the caller cancelled the call"));
  }

  void OnDone() override {
    if (operation_ != nullptr) operation_->RemoveListener(operation_listener_);
    service_->drain().Unsubscribe(drain_subscription_);
    delete this;
  }

 private:
  struct Shared {
    std::atomic<bool> claimed{false};
    WaitReactor* reactor = nullptr;
  };

  bool Claim() { return !shared_->claimed.exchange(true); }
  void Reply() {
    service_->core().FillOperation(*operation_, response_->mutable_operation());
    Complete(absl::OkStatus());
  }
  void Complete(const absl::Status& status) { Finish(ToGrpcStatus(record_.Done(status))); }

  PlacementServiceImpl* service_;
  grpc::CallbackServerContext* context_;
  const v1::WaitOperationRequest* request_ = nullptr;
  v1::WaitOperationResponse* response_ = nullptr;
  CallRecord record_;
  std::shared_ptr<Shared> shared_;
  std::shared_ptr<jobs::Operation> operation_;
  uint64_t operation_listener_ = 0;
  uint64_t drain_subscription_ = 0;
  grpc::Alarm alarm_;
};

// ---- WatchOperation ----

// All state lives in Shared, under its mutex; gRPC methods are called outside the lock, and only by
// the thread that decided to (a write is in flight → every other change waits for OnWriteDone), so the
// reactor is alive whenever it is called: OnDone comes only after Finish and the last write.
class WatchReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  WatchReactor(PlacementServiceImpl* service, grpc::CallbackServerContext* context)
      : service_(service), context_(context), shared_(std::make_shared<Shared>()) {
    shared_->reactor = this;
    shared_->record.emplace(service, Method::kWatchOperation);
  }

  CallRecord& record() { return *shared_->record; }
  void FinishEarly(const absl::Status& status) { EndWith(status); }

  void Start(const v1::WatchOperationRequest* request) {
    request_ = request;
    const std::string tenant = shared_->record->entry().tenant;
    shared_->record->entry().operation = request_->name();
    absl::StatusOr<std::shared_ptr<jobs::Operation>> op =
        service_->core().FindOperation(request_->name(), tenant);
    if (!op.ok()) {
      EndWith(op.status());
      return;
    }
    {
      absl::MutexLock lock(&shared_->mu);
      shared_->operation = *op;
      shared_->record->entry().digest = (*op)->request_digest();
    }
    std::shared_ptr<Shared> shared = shared_;
    operation_ = *std::move(op);
    operation_listener_ =
        operation_->AddListener([shared](const jobs::Operation&) { Step(shared); });
    const absl::Duration retry_delay = service_->options().retry_delay;
    drain_subscription_ = service_->drain().Subscribe([shared, retry_delay] {
      EndWith(shared, WatchShutdownStatus(retry_delay));
    });
    if (drain_subscription_ == 0) {
      EndWith(WatchShutdownStatus(retry_delay));
      return;
    }
    Step(shared_);
  }

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&shared_->mu);
      shared_->writing = false;
      if (!ok && !shared_->end_status.has_value()) {
        shared_->end_status = absl::CancelledError("the stream broke");
      }
    }
    Step(shared_);
  }

  void OnCancel() override { EndWith(absl::CancelledError("the caller cancelled the call")); }

  void OnDone() override {
    if (operation_ != nullptr) operation_->RemoveListener(operation_listener_);
    service_->drain().Unsubscribe(drain_subscription_);
    delete this;
  }

 private:
  struct Shared {
    absl::Mutex mu;
    WatchReactor* reactor = nullptr;
    std::optional<CallRecord> record;
    std::shared_ptr<jobs::Operation> operation ABSL_GUARDED_BY(mu);
    bool writing ABSL_GUARDED_BY(mu) = false;
    bool finished ABSL_GUARDED_BY(mu) = false;
    std::optional<absl::Status> end_status ABSL_GUARDED_BY(mu);
    bool sent_any ABSL_GUARDED_BY(mu) = false;
    std::string last_sent ABSL_GUARDED_BY(mu);  // serialized progress of the last message
    v1::WatchOperationResponse out ABSL_GUARDED_BY(mu);
    grpc::ByteBuffer out_buffer;  // `out` encoded; written only by the thread that starts a write
  };

  // Operations live in this process only: they end with it, and no other replica knows them.
  static absl::Status WatchShutdownStatus(absl::Duration retry_delay) {
    return common::WithRetryDelay(
        absl::UnavailableError(
            "the server is shutting down; its operations end with it: submit the request again "
            "(the same request_id) once a server is back"),
        retry_delay);
  }

  void EndWith(absl::Status status) { EndWith(shared_, std::move(status)); }

  static void EndWith(const std::shared_ptr<Shared>& shared, absl::Status status) {
    {
      absl::MutexLock lock(&shared->mu);
      if (!shared->end_status.has_value()) shared->end_status = std::move(status);
    }
    Step(shared);
  }

  // Decides (under the lock) what to do next and does it (outside the lock).
  static void Step(const std::shared_ptr<Shared>& shared) {
    enum class Action { kNothing, kWrite, kWriteAndFinish, kFinish };
    Action action = Action::kNothing;
    absl::Status status;
    WatchReactor* reactor = nullptr;
    {
      absl::MutexLock lock(&shared->mu);
      if (shared->finished || shared->writing) return;  // OnWriteDone calls Step again
      reactor = shared->reactor;
      if (shared->end_status.has_value()) {
        shared->finished = true;
        status = *shared->end_status;
        action = Action::kFinish;
      } else if (shared->operation != nullptr) {
        v1::Operation* message = shared->out.mutable_operation();
        message->Clear();
        reactor->service_->core().FillOperation(*shared->operation, message);
        if (message->done()) {
          shared->finished = true;
          shared->writing = true;
          action = Action::kWriteAndFinish;
        } else {
          std::string progress = message->metadata().SerializeAsString();
          if (!shared->sent_any || progress != shared->last_sent) {
            shared->sent_any = true;
            shared->last_sent = std::move(progress);
            shared->writing = true;
            action = Action::kWrite;
          }
        }
      }
    }
    if (action == Action::kWrite || action == Action::kWriteAndFinish) {
      // `out` is not touched by others while `writing` is set.
      absl::Status encoded = Encode(shared->out, &shared->out_buffer);
      if (!encoded.ok()) {
        action = Action::kFinish;
        status = encoded;
      }
    }
    switch (action) {
      case Action::kNothing:
        return;
      case Action::kWrite:
        reactor->StartWrite(&shared->out_buffer);
        return;
      case Action::kWriteAndFinish:
        (void)shared->record->Done(absl::OkStatus());  // the last message is encoded already
        reactor->StartWriteAndFinish(&shared->out_buffer, grpc::WriteOptions(), grpc::Status::OK);
        return;
      case Action::kFinish:
        reactor->Finish(ToGrpcStatus(shared->record->Done(status)));
        return;
    }
  }

  PlacementServiceImpl* service_;
  grpc::CallbackServerContext* context_;
  const v1::WatchOperationRequest* request_ = nullptr;
  std::shared_ptr<Shared> shared_;
  std::shared_ptr<jobs::Operation> operation_;
  uint64_t operation_listener_ = 0;
  uint64_t drain_subscription_ = 0;
};

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

void DrainSignal::CallOnce(bool* flag, Subscribers* list) {
  Subscribers to_call;
  {
    absl::MutexLock lock(&mu_);
    if (*flag) return;
    *flag = true;
    to_call.swap(*list);
  }
  for (auto& [id, callback] : to_call) callback();
}

void DrainSignal::Fire() { CallOnce(&fired_, &subscribers_); }

void DrainSignal::Abort() { CallOnce(&aborted_, &abort_subscribers_); }

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

PlacementServiceImpl::PlacementServiceImpl(PlacementCore* core, ServiceMetrics* metrics,
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

void PlacementServiceImpl::AbortWaits() { drain_.Abort(); }

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
  auto* reactor = new PlaceReactor(this, context);
  auto exchange = Open<v1::PlaceRequest, v1::PlaceResponse>(this, context, request, response,
                                                            reactor->record());
  if (!exchange.ok()) {
    reactor->FinishEarly(exchange.status());
    return reactor;
  }
  reactor->Bind(&(*exchange)->request, &(*exchange)->response);
  reactor->set_drop_request([exchange = std::weak_ptr(*exchange)] {
    if (auto alive = exchange.lock()) alive->DropRequest();
  });
  if (offload_ != nullptr) {
    reactor->StartOn(offload_.get());
  } else {
    reactor->Start();
  }
  return reactor;
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
  CallRecord record(this, Method::kGetOperation);
  auto exchange = Open<v1::GetOperationRequest, v1::GetOperationResponse>(this, context, request,
                                                                          response, record);
  if (!exchange.ok()) return FinishNow(context, record, exchange.status());
  const std::string& name = (*exchange)->request.name();
  record.entry().operation = name;  // logged quoted and cut, once authenticated
  absl::StatusOr<std::shared_ptr<jobs::Operation>> operation =
      core_->FindOperation(name, record.entry().tenant);
  if (!operation.ok()) return FinishNow(context, record, operation.status());
  record.entry().digest = (*operation)->request_digest();
  core_->FillOperation(**operation, (*exchange)->response.mutable_operation());
  return FinishNow(context, record, absl::OkStatus());
}

grpc::ServerUnaryReactor* PlacementServiceImpl::WaitOperation(grpc::CallbackServerContext* context,
                                                              const grpc::ByteBuffer* request,
                                                              grpc::ByteBuffer* response) {
  auto* reactor = new WaitReactor(this, context);
  auto exchange = Open<v1::WaitOperationRequest, v1::WaitOperationResponse>(
      this, context, request, response, reactor->record());
  if (!exchange.ok()) {
    reactor->FinishEarly(exchange.status());
    return reactor;
  }
  reactor->Start(&(*exchange)->request, &(*exchange)->response);
  return reactor;
}

grpc::ServerUnaryReactor* PlacementServiceImpl::CancelOperation(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  CallRecord record(this, Method::kCancelOperation);
  auto exchange = Open<v1::CancelOperationRequest, v1::CancelOperationResponse>(
      this, context, request, response, record);
  if (!exchange.ok()) return FinishNow(context, record, exchange.status());
  const std::string& name = (*exchange)->request.name();
  record.entry().operation = name;
  absl::StatusOr<std::shared_ptr<jobs::Operation>> operation =
      core_->CancelOperation(name, record.entry().tenant);
  if (!operation.ok()) return FinishNow(context, record, operation.status());
  record.entry().digest = (*operation)->request_digest();
  core_->FillOperation(**operation, (*exchange)->response.mutable_operation());
  return FinishNow(context, record, absl::OkStatus());
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* PlacementServiceImpl::WatchOperation(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  auto* reactor = new WatchReactor(this, context);
  auto exchange = Open<v1::WatchOperationRequest, v1::WatchOperationResponse>(
      this, context, request, /*out=*/nullptr, reactor->record());
  if (!exchange.ok()) {
    reactor->FinishEarly(exchange.status());
    return reactor;
  }
  reactor->Start(&(*exchange)->request);
  return reactor;
}

grpc::ServerUnaryReactor* PlacementServiceImpl::Evaluate(grpc::CallbackServerContext* context,
                                                         const grpc::ByteBuffer* request,
                                                         grpc::ByteBuffer* response) {
  auto* reactor = new EvaluateReactor(this, context);
  auto exchange = Open<v1::EvaluateRequest, v1::EvaluateResponse>(this, context, request,
                                                                  response, reactor->record());
  if (!exchange.ok()) {
    reactor->FinishEarly(exchange.status());
    return reactor;
  }
  reactor->Bind(&(*exchange)->request, &(*exchange)->response);
  reactor->set_drop_request([exchange = std::weak_ptr(*exchange)] {
    if (auto alive = exchange.lock()) alive->DropRequest();
  });
  reactor->Start();
  return reactor;
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
