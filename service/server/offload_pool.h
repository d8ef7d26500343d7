// offload_pool.h — a few threads for the parts of a call that may wait on the network (the shared
// cache tier's lookups), so that gRPC's callback threads never do.
//
// gRPC's callback API runs every handler on a small shared set of threads; a handler that blocks there
// (for instance for a Redis round trip of up to --redis_timeout) stalls unrelated calls. The service
// hands such work to this pool instead and finishes the call from here.
//
// Example:
//   OffloadPool pool(/*threads=*/4, /*max_queued=*/1024);
//   if (!pool.TryPost([reactor] { reactor->Start(); })) { ... answer UNAVAILABLE, retry later ... }
#ifndef PLACEMENT_SERVICE_SERVER_OFFLOAD_POOL_H_
#define PLACEMENT_SERVICE_SERVER_OFFLOAD_POOL_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace placement::server {

class OffloadPool {
 public:
  // `threads` >= 1; at most `max_queued` tasks wait for a thread.
  OffloadPool(int threads, size_t max_queued);
  // Runs every task still queued (each one finishes a call that would otherwise hang), then joins.
  ~OffloadPool();

  OffloadPool(const OffloadPool&) = delete;
  OffloadPool& operator=(const OffloadPool&) = delete;

  // Queues `task`; false (and `task` dropped unrun) when `max_queued` tasks are already waiting.
  bool TryPost(std::function<void()> task) ABSL_LOCKS_EXCLUDED(mu_);
  size_t queued() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  bool HasTaskOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !tasks_.empty() || stopping_;
  }

  const size_t max_queued_;
  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVICE_SERVER_OFFLOAD_POOL_H_
