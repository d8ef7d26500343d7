// simulator.cc — event-driven list scheduler implementing api.md §2 (the semantics in detail: simulator.h).
//
// The constructor renumbers ops by depth ("rank", a topological order) and copies the graph in that
// order: consumers then sit near their producers, which keeps the random accesses of
// the simulation in cache (canonical ids follow names and scatter every neighbour). One Run has four
// phases, each linear or O(log) per item:
//   1. PrepareTransfers: op durations and the transfers (one per producer and destination device, of the
//      largest bytes of the producer's edges into that device) with their durations; memory holders.
//   2. ComputeBottomLevels: priorities, in reverse rank order.
//   3. Simulate: a min-heap of events (op finishes, ops whose last input will arrive later, and — only when
//      memory is computed — transfer arrivals), one max-heap of ready ops per device, and memory accounted
//      online: per-device usage changes at event times and the peak is sampled once per distinct time,
//      after every change at that time (which is what the half-open rule asks for).
//   4. WriteResult: back to canonical ids.
// Heaps are 4-ary (ready queues run thousands deep on wide graphs; 4-ary halves the depth); out-edges are
// grouped per producer by destination device with a per-device slot array (no hashing); scratch is sized
// on the first run and reused, so nothing is allocated per op once capacities are reached. Total
// O((V + E) log V) time and O(V + E) memory. Figures: bench/README.md ("Engine foundation").
#include "service/engine/sim/simulator.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace placement::engine {
namespace {

constexpr int64_t kNsPerSecond = 1'000'000'000;

// Crashes with a message: broken preconditions (an assignment out of range) and broken invariants are
// programming errors, not input errors; stderr is the one channel left before abort() (the engine reports
// nothing else there).
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

// A 4-ary heap ("less" puts an item below another, as for std::push_heap). Ready queues hold thousands
// of ops under wide graphs; four children per node halve the depth of a binary heap and sit in at most
// two cache lines, which roughly halves the cache misses per pop.
template <typename T, typename Less>
void HeapPush(std::vector<T>& heap, const T& item, Less less) {
  size_t i = heap.size();
  heap.push_back(item);
  while (i > 0) {
    const size_t parent = (i - 1) / 4;
    if (!less(heap[parent], item)) break;
    heap[i] = heap[parent];
    i = parent;
  }
  heap[i] = item;
}

template <typename T, typename Less>
T HeapPop(std::vector<T>& heap, Less less) {
  const T top = heap.front();
  const T last = heap.back();
  heap.pop_back();
  const size_t n = heap.size();
  if (n == 0) return top;
  size_t i = 0;
  for (;;) {
    const size_t first = 4 * i + 1;
    if (first >= n) break;
    const size_t end = std::min(first + 4, n);
    size_t best = first;
    for (size_t c = first + 1; c < end; ++c) {
      if (less(heap[best], heap[c])) best = c;
    }
    if (!less(last, heap[best])) break;
    heap[i] = heap[best];
    i = best;
  }
  heap[i] = last;
  return top;
}

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
  const EdgeId num_edges = model.num_edges();
  // Per-edge indices (transfers, holders) are int32; the model limits keep E far below 2^31.
  if (num_edges + num_ops >= std::numeric_limits<int32_t>::max()) Die("graph too large", num_edges);
  if (static_cast<int32_t>(model.topo_order.size()) != num_ops) Die("model without topo_order", num_ops);

