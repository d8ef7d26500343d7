// operation_handle.h — one long-running operation as the calls that read or follow it see it.
//
// PlacementCore::FindOperation returns one for WaitOperation and WatchOperation: the adapter
// subscribes to its changes and renders its state as the API's Operation, without seeing the jobs or
// the registry behind it (a local job, a cache hit, or another replica's job followed through Redis).
//
// Example (WaitOperation):
//   absl::StatusOr<OperationHandle> op = core.FindOperation(name, tenant);
//   uint64_t id = op->Subscribe([](bool done) { if (done) Reply(); });
//   if (id == 0) Reply();  // done already
//   ... op->Fill(response.mutable_operation()); op->Unsubscribe(id);
#ifndef PLACEMENT_SERVICE_CORE_OPERATION_HANDLE_H_
#define PLACEMENT_SERVICE_CORE_OPERATION_HANDLE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "placement/v1/operation.pb.h"

namespace placement::jobs {
class Operation;
}  // namespace placement::jobs

namespace placement::core {

class OperationHandle {
 public:
  // The core's.
  explicit OperationHandle(std::shared_ptr<jobs::Operation> operation);

  const std::string& name() const;
  const std::string& request_digest() const;

  // Its current state: done = false with progress only; done = true with exactly one of the result
  // (mapped to the caller's op order) and the error.
  void Fill(v1::Operation* out) const;

  // Calls `on_change(done)` after every change (progress, and once when done), outside every lock, on
  // the thread that changed it; returns its id, or 0 without subscribing when the operation is done
  // already. It may run once after Unsubscribe returns, so it must own what it touches.
  uint64_t Subscribe(std::function<void(bool done)> on_change) const;
  void Unsubscribe(uint64_t id) const;

 private:
  std::shared_ptr<jobs::Operation> operation_;
};

}  // namespace placement::core

#endif  // PLACEMENT_SERVICE_CORE_OPERATION_HANDLE_H_
