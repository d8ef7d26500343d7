// clock.h — the injectable source of time of every part of the service (jobs, operations, access
// control, shared operations).
//
// Production code uses Clock::Real(); tests use FakeClock and move time by hand, so that queue waits,
// operation TTLs and deadlines can be tested without sleeping.
//
// Example:
//   FakeClock clock(absl::FromUnixSeconds(1000));
//   OperationRegistry registry({.ttl_after_done = absl::Minutes(15), .clock = &clock}, &jobs);
//   clock.Advance(absl::Minutes(16));  // finished operations are now expired
#ifndef PLACEMENT_SERVICE_CLOCK_CLOCK_H_
#define PLACEMENT_SERVICE_CLOCK_CLOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace placement {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;

  // The process-wide real-time clock (absl::Now()); never destroyed.
  static Clock* Real();
};

// A clock that only moves when told to. Thread-safe.
class FakeClock : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'000'000)) : now_(start) {}

  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration by) {
    absl::MutexLock lock(&mu_);
    now_ += by;
  }
  void Set(absl::Time to) {
    absl::MutexLock lock(&mu_);
    now_ = to;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace placement

#endif  // PLACEMENT_SERVICE_CLOCK_CLOCK_H_
