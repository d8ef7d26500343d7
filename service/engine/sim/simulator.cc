// simulator.cc — event-driven list scheduler implementing api.md §2 (see simulator.h and README.md).
//
// One Run has three phases, each linear or O(log) per item:
//   1. PrepareTransfers: op durations, and the transfers (one per producer and destination device, of the
//      largest bytes of the producer's edges into that device) with their durations.
//   2. ComputeBottomLevels: priorities, in reverse topological order.
//   3. Simulate: a min-heap of events (op finishes, ops whose last input will arrive later, and — only when
//      memory is computed — transfer arrivals), one max-heap of ready ops per device, and memory accounted
//      online: per-device usage changes at event times and the peak is sampled once per distinct time,
//      after every change at that time (which is what the half-open rule asks for).
#include "service/engine/sim/simulator.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace placement::engine {
namespace {

constexpr int64_t kNsPerSecond = 1'000'000'000;

// Crashes with a message: broken preconditions (an assignment out of range) are programming errors.
[[noreturn]] void Die(const char* message, long long value) {
  std::fprintf(stderr, "placement simulator: %s (%lld)\n", message, value);
  std::abort();
}

// Heap orders. Events: earliest time on top (order among equal times does not matter: every event at a
// time is applied before anyone picks). Ready ops: greatest bottom level on top, then smaller OpId.
constexpr auto kEventLater = [](const auto& a, const auto& b) { return a.time > b.time; };
constexpr auto kLessUrgent = [](const auto& a, const auto& b) {
  return a.bottom_level < b.bottom_level || (a.bottom_level == b.bottom_level && a.op > b.op);
};

}  // namespace

bool SimResult::MemoryFits(const Model& model) const {
  const int32_t n = model.num_devices();
  if (static_cast<int32_t>(peak_memory_bytes.size()) != n) return false;
  for (DeviceId d = 0; d < n; ++d) {
    if (peak_memory_bytes[d] > model.capacity_bytes[d]) return false;
  }
  return true;
}

Simulator::Simulator(const Model& model) : model_(model) {
  const int32_t num_ops = model.num_ops();
  const int32_t num_devices = model.num_devices();
  // in_to_out_: the in CSR of v lists each producer once; walking producers in increasing id order fills
  // every in-list front to back, so a cursor per consumer finds the slot when in-lists are sorted by
  // source. A linear search covers any other order.
  in_to_out_.assign(model.num_edges(), 0);
  std::vector<EdgeId> cursor(num_ops, 0);
  for (OpId u = 0; u < num_ops; ++u) {
    for (EdgeId e = model.out_begin(u); e < model.out_end(u); ++e) {
      const OpId v = model.out_dst[e];
      EdgeId i = model.in_begin(v) + cursor[v];
      if (i >= model.in_end(v) || model.in_src[i] != u) {
        for (i = model.in_begin(v); i < model.in_end(v) && model.in_src[i] != u; ++i) {
        }
        if (i == model.in_end(v)) Die("in and out CSR disagree at op", u);
      }
      in_to_out_[i] = e;
      ++cursor[v];
    }
  }
  // bytes * 1e9 + bandwidth / 2 <= INT64_MAX  <=>  bytes <= (INT64_MAX - bandwidth / 2) / 1e9.
  link_fast_bytes_.assign(static_cast<size_t>(num_devices) * num_devices, -1);
  for (size_t i = 0; i < link_fast_bytes_.size(); ++i) {
    const int64_t bandwidth = model.link[i].bandwidth_bytes_per_second;
    if (bandwidth > 0) {
      link_fast_bytes_[i] =
          (std::numeric_limits<int64_t>::max() - bandwidth / 2) / kNsPerSecond;
    }
  }
}

// Equal to Model::TransferNs, with 64-bit arithmetic whenever it is exact (128-bit division is slow).
int64_t Simulator::TransferTimeNs(DeviceId a, DeviceId b, int64_t bytes) const {
  const size_t pair = static_cast<size_t>(a) * model_.num_devices() + b;
  const LinkCost& link = model_.link[pair];
  if (bytes <= link_fast_bytes_[pair]) {
    return link.latency_ns +
           (bytes * kNsPerSecond + link.bandwidth_bytes_per_second / 2) /
               link.bandwidth_bytes_per_second;
  }
  if (link.bandwidth_bytes_per_second <= 0) Die("link without bandwidth used from device", a);
  return TransferDurationNs(link, bytes);
}

