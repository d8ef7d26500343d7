#include "service/core/pending_answer.h"

#include <utility>

#include "service/jobs/job.h"
#include "service/jobs/job_manager.h"

namespace placement::core {

JobAnswer::JobAnswer(jobs::JobManager* jobs, std::shared_ptr<jobs::Job> job, Writer write)
    : jobs_(jobs), job_(std::move(job)), write_(std::move(write)) {}

JobAnswer::~JobAnswer() { Release(); }

void JobAnswer::OnDone(std::function<void()> on_done) {
  {
    absl::MutexLock lock(&mu_);
    if (released_) return;
  }
  const uint64_t id = job_->AddListener([on_done](const jobs::Job& job) {
    if (job.done()) on_done();
  });
  if (id == 0) {  // done already
    on_done();
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    if (!released_) {
      listener_ = id;
      return;
    }
  }
  job_->RemoveListener(id);  // released while the listener was being added
}

absl::Status JobAnswer::Finish() {
  Release();
  const jobs::JobResult& result = job_->result();
  if (!result.placement.ok()) return result.placement.status();
  return write_(result);
}

void JobAnswer::Release() {
  uint64_t listener = 0;
  {
    absl::MutexLock lock(&mu_);
    if (released_) return;
    released_ = true;
    listener = listener_;
    listener_ = 0;
  }
  if (listener != 0) job_->RemoveListener(listener);
  jobs_->Release(job_);
}

absl::Duration JobAnswer::queue_time() const { return job_->result().queue_time; }

absl::Duration JobAnswer::solve_time() const { return job_->result().solve_time; }

}  // namespace placement::core
