#include "service/server/offload_pool.h"

#include <algorithm>
#include <utility>

namespace placement::server {

OffloadPool::OffloadPool(int threads, size_t max_queued) : max_queued_(max_queued) {
  threads = std::max(1, threads);
  threads_.reserve(static_cast<size_t>(threads));
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
}

OffloadPool::~OffloadPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& thread : threads_) thread.join();
}

bool OffloadPool::TryPost(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  if (stopping_ || tasks_.size() >= max_queued_) return false;
  tasks_.push_back(std::move(task));
  return true;
}

size_t OffloadPool::queued() const {
  absl::MutexLock lock(&mu_);
  return tasks_.size();
}

void OffloadPool::Loop() {
  while (true) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &OffloadPool::HasTaskOrStopping));
      if (tasks_.empty()) return;  // stopping, and nothing left to run
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace placement::server