const SimResult& Simulator::Run(const Assignment& assignment, const SimOptions& options) {
  const int32_t num_ops = model_.num_ops();
  const int32_t num_devices = model_.num_devices();
  if (static_cast<int64_t>(assignment.size()) != num_ops) {
    Die("assignment size differs from the number of ops", static_cast<long long>(assignment.size()));
  }
  for (OpId v = 0; v < num_ops; ++v) {
    if (assignment[v] < 0 || assignment[v] >= num_devices) Die("device out of range for op", v);
  }
  SimResult& r = result_;
  r.makespan_ns = 0;
  r.start_ns.assign(num_ops, 0);
  r.finish_ns.assign(num_ops, 0);
  r.bottom_level_ns.assign(num_ops, 0);
  r.previous_on_device.assign(num_ops, kNone);
  r.peak_memory_bytes.assign(num_devices, 0);
  r.peak_time_ns.assign(num_devices, 0);
  r.busy_ns.assign(num_devices, 0);
  r.op_count.assign(num_devices, 0);
  r.transfer_bytes = 0;
  r.transfer_count = 0;
  r.memory_intervals.clear();
  r.transfers.clear();

  PrepareTransfers(assignment);
  ComputeBottomLevels(assignment);
  Simulate(assignment, options);
  return r;
}

void Simulator::PrepareTransfers(const Assignment& assignment) {
  const int32_t num_ops = model_.num_ops();
  const int32_t num_devices = model_.num_devices();
  duration_.resize(num_ops);
  output_holders_.resize(num_ops);
  transfer_offset_.resize(static_cast<size_t>(num_ops) + 1);
  edge_transfer_.resize(model_.num_edges());
  device_slot_.assign(num_devices, -1);
  transfer_device_.clear();
  transfer_bytes_.clear();
  transfer_ns_.clear();
  copy_holders_.clear();

  int32_t num_transfers = 0;
  for (OpId u = 0; u < num_ops; ++u) {
    const DeviceId a = assignment[u];
    duration_[u] = model_.OpTimeNs(u, a);
    result_.busy_ns[a] += duration_[u];
    ++result_.op_count[a];
    transfer_offset_[u] = num_transfers;
    int32_t local_consumers = 0;
    for (EdgeId e = model_.out_begin(u); e < model_.out_end(u); ++e) {
      const DeviceId b = assignment[model_.out_dst[e]];
      if (b == a) {
        edge_transfer_[e] = -1;
        ++local_consumers;
        continue;
      }
      int32_t x = device_slot_[b];
      if (x < 0) {
        x = num_transfers++;
        device_slot_[b] = x;
        transfer_device_.push_back(b);
        transfer_bytes_.push_back(model_.out_bytes[e]);
        copy_holders_.push_back(1);
      } else {
        transfer_bytes_[x] = std::max(transfer_bytes_[x], model_.out_bytes[e]);
        ++copy_holders_[x];
      }
      edge_transfer_[e] = x;
    }
    for (int32_t x = transfer_offset_[u]; x < num_transfers; ++x) {
      device_slot_[transfer_device_[x]] = -1;
      transfer_ns_.push_back(TransferTimeNs(a, transfer_device_[x], transfer_bytes_[x]));
      result_.transfer_bytes += transfer_bytes_[x];
    }
    output_holders_[u] = local_consumers + (num_transfers - transfer_offset_[u]);
  }
  transfer_offset_[num_ops] = num_transfers;
  result_.transfer_count = num_transfers;
  transfer_arrival_.resize(num_transfers);
}

void Simulator::ComputeBottomLevels(const Assignment& assignment) {
  std::vector<int64_t>& bottom = result_.bottom_level_ns;
  for (auto it = model_.topo_order.rbegin(); it != model_.topo_order.rend(); ++it) {
    const OpId u = *it;
    int64_t longest_tail = 0;
    for (EdgeId e = model_.out_begin(u); e < model_.out_end(u); ++e) {
      const int32_t x = edge_transfer_[e];
      const int64_t tail = bottom[model_.out_dst[e]] + (x < 0 ? 0 : transfer_ns_[x]);
      longest_tail = std::max(longest_tail, tail);
    }
    bottom[u] = duration_[u] + longest_tail;
  }
}

