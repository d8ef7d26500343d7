// job_test_util.h — helpers for the jobs folder's tests (job_manager_test, operation_registry_test):
// a placement to answer with, waiting for a job without polling, and a work function the test
// starts and releases by hand. Test-only: nothing outside *_test.cc includes it.
//
// Example:
//   Gate gate;
//   absl::StatusOr<Admission> admission = jobs.Acquire(spec_with(gate.Work(/*device=*/3)));
//   gate.started.WaitForNotification();   // it runs now
//   gate.release.Notify();
//   const JobResult& result = AwaitJobDone(admission->job);
#ifndef PLACEMENT_SERVICE_JOBS_JOB_TEST_UTIL_H_
#define PLACEMENT_SERVICE_JOBS_JOB_TEST_UTIL_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "service/jobs/job.h"

namespace placement::jobs {

// A placement of one op on `device`.
inline PlacementPtr MakePlacement(int32_t device) {
  auto placement = std::make_shared<v1::Placement>();
  placement->add_device(device);
  return placement;
}

// Blocks until the job is done (via a listener, no polling) and returns its result.
inline const JobResult& AwaitJobDone(const std::shared_ptr<Job>& job) {
  auto done = std::make_shared<absl::Notification>();
  const uint64_t id = job->AddListener([done](const Job& j) {
    if (j.done() && !done->HasBeenNotified()) done->Notify();
  });
  if (id != 0) done->WaitForNotification();
  return job->result();
}

// A work function that signals when it starts and returns once released (or cancelled).
struct Gate {
  absl::Notification started;
  absl::Notification release;
  std::atomic<int> runs{0};

  JobWork Work(int32_t device = 1) {
    return [this, device](const JobContext& context) -> absl::StatusOr<PlacementPtr> {
      ++runs;
      started.Notify();
      // Partitioners poll the cancellation flag at loop boundaries; so does this one.
      while (!release.WaitForNotificationWithTimeout(absl::Milliseconds(1))) {
        if (context.cancelled()) return absl::CancelledError("saw the flag");
      }
      return MakePlacement(device);
    };
  }
};

}  // namespace placement::jobs

#endif  // PLACEMENT_SERVICE_JOBS_JOB_TEST_UTIL_H_
