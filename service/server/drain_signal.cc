#include "service/server/drain_signal.h"

#include <utility>

namespace placement::server {

uint64_t DrainSignal::Add(Moment& moment, std::function<void()> callback) {
  absl::MutexLock lock(&mu_);
  if (moment.happened) return 0;
  // Ids come from one of the two lists; odd for drain, even for abort keeps them apart.
  const uint64_t id = moment.subscribers.Add(std::move(callback));
  return &moment == &drain_ ? 2 * id - 1 : 2 * id;
}

uint64_t DrainSignal::Subscribe(std::function<void()> on_drain) {
  return Add(drain_, std::move(on_drain));
}

uint64_t DrainSignal::SubscribeAbort(std::function<void()> on_abort) {
  return Add(abort_, std::move(on_abort));
}

void DrainSignal::Unsubscribe(uint64_t id) {
  if (id == 0) return;
  absl::MutexLock lock(&mu_);
  if (id % 2 == 1) {
    drain_.subscribers.Remove((id + 1) / 2);
  } else {
    abort_.subscribers.Remove(id / 2);
  }
}

size_t DrainSignal::Happen(Moment& moment) {
  SubscriberList<>::Taken to_call;
  {
    absl::MutexLock lock(&mu_);
    if (moment.happened) return 0;
    moment.happened = true;
    to_call = moment.subscribers.Take(/*clear=*/true);
  }
  SubscriberList<>::Call(to_call);
  return to_call.size();
}

void DrainSignal::Fire() { Happen(drain_); }

size_t DrainSignal::Abort() { return Happen(abort_); }

bool DrainSignal::fired() const {
  absl::MutexLock lock(&mu_);
  return drain_.happened;
}

bool DrainSignal::aborted() const {
  absl::MutexLock lock(&mu_);
  return abort_.happened;
}

}  // namespace placement::server