void Simulator::PushEvent(int64_t time, OpId op, int32_t transfer) {
  events_.push_back(Event{time, op, transfer});
  std::push_heap(events_.begin(), events_.end(), kEventLater);
}

void Simulator::MakeReady(OpId v, DeviceId d) {
  std::vector<ReadyOp>& heap = ready_[d];
  heap.push_back(ReadyOp{result_.bottom_level_ns[v], v});
  std::push_heap(heap.begin(), heap.end(), kLessUrgent);
  if (!is_candidate_[d]) {
    is_candidate_[d] = 1;
    candidates_.push_back(d);
  }
}

void Simulator::Allocate(DeviceId d, int64_t bytes) {
  if (bytes == 0) return;
  usage_[d] += bytes;
  if (!is_dirty_[d]) {
    is_dirty_[d] = 1;
    dirty_.push_back(d);
  }
}

void Simulator::Release(DeviceId d, int64_t bytes) { Allocate(d, -bytes); }

// Called once per distinct time, after every change at that time: the usage now holds over [now, next).
// A change at `now` implies something is alive at `now`, hence now < makespan, so the persistent bytes
// (alive over [0, makespan)) count. Strictly greater keeps the first time of the peak.
void Simulator::RecordPeaks(int64_t now) {
  for (const DeviceId d : dirty_) {
    is_dirty_[d] = 0;
    if (usage_[d] < 0) Die("memory in use went negative on device", d);
    const int64_t total = usage_[d] + persistent_[d];
    if (total > result_.peak_memory_bytes[d]) {
      result_.peak_memory_bytes[d] = total;
      result_.peak_time_ns[d] = now;
    }
  }
  dirty_.clear();
}

void Simulator::RecordInterval(DeviceId d, OpId op, MemoryInterval::Kind kind, int64_t bytes,
                               int64_t from, int64_t until) {
  if (bytes == 0 || from >= until) return;
  result_.memory_intervals.push_back(MemoryInterval{d, op, kind, bytes, from, until});
}

void Simulator::StartOp(OpId v, DeviceId d, int64_t now, bool memory) {
  result_.start_ns[v] = now;
  const int64_t finish = now + duration_[v];
  result_.finish_ns[v] = finish;
  result_.previous_on_device[v] = last_op_[d];
  last_op_[d] = v;
  busy_[d] = 1;
  PushEvent(finish, v, kFinish);
  if (memory) Allocate(d, model_.temp_bytes[v] + model_.output_bytes[v]);
}

