// fair_queue.h — a FIFO per tenant, served round-robin across tenants.
//
// One tenant submitting a thousand jobs does not starve another submitting one: Pop() takes the oldest
// item of the tenant whose turn it is, then moves that tenant to the back of the ring. Within a tenant the
// order is first-in first-out. PopEligible() skips tenants the owner holds back (a tenant at its limit of
// running jobs) without losing their turn. Not thread-safe: the owner (JobManager) guards it with its mutex.
//
// Example:
//   FairQueue<int> queue;
//   queue.Push("a", 1); queue.Push("a", 2); queue.Push("b", 3);
//   queue.Pop();  // 1 (tenant a), then 3 (tenant b), then 2 (tenant a)
#ifndef PLACEMENT_SERVICE_JOBS_FAIR_QUEUE_H_
#define PLACEMENT_SERVICE_JOBS_FAIR_QUEUE_H_

#include <algorithm>
#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"

namespace placement::jobs {

template <typename T>
class FairQueue {
 public:
  void Push(const std::string& tenant, T item) {
    auto [it, inserted] = queues_.try_emplace(tenant);
    if (it->second.empty()) ring_.push_back(tenant);
    it->second.push_back(std::move(item));
    ++size_;
  }

  // The next item in round-robin order across tenants, or nullopt when empty.
  std::optional<T> Pop() {
    return PopEligible([](const std::string&) { return true; });
  }

  // Like Pop(), but skips tenants for which `eligible(tenant)` is false (e.g. at their running-jobs
  // limit); they keep their place in the ring. nullopt when no eligible tenant has an item.
  template <typename Eligible>
  std::optional<T> PopEligible(const Eligible& eligible) {
    auto turn = std::find_if(ring_.begin(), ring_.end(), eligible);
    if (turn == ring_.end()) return std::nullopt;
    std::string tenant = std::move(*turn);
    ring_.erase(turn);
    auto it = queues_.find(tenant);
    T item = std::move(it->second.front());
    it->second.pop_front();
    --size_;
    if (it->second.empty()) {
      queues_.erase(it);
    } else {
      ring_.push_back(std::move(tenant));
    }
    return item;
  }

  // Removes `item` from `tenant`'s queue; false when it is not queued.
  bool Remove(const std::string& tenant, const T& item) {
    auto it = queues_.find(tenant);
    if (it == queues_.end()) return false;
    auto found = std::find(it->second.begin(), it->second.end(), item);
    if (found == it->second.end()) return false;
    it->second.erase(found);
    --size_;
    if (it->second.empty()) {
      queues_.erase(it);
      ring_.erase(std::find(ring_.begin(), ring_.end(), tenant));
    }
    return true;
  }

  // Removes and returns every item (tenants in ring order, FIFO within a tenant).
  std::deque<T> Drain() {
    std::deque<T> all;
    while (std::optional<T> item = Pop()) all.push_back(std::move(*item));
    return all;
  }

  // True when some tenant with an item is eligible.
  template <typename Eligible>
  bool HasEligible(const Eligible& eligible) const {
    return std::any_of(ring_.begin(), ring_.end(), eligible);
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t size_of(const std::string& tenant) const {
    auto it = queues_.find(tenant);
    return it == queues_.end() ? 0 : it->second.size();
  }
  size_t tenant_count() const { return ring_.size(); }

 private:
  absl::flat_hash_map<std::string, std::deque<T>> queues_;
  std::deque<std::string> ring_;  // tenants with queued items, in service order
  size_t size_ = 0;
};

}  // namespace placement::jobs

#endif  // PLACEMENT_SERVICE_JOBS_FAIR_QUEUE_H_
