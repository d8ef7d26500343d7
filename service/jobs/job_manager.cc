#include "service/jobs/job_manager.h"

#include <algorithm>
#include <deque>
#include <exception>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "service/status_payloads/status_payloads.h"
#include "service/jobs/worker_count.h"

namespace placement::jobs {
namespace {

int64_t Millis(absl::Duration d) { return absl::ToInt64Milliseconds(d); }

}  // namespace

JobManager::JobManager(JobManagerOptions options)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : Clock::Real()) {
  const int workers = options_.workers > 0 ? options_.workers : DefaultWorkerCount();
  threads_.reserve(workers);
  for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { WorkerLoop(); });
}

JobManager::~JobManager() { Shutdown(); }

absl::Status JobManager::Reject(absl::Status status, absl::string_view reason) const {
  if (options_.observer != nullptr) options_.observer->OnAdmissionRejected(reason);
  if (status.code() == absl::StatusCode::kUnavailable ||
      status.code() == absl::StatusCode::kResourceExhausted) {
    return status_payloads::WithRetryDelay(std::move(status), options_.retry_delay);
  }
  return status;
}

absl::StatusOr<Admission> JobManager::Acquire(JobSpec spec) {
  const absl::Time now = clock_->Now();
  absl::Status rejection;
  absl::string_view reason;
  std::string limited_tenant;  // set when the tenant's own limit refused it
  {
    absl::MutexLock lock(&mu_);
    if (!admitting_) {
      rejection = absl::UnavailableError("server is shutting down");
      reason = "draining";
    } else if (spec.deadline - now < options_.min_time_budget) {
      rejection = absl::DeadlineExceededError(absl::StrCat(
          "the deadline leaves ", Millis(spec.deadline - now), " ms, less than the ",
          Millis(options_.min_time_budget), " ms a placement needs at least"));
      reason = "deadline";
    } else if (auto it = spec.request_digest.empty() ? in_flight_.end()
                                                     : in_flight_.find(spec.request_digest);
               it != in_flight_.end()) {
      std::shared_ptr<Job> job = it->second;
      ++job->waiters_;
      job->deadline_cap_ = std::max(job->deadline_cap_, spec.deadline);
      if (job->state() == JobState::kQueued) {
        job->time_limit_ = std::max(job->time_limit_, spec.time_limit);
      }
      return Admission{std::move(job), /*coalesced=*/true};
    } else if (spec.tenant_limits.max_queued > 0 &&
               queue_.size_of(spec.tenant) >=
                   static_cast<size_t>(spec.tenant_limits.max_queued)) {
      rejection = absl::ResourceExhaustedError(absl::StrCat(
          "tenant \"", spec.tenant, "\" already has ", queue_.size_of(spec.tenant),
          " jobs waiting for a worker (its limit is ", spec.tenant_limits.max_queued,
          "); retry later"));
      reason = "tenant_queued";
      limited_tenant = spec.tenant;
    } else if (queue_.size() >= static_cast<size_t>(std::max(0, options_.max_queued_jobs))) {
      rejection = absl::UnavailableError(absl::StrCat(
          "the job queue is full (", queue_.size(), " jobs waiting for a worker); retry later"));
      reason = "queue_full";
    } else if (memory_in_use_ > 0 &&
               memory_in_use_ + spec.estimated_memory_bytes > options_.memory_budget_bytes) {
      rejection = absl::UnavailableError(absl::StrCat(
          "the job memory budget is exhausted (", memory_in_use_, " of ",
          options_.memory_budget_bytes, " bytes in use, this job needs about ",
          spec.estimated_memory_bytes, "); retry later"));
      reason = "memory";
    } else {
      auto job = std::make_shared<Job>(next_job_id_++, std::move(spec.request_digest),
                                       std::move(spec.tenant), std::move(spec.algorithm),
                                       spec.estimated_memory_bytes, now, std::move(spec.work),
                                       clock_, options_.progress_interval);
      job->waiters_ = 1;
      job->deadline_cap_ = spec.deadline;
      job->time_limit_ = spec.time_limit;
      memory_in_use_ += job->estimated_memory_bytes();
      tenants_[job->tenant()].limits = spec.tenant_limits;
      if (!job->request_digest().empty()) in_flight_[job->request_digest()] = job;
      queue_.Push(job->tenant(), job);
      return Admission{std::move(job), /*coalesced=*/false};
    }
  }
  if (reason == "tenant_queued") {
    if (options_.observer != nullptr) options_.observer->OnTenantRejected(limited_tenant, "queued");
  }
  return Reject(std::move(rejection), reason);
}

void JobManager::Join(const std::shared_ptr<Job>& job) {
  absl::MutexLock lock(&mu_);
  ++job->waiters_;
}

void JobManager::Release(const std::shared_ptr<Job>& job) {
  bool dequeued = false;
  {
    absl::MutexLock lock(&mu_);
    if (--job->waiters_ > 0 || job->done() || job->cancelled_.load()) return;
    job->cancel_status_ = absl::CancelledError("cancelled: no caller is waiting for the result");
    job->cancelled_.store(true);
    auto it = in_flight_.find(job->request_digest());
    if (it != in_flight_.end() && it->second == job) in_flight_.erase(it);
    if (queue_.Remove(job->tenant(), job)) {
      memory_in_use_ -= job->estimated_memory_bytes();
      dequeued = true;
    }
  }
  if (dequeued) CompleteDequeued(job);
  // A running job notices cancelled_ and ends through Finish() on its worker.
}