void Simulator::FinishOp(OpId u, DeviceId a, int64_t now, const Assignment& assignment,
                         const SimOptions& options) {
  busy_[a] = 0;
  if (!is_candidate_[a]) {
    is_candidate_[a] = 1;
    candidates_.push_back(a);
  }
  result_.makespan_ns = std::max(result_.makespan_ns, now);
  const bool memory = options.compute_memory;
  for (int32_t x = transfer_offset_[u]; x < transfer_offset_[u + 1]; ++x) {
    const int64_t arrival = now + transfer_ns_[x];
    transfer_arrival_[x] = arrival;
    if (memory) PushEvent(arrival, u, x);
    if (options.record_transfers) {
      result_.transfers.push_back(
          TransferRecord{u, a, transfer_device_[x], transfer_bytes_[x], now, arrival});
    }
  }
  for (EdgeId e = model_.out_begin(u); e < model_.out_end(u); ++e) {
    const OpId v = model_.out_dst[e];
    const int32_t x = edge_transfer_[e];
    const int64_t arrival = x < 0 ? now : transfer_arrival_[x];
    if (arrival > ready_time_[v]) ready_time_[v] = arrival;
    if (--pending_inputs_[v] == 0) {
      // Inputs arriving now are events at `now`, so the op may be picked in the coming round.
      if (ready_time_[v] <= now) {
        MakeReady(v, assignment[v]);
      } else {
        PushEvent(ready_time_[v], v, kReady);
      }
    }
  }
  if (!memory) return;

  const bool record = options.record_memory_intervals;
  const int64_t start = result_.start_ns[u];
  Release(a, model_.temp_bytes[u]);
  if (record) RecordInterval(a, u, MemoryInterval::Kind::kTemp, model_.temp_bytes[u], start, now);
  if (output_holders_[u] == 0) {
    Release(a, model_.output_bytes[u]);
    if (record) RecordInterval(a, u, MemoryInterval::Kind::kOutput, model_.output_bytes[u], start, now);
  }
  // u no longer needs its inputs: the last consumer of a local output or of a received copy frees it.
  for (EdgeId i = model_.in_begin(u); i < model_.in_end(u); ++i) {
    const OpId p = model_.in_src[i];
    const int32_t x = edge_transfer_[in_to_out_[i]];
    if (x < 0) {
      if (--output_holders_[p] == 0) {
        Release(a, model_.output_bytes[p]);
        if (record) {
          RecordInterval(a, p, MemoryInterval::Kind::kOutput, model_.output_bytes[p],
                         result_.start_ns[p], now);
        }
      }
    } else if (--copy_holders_[x] == 0) {
      Release(a, transfer_bytes_[x]);
      if (record) {
        RecordInterval(a, p, MemoryInterval::Kind::kReceived, transfer_bytes_[x],
                       transfer_arrival_[x], now);
      }
    }
  }
}

// Only scheduled when memory is computed: readiness uses transfer_arrival_ directly.
void Simulator::ArriveTransfer(OpId u, int32_t x, int64_t now, const Assignment& assignment,
                               const SimOptions& options) {
  Allocate(transfer_device_[x], transfer_bytes_[x]);
  if (--output_holders_[u] == 0) {
    const DeviceId a = assignment[u];
    Release(a, model_.output_bytes[u]);
    if (options.record_memory_intervals) {
      RecordInterval(a, u, MemoryInterval::Kind::kOutput, model_.output_bytes[u],
                     result_.start_ns[u], now);
    }
  }
}

void Simulator::Simulate(const Assignment& assignment, const SimOptions& options) {
  const int32_t num_ops = model_.num_ops();
  const int32_t num_devices = model_.num_devices();
  const bool memory = options.compute_memory;
  pending_inputs_.resize(num_ops);
  ready_time_.assign(num_ops, 0);
  ready_.resize(std::max<size_t>(ready_.size(), num_devices));
  for (DeviceId d = 0; d < num_devices; ++d) ready_[d].clear();
  busy_.assign(num_devices, 0);
  last_op_.assign(num_devices, kNone);
  usage_.assign(num_devices, 0);
  persistent_.assign(num_devices, 0);
  is_candidate_.assign(num_devices, 0);
  is_dirty_.assign(num_devices, 0);
  candidates_.clear();
  dirty_.clear();
  events_.clear();

  if (memory) {
    for (OpId v = 0; v < num_ops; ++v) persistent_[assignment[v]] += model_.persistent_bytes[v];
    // Usage over [0, first event) is the persistent bytes alone (valid when makespan > 0; see below).
    for (DeviceId d = 0; d < num_devices; ++d) result_.peak_memory_bytes[d] = persistent_[d];
  }
  for (OpId v = 0; v < num_ops; ++v) {
    pending_inputs_[v] = static_cast<int32_t>(model_.in_end(v) - model_.in_begin(v));
    if (pending_inputs_[v] == 0) MakeReady(v, assignment[v]);
  }

  int64_t now = 0;
  for (;;) {
    // Pick round. Each device picks from its own queue only, so the order in which devices pick within
    // a round cannot change the schedule; "devices pick in id order" holds trivially.
    for (const DeviceId d : candidates_) {
      is_candidate_[d] = 0;
      std::vector<ReadyOp>& heap = ready_[d];
      if (busy_[d] || heap.empty()) continue;
      std::pop_heap(heap.begin(), heap.end(), kLessUrgent);
      const OpId v = heap.back().op;
      heap.pop_back();
      StartOp(v, d, now, memory);
    }
    candidates_.clear();
    if (events_.empty()) break;
    const int64_t next = events_.front().time;
    if (next != now) {
      if (memory) RecordPeaks(now);
      now = next;
    }
    // Every event at `now`, including those pushed while applying them (zero-duration ops and
    // zero-time transfers), is applied before the next pick round.
    while (!events_.empty() && events_.front().time == now) {
      std::pop_heap(events_.begin(), events_.end(), kEventLater);
      const Event event = events_.back();
      events_.pop_back();
      if (event.transfer == kFinish) {
        FinishOp(event.op, assignment[event.op], now, assignment, options);
      } else if (event.transfer == kReady) {
        MakeReady(event.op, assignment[event.op]);
      } else {
        ArriveTransfer(event.op, event.transfer, now, assignment, options);
      }
    }
  }
  if (memory) RecordPeaks(now);

  if (memory) {
    if (result_.makespan_ns == 0) {
      // Every interval, the persistent ones included, is empty: nothing is ever held.
      std::fill(result_.peak_memory_bytes.begin(), result_.peak_memory_bytes.end(), 0);
      std::fill(result_.peak_time_ns.begin(), result_.peak_time_ns.end(), 0);
    } else if (options.record_memory_intervals) {
      for (OpId v = 0; v < num_ops; ++v) {
        RecordInterval(assignment[v], v, MemoryInterval::Kind::kPersistent,
                       model_.persistent_bytes[v], 0, result_.makespan_ns);
      }
    }
  }
}

