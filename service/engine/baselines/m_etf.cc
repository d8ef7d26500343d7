#include "service/engine/baselines/m_etf.h"

#include <algorithm>
#include <optional>
#include <cstdint>
#include <limits>
#include <queue>
#include <tuple>
#include <vector>

#include "service/engine/baselines/list_scheduler_base.h"
#include "service/engine/baselines/placement_units.h"

namespace placement::engine {
namespace {

using baselines::SaturatingAdd;

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

// A candidate (op, device) in one of a device's heaps; ordered by (key, tie, op), smallest first.
struct Entry {
  int64_t key;
  int64_t tie;
  OpId op;
  int64_t arrival;  // when the op's last input is on this device
};
struct EntryAfter {
  bool operator()(const Entry& a, const Entry& b) const {
    return std::tie(a.key, a.tie, a.op) > std::tie(b.key, b.tie, b.op);
  }
};
using EntryHeap = std::priority_queue<Entry, std::vector<Entry>, EntryAfter>;

struct Event {
  int64_t time;
  OpId op;
  bool operator>(const Event& other) const {
    return std::tie(time, op) > std::tie(other.time, other.op);
  }
};

class EtfScheduler : private baselines::ListSchedulerBase {
 public:
  using ListSchedulerBase::ListSchedulerBase;

  // Re-placement's form (MEtfTowardsPrevious): binding a unit anywhere but its previous device costs
  // `ns_per_byte` × the persistent bytes it would move, as if it started that much later.
  void PreferPreviousDevices(double ns_per_byte) { towards_previous_ns_per_byte_ = ns_per_byte; }

  PartitionResult Run() {
    Initialise();
    baselines::StopChecker stop(context_, "m_etf", 256);
    int64_t now = 0;
    while (scheduled_ < num_ops_) {
      if (stop.Step(static_cast<double>(scheduled_) / num_ops_)) break;
      while (!events_.empty() && events_.top().time <= now) {
        const Event event = events_.top();
        events_.pop();
        Finish(event.op);
      }
      // Only devices that released memory can take parked ops back.
      for (const DeviceId d : released_on_) {
        released_[d] = 0;
        Unblock(d);
      }
      released_on_.clear();

      // The best (op, device) pair over the idle devices.
      bool found = false;
      std::tuple<int64_t, int64_t, OpId, int64_t, DeviceId> best;
      int64_t best_arrival = 0;
      for (DeviceId d = 0; d < num_devices_; ++d) {
        if (free_at_[d] > now) continue;
        Entry entry;
        if (!BestCandidate(d, now, entry)) continue;
        const int64_t start = std::max(now, entry.arrival);
        const std::tuple<int64_t, int64_t, OpId, int64_t, DeviceId> key(
            SaturatingAdd(start, MovePenalty(entry.op, d)), -level_[entry.op], entry.op,
            start + model_.OpTimeNs(entry.op, d), d);
        if (!found || key < best) {
          best = key;
          best_arrival = entry.arrival;
          found = true;
        }
      }
      const int64_t next_moment = events_.empty() ? kNever : events_.top().time;
      // Strictly earlier than the next moment: on a tie, waiting lets the device freeing up then compete.
      if (found && (std::get<0>(best) < next_moment || next_moment == kNever)) {
        Schedule(std::get<2>(best), std::get<4>(best), std::max(now, best_arrival));
        continue;
      }
      if (next_moment != kNever) {
        now = next_moment;
        continue;
      }
      // Nothing runs, nothing will be released and nothing fits: place the most urgent ready op where
      // the overflow is smallest.
      ForceOne(now);
    }
    return ResultOfScheduled(scheduled_);
  }

 private:
  void Initialise() {
    InitialisePreviousDevices();
    free_at_.assign(num_devices_, 0);
    released_.assign(num_devices_, 0);
    pending_.resize(num_devices_);
    arrived_.resize(num_devices_);
    blocked_.resize(num_devices_);
    consumers_left_.resize(num_ops_);
    inputs_left_.resize(num_ops_);
    // Static level: own mean time + the longest such path to an exit, communication ignored (ETF's
    // tie-breaker).
    level_.assign(num_ops_, 0);
    for (int32_t i = num_ops_ - 1; i >= 0; --i) {
      const OpId v = model_.topo_order[i];
      int64_t tail = 0;
      for (EdgeId e = model_.out_begin(v); e < model_.out_end(v); ++e) {
        tail = std::max(tail, level_[model_.out_dst[e]]);
      }
      level_[v] = baselines::MeanOpTimeNs(model_, units_, v) + tail;
    }
    for (OpId v = 0; v < num_ops_; ++v) {
      consumers_left_[v] = static_cast<int32_t>(model_.out_end(v) - model_.out_begin(v));
      inputs_left_[v] = static_cast<int32_t>(model_.in_end(v) - model_.in_begin(v));
    }
    for (OpId v : model_.topo_order) {
      if (inputs_left_[v] == 0) MakeReady(v);
    }
  }