void JobManager::CompleteDequeued(const std::shared_ptr<Job>& job) {
  JobResult result;
  result.placement = job->cancel_status_;
  result.queue_time = clock_->Now() - job->admitted_at();
  job->work_ = nullptr;
  if (options_.observer != nullptr) options_.observer->OnJobFinished(*job, result);
  job->Complete(std::move(result));
}

void JobManager::StopAdmitting() {
  absl::MutexLock lock(&mu_);
  admitting_ = false;
}

void JobManager::Shutdown() {
  absl::MutexLock shutdown_lock(&shutdown_mu_);
  std::deque<std::shared_ptr<Job>> dropped;
  {
    absl::MutexLock lock(&mu_);
    admitting_ = false;
    stopping_ = true;
    dropped = queue_.Drain();
    const absl::Status shutting_down = absl::UnavailableError("server is shutting down");
    for (const std::shared_ptr<Job>& job : dropped) {
      memory_in_use_ -= job->estimated_memory_bytes();
      job->cancel_status_ = shutting_down;
      job->cancelled_.store(true);
      auto it = in_flight_.find(job->request_digest());
      if (it != in_flight_.end() && it->second == job) in_flight_.erase(it);
    }
    for (const std::shared_ptr<Job>& job : running_) {
      if (!job->cancelled_.load()) {
        job->cancel_status_ = shutting_down;
        job->cancelled_.store(true);
      }
    }
  }
  for (const std::shared_ptr<Job>& job : dropped) CompleteDequeued(job);
  for (std::thread& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
}

JobManagerStats JobManager::Stats() const {
  absl::MutexLock lock(&mu_);
  JobManagerStats stats;
  stats.workers = static_cast<int>(threads_.size());
  stats.queued = static_cast<int64_t>(queue_.size());
  stats.running = static_cast<int64_t>(running_.size());
  stats.in_flight = static_cast<int64_t>(in_flight_.size());
  stats.memory_in_use_bytes = memory_in_use_;
  stats.admitting = admitting_;
  return stats;
}

void JobManager::WorkerLoop() {
  while (true) {
    std::shared_ptr<Job> job;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &JobManager::HasWorkOrStopping));
      std::optional<std::shared_ptr<Job>> next = queue_.PopEligible(MayStart());
      if (!next.has_value()) return;  // stopping
      job = *std::move(next);
      ++tenants_[job->tenant()].running;
      running_.insert(job);
      job->started_at_ = clock_->Now();
    }
    Run(job);
  }
}

// An exception escaping the work would end the worker thread and with it the process (std::terminate):
// every other caller would lose its answer. It fails only this job, as INTERNAL, with what it said.
absl::StatusOr<PlacementPtr> JobManager::RunWork(JobWork& work, const JobContext& context) {
  try {
    return work(context);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("the algorithm failed with an exception: ", e.what()));
  } catch (...) {
    return absl::InternalError("the algorithm failed with an exception of unknown type");
  }
}

void JobManager::Run(const std::shared_ptr<Job>& job) {
  absl::Time deadline;
  bool too_late = false;
  {
    absl::MutexLock lock(&mu_);
    deadline = std::min(job->started_at_ + job->time_limit_, job->deadline_cap_);
    too_late = job->deadline_cap_ - job->started_at_ < options_.min_time_budget;
  }
  if (too_late) {
    Finish(job,
           absl::DeadlineExceededError(
               "the deadline passed (or nearly) while the job waited for a worker"),
           /*ran=*/false);
    return;
  }
  job->MarkRunning();
  if (options_.observer != nullptr) options_.observer->OnJobStarted(*job);
  JobContext context(job.get(), deadline, clock_);
  Finish(job, RunWork(job->work_, context), /*ran=*/true);
}

void JobManager::Finish(const std::shared_ptr<Job>& job, absl::StatusOr<PlacementPtr> placement,
                        bool ran) {
  const absl::Time now = clock_->Now();
  JobResult result;
  {
    absl::MutexLock lock(&mu_);
    running_.erase(job);
    --tenants_[job->tenant()].running;
    memory_in_use_ -= job->estimated_memory_bytes();
    auto it = in_flight_.find(job->request_digest());
    if (it != in_flight_.end() && it->second == job) in_flight_.erase(it);
    // Nobody wants a result that was cancelled: report why it was cancelled instead.
    if (job->cancelled_.load()) placement = job->cancel_status_;
  }
  job->work_ = nullptr;  // frees what the work captured (the model) before waiters are told
  result.placement = std::move(placement);
  result.queue_time = job->started_at_ - job->admitted_at();
  result.solve_time = ran ? now - job->started_at_ : absl::ZeroDuration();
  result.ran = ran;
  // The observer (metrics) sees the result before any waiter wakes, so a caller that got its
  // answer and then scrapes the counters always finds this job counted.
  if (options_.observer != nullptr) options_.observer->OnJobFinished(*job, result);
  job->Complete(std::move(result));
}

}  // namespace placement::jobs