int64_t LowerBoundNs(const Model& model) {
  const int32_t num_ops = model.num_ops();
  const int32_t num_devices = model.num_devices();
  if (num_ops == 0 || num_devices == 0) return 0;
  double fastest = model.speed[0];
  double total_speed = 0;
  for (DeviceId d = 0; d < num_devices; ++d) {
    fastest = std::max(fastest, model.speed[d]);
    total_speed += model.speed[d];
  }
  // Longest path with free communication: earliest finish in topological order.
  std::vector<int64_t> finish(num_ops, 0);
  int64_t longest = 0;
  __int128 total_compute = 0;
  for (const OpId v : model.topo_order) {
    int64_t start = 0;
    for (EdgeId i = model.in_begin(v); i < model.in_end(v); ++i) {
      start = std::max(start, finish[model.in_src[i]]);
    }
    finish[v] = start + ScaledComputeNs(model.compute_ns[v], fastest);
    longest = std::max(longest, finish[v]);
    total_compute += model.compute_ns[v];
  }
  const int64_t work_bound =
      std::llround(static_cast<double>(total_compute) / total_speed);
  return std::max(longest, work_bound);
}

std::vector<OpId> CriticalPath(const Model& model, const Assignment& assignment,
                               const SimResult& result) {
  std::vector<OpId> path;
  const int32_t num_ops = model.num_ops();
  if (num_ops == 0) return path;
  OpId v = kNone;
  for (OpId u = 0; u < num_ops; ++u) {
    if (result.finish_ns[u] == result.makespan_ns) {
      v = u;
      break;
    }
  }
  while (v != kNone) {
    path.push_back(v);
    const int64_t start = result.start_ns[v];
    const DeviceId b = assignment[v];
    OpId next = kNone;
    const OpId previous =
        result.previous_on_device.empty() ? kNone : result.previous_on_device[v];
    if (previous != kNone && result.finish_ns[previous] == start) next = previous;
    for (EdgeId i = model.in_begin(v); i < model.in_end(v); ++i) {
      const OpId u = model.in_src[i];
      if (next != kNone && u >= next) continue;
      if (result.finish_ns[u] > start) continue;
      int64_t arrival = result.finish_ns[u];
      if (assignment[u] != b) {
        // The one transfer from u to b carries the largest of u's edges into b.
        int64_t bytes = 0;
        for (EdgeId e = model.out_begin(u); e < model.out_end(u); ++e) {
          if (assignment[model.out_dst[e]] == b) bytes = std::max(bytes, model.out_bytes[e]);
        }
        arrival += model.TransferNs(assignment[u], b, bytes);
      }
      if (arrival == start) next = u;
    }
    v = next;
  }
  std::reverse(path.begin(), path.end());
  return path;
}

}  // namespace placement::engine
