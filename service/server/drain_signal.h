// drain_signal.h — how the server tells the calls that wait that it is going away.
//
// Two moments of the shutdown (placement_server.h): Fire() when the server starts draining — long
// waits (WaitOperation, WatchOperation) answer at once instead of holding up the shutdown — and
// Abort() at the end of the shutdown grace — Place and Evaluate calls still waiting for a job are
// answered UNAVAILABLE and release it. Each happens once; a subscriber that comes later hears of it
// at once (Subscribe returns 0 and the caller reacts itself). Thread-safe; callbacks run outside the
// lock, on the thread that fired, and may run once after Unsubscribe returns.
//
// Example:
//   uint64_t id = drain.Subscribe([first_wins, call] { if (first_wins.Claim()) call->Reply(); });
//   if (id == 0) Reply();  // draining already
//   ... when the call ends: drain.Unsubscribe(id);
#ifndef PLACEMENT_SERVICE_SERVER_DRAIN_SIGNAL_H_
#define PLACEMENT_SERVICE_SERVER_DRAIN_SIGNAL_H_

#include <cstddef>
#include <cstdint>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "service/subscribers/subscriber_list.h"

namespace placement::server {

class DrainSignal {
 public:
  // Returns 0 without subscribing when already fired (the caller reacts at once).
  uint64_t Subscribe(std::function<void()> on_drain) ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t SubscribeAbort(std::function<void()> on_abort) ABSL_LOCKS_EXCLUDED(mu_);
  // Either kind of subscription (ids are unique across both); 0 is ignored.
  void Unsubscribe(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);
  void Fire() ABSL_LOCKS_EXCLUDED(mu_);
  // Returns how many abort subscribers it called (0 the second time).
  size_t Abort() ABSL_LOCKS_EXCLUDED(mu_);
  bool fired() const ABSL_LOCKS_EXCLUDED(mu_);
  bool aborted() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // One of the two moments: whether it happened, and who waits for it.
  struct Moment {
    bool happened = false;
    SubscriberList<> subscribers;
  };
  uint64_t Add(Moment& moment, std::function<void()> callback) ABSL_LOCKS_EXCLUDED(mu_);
  // Marks `moment` as happened once and calls (outside the lock) its subscribers; how many.
  size_t Happen(Moment& moment) ABSL_LOCKS_EXCLUDED(mu_);

  mutable absl::Mutex mu_;
  Moment drain_ ABSL_GUARDED_BY(mu_);
  Moment abort_ ABSL_GUARDED_BY(mu_);
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVICE_SERVER_DRAIN_SIGNAL_H_