  // Rank = position in (depth, OpId) order, depth = ops on the longest path from a source. Every edge
  // goes to a greater depth, so ranks are a topological order; and list scheduling runs roughly level by
  // level, so this order follows the simulation far better than Model::topo_order, whose smallest-id-first
  // Kahn order wanders deep into the graph.
  std::vector<int32_t> rank(num_ops, 0);  // depth first, rank below
  int32_t max_depth = 0;
  for (const OpId u : model.topo_order) {
    for (EdgeId e = model.out_begin(u); e < model.out_end(u); ++e) {
      const OpId v = model.out_dst[e];
      rank[v] = std::max(rank[v], rank[u] + 1);
    }
    max_depth = std::max(max_depth, rank[u]);
  }
  std::vector<int32_t> depth_start(static_cast<size_t>(max_depth) + 2, 0);
  for (OpId v = 0; v < num_ops; ++v) ++depth_start[rank[v] + 1];
  for (int32_t k = 0; k <= max_depth; ++k) depth_start[k + 1] += depth_start[k];
  op_of_rank_.resize(num_ops);
  for (OpId v = 0; v < num_ops; ++v) {
    rank[v] = depth_start[rank[v]]++;
    op_of_rank_[rank[v]] = v;
  }

  out_offset_.resize(static_cast<size_t>(num_ops) + 1);
  in_offset_.resize(static_cast<size_t>(num_ops) + 1);
  out_dst_.resize(num_edges);
  out_bytes_.resize(num_edges);
  out_to_in_.resize(num_edges);
  compute_ns_.resize(num_ops);
  temp_output_bytes_.resize(num_ops);
  persistent_bytes_.resize(num_ops);
  out_offset_[0] = 0;
  in_offset_[0] = 0;
  for (int32_t i = 0; i < num_ops; ++i) {
    const OpId u = op_of_rank_[i];
    out_offset_[i + 1] = out_offset_[i] + (model.out_end(u) - model.out_begin(u));
    in_offset_[i + 1] = in_offset_[i] + (model.in_end(u) - model.in_begin(u));
    compute_ns_[i] = model.compute_ns[u];
    temp_output_bytes_[i] = {model.temp_bytes[u], model.output_bytes[u]};
    persistent_bytes_[i] = model.persistent_bytes[u];
  }
  // Producers in rank order fill each consumer's in-list front to back.
  std::vector<EdgeId> in_cursor(in_offset_.begin(), in_offset_.end() - 1);
  for (int32_t i = 0; i < num_ops; ++i) {
    const OpId u = op_of_rank_[i];
    EdgeId k = out_offset_[i];
    for (EdgeId e = model.out_begin(u); e < model.out_end(u); ++e, ++k) {
      const int32_t v = rank[model.out_dst[e]];
      out_dst_[k] = v;
      out_bytes_[k] = model.out_bytes[e];
      out_to_in_[k] = static_cast<int32_t>(in_cursor[v]++);
    }
  }
  // bytes * 1e9 + bandwidth / 2 <= INT64_MAX  <=>  bytes <= (INT64_MAX - bandwidth / 2) / 1e9.
  link_fast_bytes_.assign(static_cast<size_t>(num_devices) * num_devices, -1);
  for (size_t i = 0; i < link_fast_bytes_.size(); ++i) {
    const int64_t bandwidth = model.link[i].bandwidth_bytes_per_second;
    if (bandwidth > 0) {
      link_fast_bytes_[i] = (std::numeric_limits<int64_t>::max() - bandwidth / 2) / kNsPerSecond;
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
  r.peak_memory_bytes.assign(num_devices, 0);
  r.peak_time_ns.assign(num_devices, 0);
  r.busy_ns.assign(num_devices, 0);
  r.op_count.assign(num_devices, 0);
  r.transfer_bytes = 0;
  r.transfer_count = 0;
  r.memory_intervals.clear();
  r.transfers.clear();

  PrepareTransfers(assignment, options.compute_memory);
  ComputeBottomLevels();
  Simulate(options);
  WriteResult(options);
  return r;
}

void Simulator::PrepareTransfers(const Assignment& assignment, bool memory) {
  const int32_t num_ops = model_.num_ops();
  const int32_t num_devices = model_.num_devices();
  state_.resize(num_ops);
  for (int32_t i = 0; i < num_ops; ++i) {
    OpState& s = state_[i];
    s.device = assignment[op_of_rank_[i]];
    s.duration = ScaledComputeNs(compute_ns_[i], model_.speed[s.device]);
    s.ready_time = 0;
    s.pending = static_cast<int32_t>(in_offset_[i + 1] - in_offset_[i]);
    result_.busy_ns[s.device] += s.duration;
    ++result_.op_count[s.device];
  }
  transfer_offset_.resize(static_cast<size_t>(num_ops) + 1);
  edge_transfer_.resize(out_dst_.size());
  if (memory) {
    in_holder_.resize(out_dst_.size());
    output_holders_.resize(num_ops);
  }
  device_slot_.assign(num_devices, -1);
  transfers_.clear();

  int32_t num_transfers = 0;
  for (int32_t u = 0; u < num_ops; ++u) {
    const DeviceId a = state_[u].device;
    transfer_offset_[u] = num_transfers;
    int32_t local_consumers = 0;
    for (EdgeId e = out_offset_[u]; e < out_offset_[u + 1]; ++e) {
      const DeviceId b = state_[out_dst_[e]].device;
      if (b == a) {
        edge_transfer_[e] = -1;
        ++local_consumers;
        continue;
      }
      int32_t x = device_slot_[b];
      if (x < 0) {
        x = num_transfers++;
        device_slot_[b] = x;
        transfers_.push_back(Transfer{0, 0, out_bytes_[e], b, 0});
      } else {
        transfers_[x].bytes = std::max(transfers_[x].bytes, out_bytes_[e]);
      }
      ++transfers_[x].copy_holders;
      edge_transfer_[e] = x;
    }
    for (int32_t x = transfer_offset_[u]; x < num_transfers; ++x) {
      Transfer& t = transfers_[x];
      device_slot_[t.device] = -1;
      t.duration = TransferTimeNs(a, t.device, t.bytes);
      result_.transfer_bytes += t.bytes;
    }
    if (!memory) continue;
    // The output is held by its local consumers and by each of its transfers until it arrives; a
    // consumer holds the output (local) or the copy (remote) it reads until it finishes.
    output_holders_[u] = local_consumers + (num_transfers - transfer_offset_[u]);
    for (EdgeId e = out_offset_[u]; e < out_offset_[u + 1]; ++e) {
      in_holder_[out_to_in_[e]] = edge_transfer_[e] < 0 ? u : ~edge_transfer_[e];
    }
  }
  transfer_offset_[num_ops] = num_transfers;
  result_.transfer_count = num_transfers;
}

void Simulator::ComputeBottomLevels() {
  for (int32_t u = model_.num_ops() - 1; u >= 0; --u) {
    int64_t longest_tail = 0;
    for (EdgeId e = out_offset_[u]; e < out_offset_[u + 1]; ++e) {
      const int32_t x = edge_transfer_[e];
      const int64_t tail = state_[out_dst_[e]].bottom_level + (x < 0 ? 0 : transfers_[x].duration);
      longest_tail = std::max(longest_tail, tail);
    }
    state_[u].bottom_level = state_[u].duration + longest_tail;
  }
}

void Simulator::PushEvent(int64_t time, int32_t op, int32_t transfer) {
  HeapPush(events_, Event{time, op, transfer}, kEventLater);
}

void Simulator::MakeReady(int32_t v) {
  const DeviceId d = state_[v].device;
  HeapPush(ready_[d], ReadyOp{state_[v].bottom_level, op_of_rank_[v], v}, kLessUrgent);
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

void Simulator::RecordInterval(DeviceId d, int32_t rank, MemoryInterval::Kind kind, int64_t bytes,
                               int64_t from, int64_t until) {
  if (bytes == 0 || from >= until) return;
  result_.memory_intervals.push_back(MemoryInterval{d, op_of_rank_[rank], kind, bytes, from, until});
}

void Simulator::StartOp(int32_t v, DeviceId d, int64_t now, bool memory) {
  start_[v] = now;
  previous_[v] = last_rank_[d];
  last_rank_[d] = v;
  busy_[d] = 1;
  PushEvent(now + state_[v].duration, v, kFinish);
  if (memory) Allocate(d, temp_output_bytes_[v].first + temp_output_bytes_[v].second);
  // FinishOp(v) will walk these; fetch them while other events are applied in between. Pointer
  // arithmetic, not operator[]: an op without transfers or edges has its offset at the end of the
  // array (or the array is empty), where operator[] would bind a reference past the end (UB, found by
  // the place_request fuzzer under UBSan).
  __builtin_prefetch(transfers_.data() + transfer_offset_[v]);
  __builtin_prefetch(out_dst_.data() + out_offset_[v]);
  __builtin_prefetch(edge_transfer_.data() + out_offset_[v]);
  if (memory) __builtin_prefetch(in_holder_.data() + in_offset_[v]);
}

void Simulator::FinishOp(int32_t u, int64_t now, const SimOptions& options) {
  const DeviceId a = state_[u].device;
  busy_[a] = 0;
  if (!is_candidate_[a]) {
    is_candidate_[a] = 1;
    candidates_.push_back(a);
  }
  makespan_ = now;  // finishes are applied in time order
  const bool memory = options.compute_memory;
  for (int32_t x = transfer_offset_[u]; x < transfer_offset_[u + 1]; ++x) {
    Transfer& t = transfers_[x];
    t.arrival = now + t.duration;
    if (memory) PushEvent(t.arrival, u, x);
    if (options.record_transfers) {
      result_.transfers.push_back(
          TransferRecord{op_of_rank_[u], a, t.device, t.bytes, now, t.arrival});
    }
  }
  for (EdgeId e = out_offset_[u]; e < out_offset_[u + 1]; ++e) {
    const int32_t v = out_dst_[e];
    const int32_t x = edge_transfer_[e];
    OpState& s = state_[v];
    const int64_t arrival = x < 0 ? now : transfers_[x].arrival;
    if (arrival > s.ready_time) s.ready_time = arrival;
    if (--s.pending == 0) {
      // Inputs arriving now are events at `now`, so the op may be picked in the coming round.
      if (s.ready_time <= now) {
        MakeReady(v);
      } else {
        PushEvent(s.ready_time, v, kReady);
      }
    }
  }
  if (!memory) return;

  const bool record = options.record_memory_intervals;
  const auto [temp_bytes, output_bytes] = temp_output_bytes_[u];
  Release(a, temp_bytes);
  if (record) RecordInterval(a, u, MemoryInterval::Kind::kTemp, temp_bytes, start_[u], now);
  if (output_holders_[u] == 0) {
    Release(a, output_bytes);
    if (record) RecordInterval(a, u, MemoryInterval::Kind::kOutput, output_bytes, start_[u], now);
  }
  // u no longer needs its inputs: the last consumer of a local output or of a received copy frees it.
  for (EdgeId i = in_offset_[u]; i < in_offset_[u + 1]; ++i) {
    const int32_t h = in_holder_[i];
    if (h >= 0) {
      if (--output_holders_[h] != 0) continue;
      const int64_t bytes = temp_output_bytes_[h].second;
      Release(a, bytes);
      if (record) RecordInterval(a, h, MemoryInterval::Kind::kOutput, bytes, start_[h], now);
      continue;
    }
    const int32_t x = ~h;
    Transfer& t = transfers_[x];
    if (--t.copy_holders != 0) continue;
    Release(a, t.bytes);
    if (record) {
      // The producer: transfer ids of each rank are contiguous, so search the offsets.
      const int32_t producer = static_cast<int32_t>(
          std::upper_bound(transfer_offset_.begin(), transfer_offset_.end(), x) -
          transfer_offset_.begin() - 1);
      RecordInterval(a, producer, MemoryInterval::Kind::kReceived, t.bytes, t.arrival, now);
    }
  }
}

// Only scheduled when memory is computed: readiness uses Transfer::arrival directly.
void Simulator::ArriveTransfer(int32_t u, int32_t x, int64_t now, const SimOptions& options) {
  const Transfer& t = transfers_[x];
  Allocate(t.device, t.bytes);
  if (--output_holders_[u] == 0) {
    const DeviceId a = state_[u].device;
    const int64_t bytes = temp_output_bytes_[u].second;
    Release(a, bytes);
    if (options.record_memory_intervals) {
      RecordInterval(a, u, MemoryInterval::Kind::kOutput, bytes, start_[u], now);
    }
  }
}

void Simulator::Simulate(const SimOptions& options) {
  const int32_t num_ops = model_.num_ops();
  const int32_t num_devices = model_.num_devices();
  const bool memory = options.compute_memory;
  start_.resize(num_ops);
  previous_.resize(num_ops);
  ready_.resize(std::max<size_t>(ready_.size(), num_devices));
  for (DeviceId d = 0; d < num_devices; ++d) ready_[d].clear();
  busy_.assign(num_devices, 0);
  last_rank_.assign(num_devices, -1);
  usage_.assign(num_devices, 0);
  persistent_.assign(num_devices, 0);
  is_candidate_.assign(num_devices, 0);
  is_dirty_.assign(num_devices, 0);
  candidates_.clear();
  dirty_.clear();
  events_.clear();
  makespan_ = 0;

  if (memory) {
    for (int32_t v = 0; v < num_ops; ++v) persistent_[state_[v].device] += persistent_bytes_[v];
    // Usage over [0, first event) is the persistent bytes alone (valid when makespan > 0; see below).
    for (DeviceId d = 0; d < num_devices; ++d) result_.peak_memory_bytes[d] = persistent_[d];
  }
  for (int32_t v = 0; v < num_ops; ++v) {
    if (state_[v].pending == 0) MakeReady(v);
  }

  int64_t now = 0;
  for (;;) {
    // Pick round. Each device picks from its own queue only, so the order in which devices pick within
    // a round cannot change the schedule; "devices pick in id order" holds trivially.
    for (const DeviceId d : candidates_) {
      is_candidate_[d] = 0;
      std::vector<ReadyOp>& heap = ready_[d];
      if (busy_[d] || heap.empty()) continue;
      StartOp(HeapPop(heap, kLessUrgent).rank, d, now, memory);
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
      const Event event = HeapPop(events_, kEventLater);
      if (event.transfer == kFinish) {
        FinishOp(event.op, now, options);
      } else if (event.transfer == kReady) {
        MakeReady(event.op);
      } else {
        ArriveTransfer(event.op, event.transfer, now, options);
      }
    }
  }
  if (memory) RecordPeaks(now);
}

void Simulator::WriteResult(const SimOptions& options) {
  const int32_t num_ops = model_.num_ops();
  SimResult& r = result_;
  r.makespan_ns = makespan_;
  r.start_ns.resize(num_ops);
  r.finish_ns.resize(num_ops);
  r.bottom_level_ns.resize(num_ops);
  r.previous_on_device.resize(num_ops);
  for (int32_t i = 0; i < num_ops; ++i) {
    const OpId v = op_of_rank_[i];
    r.start_ns[v] = start_[i];
    r.finish_ns[v] = start_[i] + state_[i].duration;
    r.bottom_level_ns[v] = state_[i].bottom_level;
    r.previous_on_device[v] = previous_[i] < 0 ? kNone : op_of_rank_[previous_[i]];
  }
  if (!options.compute_memory) return;
  if (makespan_ == 0) {
    // Every interval, the persistent ones included, is empty: nothing is ever held.
    std::fill(r.peak_memory_bytes.begin(), r.peak_memory_bytes.end(), 0);
    std::fill(r.peak_time_ns.begin(), r.peak_time_ns.end(), 0);
  } else if (options.record_memory_intervals) {
    for (int32_t i = 0; i < num_ops; ++i) {
      RecordInterval(state_[i].device, i, MemoryInterval::Kind::kPersistent, persistent_bytes_[i], 0,
                     makespan_);
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
