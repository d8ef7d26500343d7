// job_manager.h — admission control, a fair queue, a worker pool and single-flight for placement jobs.
//
// Acquire() either attaches the caller to an identical job already queued or running (same non-empty
// `request_digest`: single-flight, reported as coalesced) or admits a new job. Admission is bounded by two
// resources (the ScyllaDB semaphore model): the number of jobs waiting for a worker and the estimated
// memory of all queued and running jobs; when either is exhausted the caller gets UNAVAILABLE with a
// RetryInfo payload (common/status_payloads.h). A caller whose deadline leaves less than
// `min_time_budget` gets DEADLINE_EXCEEDED at once instead of queueing doomed work.
//
// Every Acquire() that succeeds must be balanced by one Release() (the caller stopped waiting: its RPC
// finished, was cancelled, or its operation was cancelled). When the last waiter of an unfinished job
// releases it, the job is cancelled: removed from the queue, or told to stop through its cancellation
// flag if it is running — so a caller going away frees its worker, but only when nobody else waits.
//
// Per tenant (TenantJobLimits): at most max_queued jobs waiting (one more → RESOURCE_EXHAUSTED with
// RetryInfo) and at most max_running on workers (its further jobs wait even when a worker is free, so
// other tenants' jobs go first). Joining an in-flight job is never limited: it adds no work.
//
// Queued jobs are served round-robin across tenants (fair_queue.h), FIFO within a tenant. Workers turn
// the job's time limit and its waiters' latest deadline into the work function's deadline.
//
// Example:
//   JobManager jobs({.workers = 4});
//   JobSpec spec{.request_digest = digest, .time_limit = absl::Seconds(30),
//                .deadline = rpc_deadline, .work = [](const JobContext& ctx) { return Solve(ctx); }};
//   absl::StatusOr<Admission> admitted = jobs.Acquire(std::move(spec));
//   if (!admitted.ok()) return admitted.status();   // UNAVAILABLE / DEADLINE_EXCEEDED
//   ... admitted->job->AddListener(...) ...
//   jobs.Release(admitted->job);                    // when this caller no longer waits
#ifndef PLACEMENT_SERVICE_JOBS_JOB_MANAGER_H_
#define PLACEMENT_SERVICE_JOBS_JOB_MANAGER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "service/clock/clock.h"
#include "service/jobs/fair_queue.h"
#include "service/jobs/job.h"

namespace placement::jobs {

// Hooks for metrics; called without JobManager's lock held. Must be thread-safe.
class JobObserver {
 public:
  virtual ~JobObserver() = default;
  // reason: "queue_full", "memory", "draining", "deadline" or "tenant_queued".
  virtual void OnAdmissionRejected(absl::string_view reason) {}
  // A tenant was refused for its own limit (TenantJobLimits); reason: "queued".
  virtual void OnTenantRejected(absl::string_view tenant, absl::string_view reason) {}
  virtual void OnJobStarted(const Job& job) {}
  // Every job ends here exactly once, whether it ran or not (result.ran), before anyone waiting
  // on the job is woken.
  virtual void OnJobFinished(const Job& job, const JobResult& result) {}
};

// What one tenant may hold of the queue and the workers (0 = unlimited). The server sets them per
// tenant (flags, tokens file: service/server/tenant_limits.h).
struct TenantJobLimits {
  // Jobs on workers at once: further jobs wait in the queue even when a worker is free, so one
  // tenant cannot take every worker with long jobs.
  int max_running = 0;
  // Jobs waiting for a worker; one more → RESOURCE_EXHAUSTED.
  int max_queued = 0;

  bool operator==(const TenantJobLimits& other) const {
    return max_running == other.max_running && max_queued == other.max_queued;
  }
};

struct JobManagerOptions {
  // Worker threads; 0 = DefaultWorkerCount() (the cgroup v2 CPU quota, else the hardware's threads).
  int workers = 0;
  // Jobs waiting for a worker (running jobs do not count). One more → UNAVAILABLE.
  int max_queued_jobs = 64;
  // Budget for the estimated memory of all queued and running jobs. A job that would exceed it →
  // UNAVAILABLE, except that a job is always admitted when nothing else is queued or running.
  int64_t memory_budget_bytes = int64_t{4} << 30;
  // A caller whose deadline leaves less than this gets DEADLINE_EXCEEDED without queueing; a queued job
  // whose waiters' deadlines leave less than this when a worker takes it ends with DEADLINE_EXCEEDED.
  absl::Duration min_time_budget = absl::Milliseconds(100);
  // Suggested wait before retrying, sent with UNAVAILABLE.
  absl::Duration retry_delay = absl::Seconds(1);
  // Listeners hear about progress at most this often per job (stage changes always get through).
  absl::Duration progress_interval = absl::Milliseconds(100);
  // Null = Clock::Real().
  const Clock* clock = nullptr;
  // Optional; must outlive the manager.
  JobObserver* observer = nullptr;
};

struct JobSpec {
  // Single-flight key: jobs with the same non-empty digest are shared. "" = never shared.
  std::string request_digest;
  // Fair-queueing key: the authenticated tenant ("" without authentication).
  std::string tenant;
  // The tenant's limits (the rate is enforced before admission, by the server). The latest admitted
  // spec's limits hold for the tenant's queued and running jobs.
  TenantJobLimits tenant_limits;
  // For metrics and logs.
  std::string algorithm;
  // How long the work may run once a worker starts it.
  absl::Duration time_limit = absl::Seconds(60);
  // The caller's deadline (InfiniteFuture for long-running operations). The work must end before the
  // latest deadline among the job's waiters.
  absl::Time deadline = absl::InfiniteFuture();
  int64_t estimated_memory_bytes = 0;
  JobWork work;
};

struct Admission {
  std::shared_ptr<Job> job;
  bool coalesced = false;  // joined a job another caller had started
};

struct JobManagerStats {
  int workers = 0;
  int64_t queued = 0;
  int64_t running = 0;
  int64_t in_flight = 0;  // distinct digests queued or running
  int64_t memory_in_use_bytes = 0;
  bool admitting = true;
};

class JobManager {
 public:
  explicit JobManager(JobManagerOptions options);
  // Calls Shutdown().
  ~JobManager();
  JobManager(const JobManager&) = delete;
  JobManager& operator=(const JobManager&) = delete;