  // Previous device and the ns that binding elsewhere costs, by unit (PreferPreviousDevices): the
  // device that held most of the unit's persistent bytes, and the bytes binding elsewhere moves
  // beyond what binding there moves.
  void InitialisePreviousDevices() {
    if (towards_previous_ns_per_byte_ <= 0 || !model_.has_previous_placement()) return;
    const int32_t num_units = units_.num_units();
    unit_previous_.assign(num_units, kNone);
    unit_penalty_ns_.assign(num_units, 0);
    std::vector<std::pair<DeviceId, int64_t>> tally;
    for (int32_t u = 0; u < num_units; ++u) {
      const OpId* members = units_.member.data();
      TallyPreviousDevices(model_, members + units_.begin(u), members + units_.end(u), /*per_op=*/0,
                           tally);
      for (const auto& [device, bytes] : tally) {
        if (!units_.Allowed(model_, u, device)) continue;
        const int64_t penalty = static_cast<int64_t>(
            std::min(towards_previous_ns_per_byte_ * static_cast<double>(bytes), 1e15));
        if (penalty > unit_penalty_ns_[u] ||
            (penalty == unit_penalty_ns_[u] && unit_previous_[u] != kNone && device < unit_previous_[u])) {
          unit_previous_[u] = device;
          unit_penalty_ns_[u] = penalty;
        }
      }
    }
  }

  int64_t MovePenalty(OpId v, DeviceId d) const {
    if (unit_previous_.empty()) return 0;
    const int32_t u = units_.unit_of_op[v];
    if (unit_device_[u] != kNone || unit_previous_[u] == kNone || unit_previous_[u] == d) return 0;
    return unit_penalty_ns_[u];
  }

  bool Valid(OpId v, DeviceId d) const {
    if (device_[v] != kNone) return false;
    const DeviceId fixed = unit_device_[units_.unit_of_op[v]];
    return fixed == kNone || fixed == d;
  }

  bool Fits(OpId v, DeviceId d, int64_t* need) const {
    *need = Need(v, d);
    return *need <= model_.capacity_bytes[d] - used_[d];
  }

  void MakeReady(OpId v) {
    const int32_t u = units_.unit_of_op[v];
    ready_.push(Entry{-level_[v], 0, v, 0});
    baselines::CandidateDevices(model_, units_, v, unit_device_[u], device_, candidates_);
    for (const DeviceId d : candidates_) {
      const int64_t arrival = ArrivalOn(v, d);
      pending_[d].push(Entry{arrival, -level_[v], v, arrival});
    }
  }

  // The best op for idle device d at `now` whose memory fits (entries that do not fit are parked in
  // blocked_[d] until memory is released on d).
  bool BestCandidate(DeviceId d, int64_t now, Entry& out) {
    EntryHeap& pending = pending_[d];
    EntryHeap& arrived = arrived_[d];
    for (;;) {
      while (!pending.empty() && pending.top().key <= now) {
        const Entry entry = pending.top();
        pending.pop();
        if (Valid(entry.op, d)) arrived.push(Entry{-level_[entry.op], 0, entry.op, entry.arrival});
      }
      for (EntryHeap* heap : {&arrived, &pending}) {
        while (!heap->empty()) {
          const Entry entry = heap->top();
          if (!Valid(entry.op, d)) {
            heap->pop();
            continue;
          }
          int64_t need;
          if (Fits(entry.op, d, &need)) {
            out = entry;
            return true;
          }
          heap->pop();
          blocked_[d].push(Entry{need, 0, entry.op, entry.arrival});
        }
      }
      // Parked entries that fit by now, in batches (see Unblock).
      if (Unblock(d) == 0) return false;
    }
  }

  // Moves parked entries of d whose need now fits back to the pending heap, smallest need first, at most
  // kUnblockBatch of them: when memory hovers just above what many parked ops need, moving them all back
  // on every release only to park all but one again costs O(parked) per release (quadratic on big graphs
  // under memory pressure). BestCandidate asks for the next batch when a batch yields nothing.
  int32_t Unblock(DeviceId d) {
    constexpr int32_t kUnblockBatch = 64;
    EntryHeap& blocked = blocked_[d];
    const int64_t room = model_.capacity_bytes[d] - used_[d];
    int32_t moved = 0;
    while (!blocked.empty() && blocked.top().key <= room && moved < kUnblockBatch) {
      const Entry entry = blocked.top();
      blocked.pop();
      if (!Valid(entry.op, d)) continue;
      pending_[d].push(Entry{entry.arrival, -level_[entry.op], entry.op, entry.arrival});
      ++moved;
    }
    return moved;
  }

