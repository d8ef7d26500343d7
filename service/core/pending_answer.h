// pending_answer.h — a unary call's answer that a job on the workers is still computing.
//
// PlacementCore::Place returns one when the request missed the cache (Evaluate always does). The
// adapter asks to be told when the answer is ready (OnDone), then has it written into the response it
// gave the core (Finish) — or, when its caller goes away first, lets go (Release): the job stops only
// when nobody else waits for it. The job itself stays inside the core.
//
// Example (what the gRPC reactor does; FirstWins decides between done and cancel):
//   std::shared_ptr<PendingAnswer> pending = *core.Place(call, &response, &notes);
//   pending->OnDone([first_wins, pending] { if (first_wins.Claim()) Reply(pending->Finish()); });
//   ... on cancel: if (first_wins.Claim()) pending->Release();
#ifndef PLACEMENT_SERVICE_CORE_PENDING_ANSWER_H_
#define PLACEMENT_SERVICE_CORE_PENDING_ANSWER_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace placement::jobs {
class Job;
class JobManager;
struct JobResult;
}  // namespace placement::jobs

namespace placement::core {

// A unary call's answer still being computed: one job's (JobAnswer), or several (a Recommend call's
// candidates, recommend_answer.h).
class PendingAnswer {
 public:
  virtual ~PendingAnswer() = default;

  // Calls `on_done` once the answer is ready: on the thread that finished the (last) job, or here when
  // it is ready already. At most once per handle, and not after Release(). `on_done` may still run once
  // after Release() returns (the job finished meanwhile), so it must own what it touches.
  virtual void OnDone(std::function<void()> on_done) = 0;

  // Once done: writes the answer into the response given to the core (mapped to the caller's op
  // order) and releases the job(s); or returns why there is none (the job's error).
  virtual absl::Status Finish() = 0;

  // The caller no longer waits (it went away, or the server is giving up on it). Idempotent.
  virtual void Release() = 0;

  // Once done: how long the job queued and ran (for the request log).
  virtual absl::Duration queue_time() const = 0;
  virtual absl::Duration solve_time() const = 0;
};

// The answer of one job on the workers (Place, Evaluate).
class JobAnswer final : public PendingAnswer {
 public:
  // Writes a successful job's answer into the caller's response.
  using Writer = std::function<absl::Status(const jobs::JobResult& result)>;

  // The core's: `job` is one the caller waits for (one JobManager::Acquire it owes a Release for).
  JobAnswer(jobs::JobManager* jobs, std::shared_ptr<jobs::Job> job, Writer write);
  // Releases the job if nobody did.
  ~JobAnswer() override;
  JobAnswer(const JobAnswer&) = delete;
  JobAnswer& operator=(const JobAnswer&) = delete;

  void OnDone(std::function<void()> on_done) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Finish() override ABSL_LOCKS_EXCLUDED(mu_);
  void Release() override ABSL_LOCKS_EXCLUDED(mu_);
  absl::Duration queue_time() const override;
  absl::Duration solve_time() const override;

 private:
  jobs::JobManager* const jobs_;
  const std::shared_ptr<jobs::Job> job_;
  const Writer write_;
  absl::Mutex mu_;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t listener_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace placement::core

#endif  // PLACEMENT_SERVICE_CORE_PENDING_ANSWER_H_
