// job.h — one placement computation, shared by every caller waiting for it.
//
// A Job is created by JobManager::Acquire (job_manager.h) and runs once on a worker. Callers watch it
// through listeners, which are called (outside every lock) after each progress change and once when the
// job is done. Once done() is true, result() is immutable.
//
// The work itself is a JobWork function: it receives a JobContext (deadline, cancellation flag, progress
// reporting, clock) and returns the placement in *canonical* op order (see service/cache/canonical_order.h),
// so that each waiter can map it to its own op order.
//
// Example:
//   absl::StatusOr<Admission> admitted = jobs.Acquire(std::move(spec));
//   uint64_t id = admitted->job->AddListener([](const Job& job) {
//     if (job.done()) Reply(job.result());
//   });
//   if (id == 0) Reply(admitted->job->result());  // finished before the listener was added
#ifndef PLACEMENT_SERVICE_JOBS_JOB_H_
#define PLACEMENT_SERVICE_JOBS_JOB_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "placement/v1/placement.pb.h"
#include "service/clock/clock.h"
#include "service/subscribers/subscriber_list.h"

namespace placement::jobs {

// A finished placement, immutable and shared by every waiter and the cache.
using PlacementPtr = std::shared_ptr<const v1::Placement>;

enum class JobState { kQueued, kRunning, kDone };

struct JobProgress {
  std::string stage = "queued";  // "queued", "running", the algorithm's stages, "done"
  double fraction = 0.0;         // in [0, 1]
  int64_t best_makespan_ns = 0;  // best feasible makespan so far; 0 = none yet
};

struct JobResult {
  // The placement in canonical op order, or why there is none (CANCELLED, DEADLINE_EXCEEDED,
  // UNAVAILABLE when the server shut down, or the algorithm's own error).
  absl::StatusOr<PlacementPtr> placement = absl::UnknownError("job not done");
  absl::Duration queue_time;  // admission until a worker took it (or until it ended, if it never ran)
  absl::Duration solve_time;  // worker start until the end; zero if it never ran
  bool ran = false;           // the work function was called
};

class Job;

// What the work function sees while it runs.
class JobContext {
 public:
  JobContext(Job* job, absl::Time deadline, const Clock* clock)
      : job_(job), deadline_(deadline), clock_(clock) {}

  // Stop and return the best answer so far when the clock passes this.
  absl::Time deadline() const { return deadline_; }
  // Set when nobody waits for the result any more (or the server shuts down).
  const std::atomic<bool>* cancelled_flag() const;
  bool cancelled() const { return cancelled_flag()->load(std::memory_order_relaxed); }
  const Clock& clock() const { return *clock_; }
  // Thread-safe; throttled (see JobManagerOptions::progress_interval).
  void ReportProgress(absl::string_view stage, double fraction, int64_t best_makespan_ns) const;

 private:
  Job* job_;
  absl::Time deadline_;
  const Clock* clock_;
};

using JobWork = absl::AnyInvocable<absl::StatusOr<PlacementPtr>(const JobContext&)>;

class Job {
 public:
  using Listener = std::function<void(const Job&)>;

  Job(uint64_t id, std::string request_digest, std::string tenant, std::string algorithm,
      int64_t estimated_memory_bytes, absl::Time admitted_at, JobWork work, const Clock* clock,
      absl::Duration progress_interval);
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  uint64_t id() const { return id_; }
  // Single-flight key ("" = never shared).
  const std::string& request_digest() const { return request_digest_; }
  const std::string& tenant() const { return tenant_; }
  const std::string& algorithm() const { return algorithm_; }
  int64_t estimated_memory_bytes() const { return estimated_memory_bytes_; }
  absl::Time admitted_at() const { return admitted_at_; }

  JobState state() const ABSL_LOCKS_EXCLUDED(mu_);
  bool done() const ABSL_LOCKS_EXCLUDED(mu_) { return state() == JobState::kDone; }
  JobProgress progress() const ABSL_LOCKS_EXCLUDED(mu_);
  // True once the job was told to stop (its last waiter left, or the server is shutting down).
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }
  // Only valid once done(); immutable from then on.
  const JobResult& result() const { return result_; }

  // Registers `listener` and returns its id, or returns 0 without registering when the job is already
  // done (the caller then reads result() itself). Listeners run on the thread that changed the job (a
  // worker, or a thread that cancelled it), never under a lock; a listener may still run once after
  // RemoveListener returns, so it must own (shared_ptr) whatever it touches.
  uint64_t AddListener(Listener listener) ABSL_LOCKS_EXCLUDED(mu_);
  void RemoveListener(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  friend class JobManager;
  friend class JobContext;

  void UpdateProgress(absl::string_view stage, double fraction, int64_t best_makespan_ns,
                      bool force) ABSL_LOCKS_EXCLUDED(mu_);
  void MarkRunning() ABSL_LOCKS_EXCLUDED(mu_);
  void Complete(JobResult result) ABSL_LOCKS_EXCLUDED(mu_);

  const uint64_t id_;
  const std::string request_digest_;
  const std::string tenant_;
  const std::string algorithm_;
  const int64_t estimated_memory_bytes_;
  const absl::Time admitted_at_;
  const Clock* const clock_;
  const absl::Duration progress_interval_;

  // Owned by JobManager and only touched under JobManager's mutex (or by the one worker running it).
  JobWork work_;
  int waiters_ = 0;
  absl::Time deadline_cap_ = absl::InfinitePast();  // latest deadline of any waiter
  absl::Duration time_limit_;                        // budget once started
  absl::Time started_at_;
  absl::Status cancel_status_;  // why cancelled_ was set
  std::atomic<bool> cancelled_{false};

  mutable absl::Mutex mu_;
  JobState state_ ABSL_GUARDED_BY(mu_) = JobState::kQueued;
  JobProgress progress_ ABSL_GUARDED_BY(mu_);
  absl::Time last_notified_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  SubscriberList<const Job&> listeners_ ABSL_GUARDED_BY(mu_);
  // Written once under mu_ just before state_ becomes kDone.
  JobResult result_;
};

}  // namespace placement::jobs

#endif  // PLACEMENT_SERVICE_JOBS_JOB_H_
