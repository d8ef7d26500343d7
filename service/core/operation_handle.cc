#include "service/core/operation_handle.h"

#include <utility>

#include "absl/status/status.h"
#include "service/core/caller_order.h"
#include "service/core/status_proto.h"
#include "service/jobs/operation_registry.h"

namespace placement::core {

OperationHandle::OperationHandle(std::shared_ptr<jobs::Operation> operation)
    : operation_(std::move(operation)) {}

const std::string& OperationHandle::name() const { return operation_->name(); }

const std::string& OperationHandle::request_digest() const {
  return operation_->request_digest();
}

void OperationHandle::Fill(v1::Operation* out) const {
  const jobs::Operation::Snapshot snapshot = operation_->snapshot();
  out->set_name(operation_->name());
  v1::OperationProgress* progress = out->mutable_metadata();
  progress->set_stage(snapshot.progress.stage);
  progress->set_fraction(snapshot.progress.fraction);
  progress->set_best_makespan_ns(snapshot.progress.best_makespan_ns);
  progress->set_request_digest(operation_->request_digest());
  out->set_done(snapshot.done);
  if (!snapshot.done) return;
  if (!snapshot.error.ok() || snapshot.placement == nullptr) {
    *out->mutable_error() = StatusToProto(
        snapshot.error.ok() ? absl::InternalError("operation finished without a result")
                            : snapshot.error);
    return;
  }
  WriteInCallerOrder(*snapshot.placement, operation_->request_index().get(), snapshot.cache,
                     snapshot.queue_time, out->mutable_response()->mutable_placement());
}

uint64_t OperationHandle::Subscribe(std::function<void(bool done)> on_change) const {
  return operation_->AddListener(
      [on_change = std::move(on_change)](const jobs::Operation& changed) {
        on_change(changed.done());
      });
}

void OperationHandle::Unsubscribe(uint64_t id) const {
  if (id != 0) operation_->RemoveListener(id);
}

}  // namespace placement::core
