// subscriber_list.h — callbacks registered by id, taken under their owner's lock and called outside
// it: what a job, an operation and the server's drain signal each keep of the code waiting on them.
//
// Not thread-safe by itself: the owner guards it with the same mutex as the state the callbacks hear
// about, so that "register unless already done" is one step. The owner takes the callbacks to call
// under that lock and calls them after releasing it; a callback may therefore run once after Remove()
// returned (it was taken just before), so it must own (shared_ptr) whatever it touches.
//
// Example (an owner with a mutex `mu_` and a `done_` flag):
//   uint64_t Subscribe(Callback callback) {
//     absl::MutexLock lock(&mu_);
//     return done_ ? 0 : subscribers_.Add(std::move(callback));
//   }
//   void Finish() {
//     SubscriberList<const Owner&>::Taken taken;
//     { absl::MutexLock lock(&mu_); done_ = true; taken = subscribers_.Take(/*clear=*/true); }
//     SubscriberList<const Owner&>::Call(taken, *this);
//   }
#ifndef PLACEMENT_SERVICE_SUBSCRIBERS_SUBSCRIBER_LIST_H_
#define PLACEMENT_SERVICE_SUBSCRIBERS_SUBSCRIBER_LIST_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

namespace placement {

template <typename... Args>
class SubscriberList {
 public:
  using Callback = std::function<void(Args...)>;
  // Callbacks taken to be called: shared, so that taking them copies no closure.
  using Taken = std::vector<std::shared_ptr<const Callback>>;

  // Registers `callback`; its id is never 0 (0 is how owners say "not registered").
  uint64_t Add(Callback callback) {
    const uint64_t id = next_id_++;
    entries_.emplace_back(id, std::make_shared<const Callback>(std::move(callback)));
    return id;
  }

  // Forgets the callback `id`; 0 and unknown ids are ignored.
  void Remove(uint64_t id) {
    if (id == 0) return;
    entries_.erase(std::remove_if(entries_.begin(), entries_.end(),
                                  [id](const auto& entry) { return entry.first == id; }),
                   entries_.end());
  }

  // The callbacks registered now; `clear` also forgets them (the last notification).
  Taken Take(bool clear) {
    Taken taken;
    taken.reserve(entries_.size());
    for (const auto& entry : entries_) taken.push_back(entry.second);
    if (clear) entries_.clear();
    return taken;
  }

  bool empty() const { return entries_.empty(); }

  // Calls each of `taken` with `args`, in the order they were registered (outside every lock).
  static void Call(const Taken& taken, Args... args) {
    for (const std::shared_ptr<const Callback>& callback : taken) (*callback)(args...);
  }

 private:
  uint64_t next_id_ = 1;
  std::vector<std::pair<uint64_t, std::shared_ptr<const Callback>>> entries_;
};

}  // namespace placement

#endif  // PLACEMENT_SERVICE_SUBSCRIBERS_SUBSCRIBER_LIST_H_
