#include "service/server/operation_reactors.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <grpcpp/alarm.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "service/status_payloads/status_payloads.h"
#include "service/server/first_wins.h"
#include "service/server/raw_call.h"
#include "service/server/status_mapping.h"

namespace placement::server {
namespace {

// ---- WaitOperation ----

class WaitReactor final : public grpc::ServerUnaryReactor {
 public:
  WaitReactor(PlacementServiceImpl* service, grpc::CallbackServerContext* context)
      : service_(service),
        context_(context),
        record_(service, Method::kWaitOperation) {}

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
        FinishEarly(status_payloads::WithFieldViolations(
            absl::InvalidArgumentError(
                "timeout: must be a non-negative duration (seconds ≥ 0, nanos in [0, 999999999])"),
            {{"timeout", "must be a non-negative duration (seconds ≥ 0, nanos in [0, 999999999])"}}));
        return;
      }
    }
    absl::StatusOr<core::OperationHandle> op =
        service_->core().FindOperation(request_->name(), record_.entry().tenant);
    if (!op.ok()) {
      if (Claim()) Complete(op.status());
      return;
    }
    operation_.emplace(*std::move(op));
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

    // Whichever of {operation done, drain, timeout, caller cancelled} comes first replies.
    operation_listener_ =
        operation_->Subscribe([first_wins = first_wins_, reactor = this](bool done) mutable {
          if (done && first_wins.Claim()) reactor->Reply();
        });
    if (operation_listener_ == 0) {  // done already
      if (Claim()) Reply();
      return;
    }
    drain_subscription_ =
        service_->drain().Subscribe([first_wins = first_wins_, reactor = this]() mutable {
          if (first_wins.Claim()) reactor->Reply();
        });
    if (drain_subscription_ == 0) {
      if (Claim()) Reply();
      return;
    }
    if (until <= now) {
      if (Claim()) Reply();
      return;
    }
    alarm_.Set(absl::ToChronoTime(until),
               [first_wins = first_wins_, reactor = this](bool fired) mutable {
                 if (fired && first_wins.Claim()) reactor->Reply();
               });
  }

  void OnCancel() override {
    if (Claim()) Complete(absl::CancelledError("the caller cancelled the call"));
  }

  void OnDone() override {
    if (operation_.has_value()) operation_->Unsubscribe(operation_listener_);
    service_->drain().Unsubscribe(drain_subscription_);
    delete this;
  }

 private:
  bool Claim() { return first_wins_.Claim(); }
  void Reply() {
    operation_->Fill(response_->mutable_operation());
    Complete(absl::OkStatus());
  }
  void Complete(const absl::Status& status) { Finish(ToGrpcStatus(record_.Done(status))); }

  PlacementServiceImpl* service_;
  grpc::CallbackServerContext* context_;
  const v1::WaitOperationRequest* request_ = nullptr;
  v1::WaitOperationResponse* response_ = nullptr;
  CallRecord record_;
  FirstWins first_wins_;
  std::optional<core::OperationHandle> operation_;
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
    absl::StatusOr<core::OperationHandle> op =
        service_->core().FindOperation(request_->name(), tenant);
    if (!op.ok()) {
      EndWith(op.status());
      return;
    }
    {
      absl::MutexLock lock(&shared_->mu);
      shared_->operation = *op;
      shared_->record->entry().digest = op->request_digest();
    }
    std::shared_ptr<Shared> shared = shared_;
    operation_.emplace(*std::move(op));
    operation_listener_ = operation_->Subscribe([shared](bool) { Step(shared); });
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
    if (operation_.has_value()) operation_->Unsubscribe(operation_listener_);
    service_->drain().Unsubscribe(drain_subscription_);
    delete this;
  }

 private:
  struct Shared {
    absl::Mutex mu;
    WatchReactor* reactor = nullptr;
    std::optional<CallRecord> record;
    std::optional<core::OperationHandle> operation ABSL_GUARDED_BY(mu);
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
    return status_payloads::WithRetryDelay(
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
      } else if (shared->operation.has_value()) {
        v1::Operation* message = shared->out.mutable_operation();
        message->Clear();
        shared->operation->Fill(message);
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
  std::optional<core::OperationHandle> operation_;
  uint64_t operation_listener_ = 0;
  uint64_t drain_subscription_ = 0;
};

}  // namespace

grpc::ServerUnaryReactor* StartWaitOperationCall(PlacementServiceImpl* service,
                                                 grpc::CallbackServerContext* context,
                                                 const grpc::ByteBuffer* request,
                                                 grpc::ByteBuffer* response) {
  auto* reactor = new WaitReactor(service, context);
  auto exchange = Open<v1::WaitOperationRequest, v1::WaitOperationResponse>(
      service, context, request, response, reactor->record());
  if (!exchange.ok()) {
    reactor->FinishEarly(exchange.status());
    return reactor;
  }
  reactor->Start(&(*exchange)->request, &(*exchange)->response);
  return reactor;
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* StartWatchOperationCall(
    PlacementServiceImpl* service, grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* request) {
  auto* reactor = new WatchReactor(service, context);
  auto exchange = Open<v1::WatchOperationRequest, v1::WatchOperationResponse>(
      service, context, request, /*out=*/nullptr, reactor->record());
  if (!exchange.ok()) {
    reactor->FinishEarly(exchange.status());
    return reactor;
  }
  reactor->Start(&(*exchange)->request);
  return reactor;
}

}  // namespace placement::server
