#include "service/jobs/job.h"

#include <algorithm>
#include <utility>

namespace placement::jobs {

const std::atomic<bool>* JobContext::cancelled_flag() const { return &job_->cancelled_; }

void JobContext::ReportProgress(absl::string_view stage, double fraction,
                                int64_t best_makespan_ns) const {
  job_->UpdateProgress(stage, fraction, best_makespan_ns, /*force=*/false);
}

Job::Job(uint64_t id, std::string request_digest, std::string tenant, std::string algorithm,
         int64_t estimated_memory_bytes, absl::Time admitted_at, JobWork work, const Clock* clock,
         absl::Duration progress_interval)
    : id_(id),
      request_digest_(std::move(request_digest)),
      tenant_(std::move(tenant)),
      algorithm_(std::move(algorithm)),
      estimated_memory_bytes_(estimated_memory_bytes),
      admitted_at_(admitted_at),
      clock_(clock),
      progress_interval_(progress_interval),
      work_(std::move(work)) {}

JobState Job::state() const {
  absl::MutexLock lock(&mu_);
  return state_;
}

JobProgress Job::progress() const {
  absl::MutexLock lock(&mu_);
  return progress_;
}

uint64_t Job::AddListener(Listener listener) {
  absl::MutexLock lock(&mu_);
  if (state_ == JobState::kDone) return 0;
  return listeners_.Add(std::move(listener));
}

void Job::RemoveListener(uint64_t id) {
  absl::MutexLock lock(&mu_);
  listeners_.Remove(id);
}

void Job::UpdateProgress(absl::string_view stage, double fraction, int64_t best_makespan_ns,
                         bool force) {
  SubscriberList<const Job&>::Taken to_notify;
  {
    absl::MutexLock lock(&mu_);
    if (state_ == JobState::kDone) return;
    const bool stage_changed = progress_.stage != stage;
    if (stage_changed) progress_.stage = std::string(stage);
    progress_.fraction = std::clamp(fraction, 0.0, 1.0);
    if (best_makespan_ns > 0) progress_.best_makespan_ns = best_makespan_ns;
    const absl::Time now = clock_->Now();
    if (!force && !stage_changed && now - last_notified_ < progress_interval_) return;
    last_notified_ = now;
    to_notify = listeners_.Take(/*clear=*/false);
  }
  SubscriberList<const Job&>::Call(to_notify, *this);
}

void Job::MarkRunning() {
  {
    absl::MutexLock lock(&mu_);
    state_ = JobState::kRunning;
  }
  UpdateProgress("running", 0.0, 0, /*force=*/true);
}

void Job::Complete(JobResult result) {
  SubscriberList<const Job&>::Taken to_notify;
  {
    absl::MutexLock lock(&mu_);
    if (state_ == JobState::kDone) return;
    result_ = std::move(result);
    progress_.stage = "done";
    if (result_.placement.ok()) progress_.fraction = 1.0;
    state_ = JobState::kDone;
    to_notify = listeners_.Take(/*clear=*/true);
  }
  SubscriberList<const Job&>::Call(to_notify, *this);
}

}  // namespace placement::jobs