  // Joins or admits a job for `spec` and counts the caller as one of its waiters.
  // UNAVAILABLE (+ retry delay) when the queue or the memory budget is full or the manager is draining;
  // RESOURCE_EXHAUSTED (+ retry delay) when the tenant already has spec.tenant_limits.max_queued jobs
  // waiting; DEADLINE_EXCEEDED when spec.deadline leaves less than min_time_budget.
  absl::StatusOr<Admission> Acquire(JobSpec spec) ABSL_LOCKS_EXCLUDED(mu_);

  // Counts one more waiter of `job` (which an Acquire returned and that still has a waiter), balanced
  // by one Release like an Acquire. Unlike Acquire with the same spec, it never admits a second job
  // when `job` has just finished: a job that fast is simply held done.
  void Join(const std::shared_ptr<Job>& job) ABSL_LOCKS_EXCLUDED(mu_);

  // One waiter of `job` stopped waiting. Cancels the job when it was the last and the job is not done.
  void Release(const std::shared_ptr<Job>& job) ABSL_LOCKS_EXCLUDED(mu_);

  // From now on Acquire() answers UNAVAILABLE; queued and running jobs go on.
  void StopAdmitting() ABSL_LOCKS_EXCLUDED(mu_);

  // Stops admitting, ends queued jobs and cancels running ones (both end with UNAVAILABLE "server is
  // shutting down"), then joins the workers. Idempotent.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  JobManagerStats Stats() const ABSL_LOCKS_EXCLUDED(mu_);
  int workers() const { return static_cast<int>(threads_.size()); }
  const Clock& clock() const { return *clock_; }

 private:
  void WorkerLoop();
  void Run(const std::shared_ptr<Job>& job);
  static absl::StatusOr<PlacementPtr> RunWork(JobWork& work, const JobContext& context);
  // Bookkeeping for a job that ends (ran or not), then completes it and notifies.
  void Finish(const std::shared_ptr<Job>& job, absl::StatusOr<PlacementPtr> placement, bool ran)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Reject(absl::Status status, absl::string_view reason) const;
  // Ends a job taken off the queue before it ran (released by its last caller, or dropped at
  // shutdown): its answer is its cancel_status_, its time so far was all queue time.
  void CompleteDequeued(const std::shared_ptr<Job>& job) ABSL_LOCKS_EXCLUDED(mu_);
  struct TenantState {
    TenantJobLimits limits;
    int running = 0;
  };
  // Whether a tenant may start one more job (it is below its max_running). Called with mu_ held.
  struct MayStartPredicate {
    const JobManager* manager;
    bool operator()(const std::string& tenant) const {
      auto it = manager->tenants_.find(tenant);
      if (it == manager->tenants_.end()) return true;
      const int max_running = it->second.limits.max_running;
      return max_running <= 0 || it->second.running < max_running;
    }
  };
  MayStartPredicate MayStart() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return MayStartPredicate{this};
  }
  bool HasWorkOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || queue_.HasEligible(MayStart());
  }

  const JobManagerOptions options_;
  const Clock* const clock_;

  mutable absl::Mutex mu_;
  bool admitting_ ABSL_GUARDED_BY(mu_) = true;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_job_id_ ABSL_GUARDED_BY(mu_) = 1;
  FairQueue<std::shared_ptr<Job>> queue_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<Job>> in_flight_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::shared_ptr<Job>> running_ ABSL_GUARDED_BY(mu_);
  int64_t memory_in_use_ ABSL_GUARDED_BY(mu_) = 0;
  // Tenants that ever had a job admitted (bounded: tenants come from the tokens file).
  absl::flat_hash_map<std::string, TenantState> tenants_ ABSL_GUARDED_BY(mu_);

  std::vector<std::thread> threads_;
  absl::Mutex shutdown_mu_;  // serialises Shutdown()
};

}  // namespace placement::jobs

#endif  // PLACEMENT_SERVICE_JOBS_JOB_MANAGER_H_