  void Schedule(OpId v, DeviceId d, int64_t start) {
    if (BindUnit(v, d) && num_devices_ > baselines::kFullScanDevices) {
      // Members that became ready earlier were offered to a window of devices that may miss d.
      const int32_t u = units_.unit_of_op[v];
      for (int32_t i = units_.begin(u); i < units_.end(u); ++i) {
        const OpId w = units_.member[i];
        if (w == v || device_[w] != kNone || inputs_left_[w] != 0) continue;
        const int64_t arrival = ArrivalOn(w, d);
        pending_[d].push(Entry{arrival, -level_[w], w, arrival});
      }
    }
    used_[d] = baselines::AddInputCopies(model_, device_, copies_, v, d, used_[d]);
    used_[d] = SaturatingAdd(used_[d], SaturatingAdd(model_.temp_bytes[v], model_.output_bytes[v]));
    device_[v] = d;
    finish_[v] = start + model_.OpTimeNs(v, d);
    free_at_[d] = finish_[v];
    events_.push(Event{finish_[v], v});
    ++scheduled_;
    for (EdgeId e = model_.out_begin(v); e < model_.out_end(v); ++e) {
      const OpId w = model_.out_dst[e];
      if (--inputs_left_[w] == 0) MakeReady(w);
    }
  }

  void Release(DeviceId d, int64_t bytes) {
    used_[d] -= bytes;
    if (bytes > 0 && !released_[d]) {
      released_[d] = 1;
      released_on_.push_back(d);
    }
  }

  void ReleaseOutput(OpId u) {
    Release(device_[u], model_.output_bytes[u]);
    copies_.ReleaseAll(u, [&](DeviceId d, int64_t bytes) { Release(d, bytes); });
  }

  void Finish(OpId v) {
    Release(device_[v], model_.temp_bytes[v]);
    if (consumers_left_[v] == 0) ReleaseOutput(v);
    for (EdgeId e = model_.in_begin(v); e < model_.in_end(v); ++e) {
      const OpId u = model_.in_src[e];
      if (--consumers_left_[u] == 0) ReleaseOutput(u);
    }
  }

  void ForceOne(int64_t now) {
    while (!ready_.empty() && device_[ready_.top().op] != kNone) ready_.pop();
    if (ready_.empty()) return;  // cannot happen in a DAG with unscheduled ops left
    const OpId v = ready_.top().op;
    const int32_t u = units_.unit_of_op[v];
    DeviceId chosen = unit_device_[u];
    if (chosen == kNone) {
      int64_t best_room = std::numeric_limits<int64_t>::min();
      for (DeviceId d = 0; d < num_devices_; ++d) {
        if (!units_.Allowed(model_, u, d)) continue;
        const int64_t room = model_.capacity_bytes[d] - used_[d] - Need(v, d);
        if (room > best_room) {
          best_room = room;
          chosen = d;
        }
      }
    }
    Schedule(v, chosen, std::max({now, free_at_[chosen], ArrivalOn(v, chosen)}));
  }

  std::vector<int64_t> level_;
  std::vector<int32_t> inputs_left_;
  std::vector<int32_t> consumers_left_;
  std::vector<int64_t> free_at_;
  std::vector<EntryHeap> pending_;  // by arrival of the last input
  std::vector<EntryHeap> arrived_;  // inputs there by now: by level
  std::vector<EntryHeap> blocked_;  // did not fit: by bytes needed
  EntryHeap ready_;                 // every ready op, by level (for ForceOne)
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  std::vector<DeviceId> candidates_;  // scratch
  std::vector<uint8_t> released_;     // by device: memory released since the last Unblock
  std::vector<DeviceId> released_on_;
  int32_t scheduled_ = 0;
  double towards_previous_ns_per_byte_ = 0;
  std::vector<DeviceId> unit_previous_;   // by unit, when preferring previous devices
  std::vector<int64_t> unit_penalty_ns_;  // by unit: what binding elsewhere costs
};

class MEtfPartitioner final : public Partitioner {
 public:
  std::string_view name() const override { return "m_etf"; }
  std::string_view version() const override { return "1"; }
  std::string_view description() const override {
    return "Baechi m-ETF: earliest-start-time-first list scheduling that only places an op where its "
           "memory fits, tensor lifetimes tracked";
  }
  absl::StatusOr<PartitionResult> Partition(const Model& model,
                                            const SolveContext& context) const override {
    if (std::optional<PartitionResult> none = baselines::NothingToPlace(model)) return *std::move(none);
    return EtfScheduler(model, context).Run();
  }
};

}  // namespace

std::unique_ptr<Partitioner> MakeMEtfPartitioner() { return std::make_unique<MEtfPartitioner>(); }

absl::StatusOr<PartitionResult> MEtfTowardsPrevious(const Model& model, const SolveContext& context,
                                                    double ns_per_byte) {
  if (std::optional<PartitionResult> none = baselines::NothingToPlace(model)) return *std::move(none);
  EtfScheduler scheduler(model, context);
  scheduler.PreferPreviousDevices(ns_per_byte);
  return scheduler.Run();
}

}  // namespace placement::engine
