// simulator.cc — event-driven list scheduler implementing api.md §2 and §2.1 (the semantics in detail:
// simulator.h). A training plan is simulated on the same code path: instances (op copies) are indices
// `m × V + rank`, so with one microbatch every array is what it always was.
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
#include <cmath>
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
// time is applied before anyone picks). Ready ops: lowest class (microbatch) on top, then greatest bottom
// level, then smaller OpId. All-reduces: earliest ready on top, then smaller OpId.
constexpr auto kEventLater = [](const auto& a, const auto& b) { return a.time > b.time; };
constexpr auto kLessUrgent = [](const auto& a, const auto& b) {
  if (a.klass != b.klass) return a.klass > b.klass;
  return a.bottom_level < b.bottom_level || (a.bottom_level == b.bottom_level && a.op > b.op);
};
// Without a plan every class is 0.
constexpr auto kLessUrgentPlain = [](const auto& a, const auto& b) {
  return a.bottom_level < b.bottom_level || (a.bottom_level == b.bottom_level && a.op > b.op);
};
template <bool kPlan>
constexpr auto LessUrgent() {
  if constexpr (kPlan) {
    return kLessUrgent;
  } else {
    return kLessUrgentPlain;
  }
}
constexpr auto kReadyLater = [](const auto& a, const auto& b) {
  return a.ready_time > b.ready_time || (a.ready_time == b.ready_time && a.op > b.op);
};

// round(2(D − 1) × bytes × 1e9 / (D × bandwidth)) + 2(D − 1) × latency, halves up, exact (api.md §2.1).
int64_t AllReduceDurationNs(const LinkCost& ring, int32_t replicas, int64_t bytes) {
  const __int128 steps = 2 * static_cast<__int128>(replicas - 1);
  const __int128 denominator = static_cast<__int128>(replicas) * ring.bandwidth_bytes_per_second;
  const __int128 numerator = steps * bytes * kNsPerSecond + denominator / 2;
  return static_cast<int64_t>(numerator / denominator + steps * ring.latency_ns);
}

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

// The buffers sized by M × (ops or transfers), the bulk of a simulator's memory.
struct Simulator::InstanceScratch {
  std::vector<InstanceState> state;
  std::vector<int64_t> start;
  std::vector<int32_t> previous;
  std::vector<int32_t> transfer_holders;
  std::vector<int64_t> transfer_arrival;
  std::vector<int32_t> gate_next;
  std::vector<Event> events;
  std::vector<int64_t> result_start;
  std::vector<int64_t> result_finish;
  std::vector<int32_t> result_previous;
};

namespace {
thread_local SimulatorScratchScope* current_scratch_scope = nullptr;
}  // namespace

SimulatorScratchScope::SimulatorScratchScope() : outer_(current_scratch_scope) {
  current_scratch_scope = this;
}

SimulatorScratchScope::~SimulatorScratchScope() { current_scratch_scope = outer_; }

SimulatorScratchScope* SimulatorScratchScope::Current() { return current_scratch_scope; }

Simulator::~Simulator() { LeaveScratch(); }

void Simulator::ReleaseScratch() { LeaveScratch(); }

// Swaps this simulator's per-instance buffers with `other`'s.
void Simulator::SwapScratch(InstanceScratch& other) {
  state_.swap(other.state);
  start_.swap(other.start);
  previous_.swap(other.previous);
  transfer_holders_.swap(other.transfer_holders);
  transfer_arrival_.swap(other.transfer_arrival);
  gate_next_.swap(other.gate_next);
  events_.swap(other.events);
  result_.start_ns.swap(other.result_start);
  result_.finish_ns.swap(other.result_finish);
  result_.previous_on_device.swap(other.result_previous);
}

void Simulator::TakeScratch(size_t instances) {
  SimulatorScratchScope* scope = SimulatorScratchScope::Current();
  if (scope == nullptr || !scope->spare_ || state_.capacity() >= instances ||
      scope->spare_->state.capacity() <= state_.capacity()) {
    return;
  }
  SwapScratch(*scope->spare_);
}

void Simulator::LeaveScratch() {
  SimulatorScratchScope* scope = SimulatorScratchScope::Current();
  if (scope == nullptr || state_.capacity() == 0) return;
  if (scope->spare_ && scope->spare_->state.capacity() >= state_.capacity()) return;
  // Ours are larger: they become the spare; the smaller spare (if any) is freed with `old`.
  std::unique_ptr<InstanceScratch> old = std::move(scope->spare_);
  scope->spare_ = std::make_unique<InstanceScratch>();
  SwapScratch(*scope->spare_);
}

Simulator::Simulator(const Model& model) : model_(model) {
  const int32_t num_ops = model.num_ops();
  const int32_t num_devices = model.num_devices();
  const EdgeId num_edges = model.num_edges();
  microbatches_ = std::max(1, model.plan.microbatches);
  replicas_ = std::max(1, model.plan.data_parallel);
  // Instances and per-instance transfers are int32 indices; the model limits keep M × (V + E) far below.
  if ((num_edges + num_ops) * microbatches_ >= std::numeric_limits<int32_t>::max()) {
    Die("graph too large", num_edges);
  }
  if (static_cast<int32_t>(model.topo_order.size()) != num_ops) Die("model without topo_order", num_ops);
  if (replicas_ > 1 && static_cast<int32_t>(model.ring_link.size()) != num_devices) {
    Die("data-parallel model without ring links (use ReplicaGroupModel)", replicas_);
  }

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
  in_src_.resize(num_edges);
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
      const EdgeId in = in_cursor[v]++;
      out_to_in_[k] = static_cast<int32_t>(in);
      in_src_[in] = i;
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

  // The plan's op roles: once ops, their priority class (after the microbatches when a per-microbatch
  // op is among their ancestors), gradient producers.
  has_once_ = model.has_once_ops;
  once_rank_.assign(num_ops, 0);
  once_class_.assign(num_ops, 0);
  gradient_producer_.assign(num_ops, 0);
  per_microbatch_ops_ = num_ops;
  if (has_once_) {
    std::vector<uint8_t> after_microbatch(num_ops, 0);  // some ancestor (or itself) is per-microbatch
    for (int32_t i = 0; i < num_ops; ++i) {
      once_rank_[i] = model.is_once(op_of_rank_[i]) ? 1 : 0;
      per_microbatch_ops_ -= once_rank_[i];
      bool after = !once_rank_[i];
      for (EdgeId e = in_offset_[i]; e < in_offset_[i + 1] && !after; ++e) {
        after = after_microbatch[in_src_[e]] != 0;
      }
      after_microbatch[i] = after ? 1 : 0;
      if (once_rank_[i]) once_class_[i] = after ? microbatches_ : -1;
    }
    for (int32_t i = 0; i < num_ops; ++i) {
      if (once_rank_[i]) continue;
      for (EdgeId e = out_offset_[i]; e < out_offset_[i + 1]; ++e) {
        if (once_rank_[out_dst_[e]]) gradient_producer_[i] = 1;
      }
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
  if (options.max_in_flight < 0 || options.max_in_flight > microbatches_) {
    Die("window out of range", options.max_in_flight);
  }
  window_ = options.max_in_flight > 0 ? options.max_in_flight
                                      : std::clamp(model_.plan.Window(), 1, microbatches_);
  SimResult& r = result_;
  r.makespan_ns = 0;
  r.microbatches = microbatches_;
  r.max_in_flight = window_;
  r.peak_memory_bytes.assign(num_devices, 0);
  r.peak_time_ns.assign(num_devices, 0);
  r.busy_ns.assign(num_devices, 0);
  r.op_count.assign(num_devices, 0);
  r.transfer_bytes = 0;
  r.transfer_count = 0;
  r.memory_intervals.clear();
  r.transfers.clear();
  r.all_reduces.clear();
  r.stopped_early = false;

  PrepareTransfers(assignment, options.compute_memory);
  ComputeBottomLevels();
  PrepareInstances(options.compute_memory);
  // The plain step (api.md §2) runs an instantiation with every plan branch compiled out.
  stop_at_ = std::max<int64_t>(0, options.stop_at_ns);
  stopped_at_ = 0;
  if (microbatches_ > 1 || has_once_ || replicas_ > 1) {
    Simulate<true>(options);
  } else {
    Simulate<false>(options);
  }
  if (stopped_at_ > 0) {
    r.stopped_early = true;
    r.makespan_ns = stopped_at_;
    return r;
  }
  WriteResult(options);
  return r;
}

void Simulator::PrepareTransfers(const Assignment& assignment, bool memory) {
  const int32_t num_ops = model_.num_ops();
  const int32_t num_devices = model_.num_devices();
  const int32_t m_count = microbatches_;
  info_.resize(num_ops);
  for (int32_t i = 0; i < num_ops; ++i) {
    RankInfo& s = info_[i];
    s.device = assignment[op_of_rank_[i]];
    s.duration = ScaledComputeNs(compute_ns_[i], model_.speed[s.device]);
    s.once_class = once_class_[i];
    result_.busy_ns[s.device] += s.duration * (once_rank_[i] ? 1 : m_count);
    ++result_.op_count[s.device];
  }
  transfer_offset_.resize(static_cast<size_t>(num_ops) + 1);
  gradient_offset_.resize(num_ops);
  edge_transfer_.resize(out_dst_.size());
  if (has_once_) edge_cost_.resize(out_dst_.size());
  if (memory) {
    in_holder_.resize(out_dst_.size());
    if (has_once_) accumulation_holders_.resize(num_ops);
  }
  holders_init_.resize(num_ops);
  device_slot_.assign(num_devices, -1);
  transfers_.clear();

  int32_t num_transfers = 0;
  // One transfer per destination device for the edges `take` selects (consumer count `weight`).
  auto group_by_device = [&](int32_t u, auto take, auto weight, TransferKind kind) {
    const DeviceId a = info_[u].device;
    const int32_t first = num_transfers;
    int32_t local = 0;
    for (EdgeId e = out_offset_[u]; e < out_offset_[u + 1]; ++e) {
      const int32_t v = out_dst_[e];
      if (!take(v)) continue;
      const DeviceId b = info_[v].device;
      if (b == a) {
        edge_transfer_[e] = -1;
        local += weight(v);
        continue;
      }
      int32_t x = device_slot_[b];
      if (x < 0) {
        x = num_transfers++;
        device_slot_[b] = x;
        transfers_.push_back(Transfer{0, out_bytes_[e], b, 0, kind});
      } else {
        transfers_[x].bytes = std::max(transfers_[x].bytes, out_bytes_[e]);
      }
      transfers_[x].consumers += weight(v);
      edge_transfer_[e] = x;
    }
    for (int32_t x = first; x < num_transfers; ++x) {
      Transfer& t = transfers_[x];
      device_slot_[t.device] = -1;
      t.duration = TransferTimeNs(a, t.device, t.bytes);
      const int64_t copies = kind == TransferKind::kPerCopy ? m_count : 1;
      result_.transfer_bytes += t.bytes * copies;
      result_.transfer_count += copies;
    }
    return local;
  };
  auto all = [](int32_t) { return true; };
  auto one = [](int32_t) { return 1; };
  for (int32_t u = 0; u < num_ops; ++u) {
    transfer_offset_[u] = num_transfers;
    if (!has_once_) {
      // api.md §2 (and plain microbatches): every consumer reads the copy of the same microbatch.
      const int32_t local = group_by_device(u, all, one, TransferKind::kPerCopy);
      gradient_offset_[u] = num_transfers;
      holders_init_[u] = local + (num_transfers - transfer_offset_[u]);
    } else if (!once_rank_[u]) {
      auto per_copy = [this](int32_t v) { return once_rank_[v] == 0; };
      auto once = [this](int32_t v) { return once_rank_[v] != 0; };
      const int32_t local = group_by_device(u, per_copy, one, TransferKind::kPerCopy);
      holders_init_[u] = local + (num_transfers - transfer_offset_[u]);
      gradient_offset_[u] = num_transfers;
      const int32_t local_once = group_by_device(u, once, one, TransferKind::kGradient);
      if (memory) accumulation_holders_[u] = local_once + (num_transfers - gradient_offset_[u]);
    } else {
      // A once producer: §2 transfers; a per-microbatch consumer reads it once per copy.
      const int32_t m = m_count;
      auto weight = [this, m](int32_t v) { return once_rank_[v] ? 1 : m; };
      const int32_t local = group_by_device(u, all, weight, TransferKind::kOnce);
      gradient_offset_[u] = num_transfers;
      holders_init_[u] = local + (num_transfers - transfer_offset_[u]);
    }
    if (has_once_) {
      // Priorities use §2's transfer: the largest of u's edges into the device, whatever its consumers.
      const DeviceId a = info_[u].device;
      for (EdgeId e = out_offset_[u]; e < out_offset_[u + 1]; ++e) {
        const int32_t x = edge_transfer_[e];
        if (x < 0) continue;
        const DeviceId b = transfers_[x].device;
        // Both the per-copy and the gradient transfer into b may exist: take the larger bytes.
        int64_t bytes = transfers_[x].bytes;
        for (int32_t y = transfer_offset_[u]; y < num_transfers; ++y) {
          if (transfers_[y].device == b) bytes = std::max(bytes, transfers_[y].bytes);
        }
        edge_cost_[e] = TransferTimeNs(a, b, bytes);
      }
    }
    if (!memory) continue;
    // A consumer holds the output (local) or the copy (remote) it reads until it finishes.
    for (EdgeId e = out_offset_[u]; e < out_offset_[u + 1]; ++e) {
      in_holder_[out_to_in_[e]] = edge_transfer_[e] < 0 ? u : ~edge_transfer_[e];
    }
  }
  transfer_offset_[num_ops] = num_transfers;
}

void Simulator::ComputeBottomLevels() {
  const bool once = has_once_;
  for (int32_t u = model_.num_ops() - 1; u >= 0; --u) {
    int64_t longest_tail = 0;
    for (EdgeId e = out_offset_[u]; e < out_offset_[u + 1]; ++e) {
      const int32_t x = edge_transfer_[e];
      const int64_t cost = x < 0 ? 0 : (once ? edge_cost_[e] : transfers_[x].duration);
      longest_tail = std::max(longest_tail, info_[out_dst_[e]].bottom_level + cost);
    }
    info_[u].bottom_level = info_[u].duration + longest_tail;
  }
}

void Simulator::PrepareInstances(bool memory) {
  const int32_t num_ops = model_.num_ops();
  const int32_t m_count = microbatches_;
  const size_t instances = static_cast<size_t>(m_count) * num_ops;
  TakeScratch(instances);
  state_.resize(instances);
  start_.resize(instances);
  previous_.resize(instances);
  for (int32_t m = 0; m < m_count; ++m) {
    InstanceState* row = state_.data() + static_cast<size_t>(m) * num_ops;
    for (int32_t i = 0; i < num_ops; ++i) {
      // A once op lives at m = 0 only; its other slots never become ready.
      const bool absent = m > 0 && once_rank_[i];
      row[i].ready_time = 0;
      row[i].pending = absent ? -1 : static_cast<int32_t>(in_offset_[i + 1] - in_offset_[i]);
      row[i].holders = holders_init_[i];
    }
  }
  if (memory) {
    const int32_t num_transfers = static_cast<int32_t>(transfers_.size());
    const size_t slots = static_cast<size_t>(m_count) * num_transfers;
    transfer_holders_.resize(slots);
    transfer_arrival_.resize(slots);
    for (int32_t m = 0; m < m_count; ++m) {
      int32_t* row = transfer_holders_.data() + static_cast<size_t>(m) * num_transfers;
      for (int32_t x = 0; x < num_transfers; ++x) row[x] = transfers_[x].consumers;
    }
  }
  if (has_once_) {
    copies_left_.assign(num_ops, m_count);
    accumulation_start_.assign(num_ops, -1);
    gradient_ready_.assign(num_ops, -1);
    all_reduce_ready_.assign(num_ops, -1);
    all_reduce_start_.assign(num_ops, -1);
    all_reduce_bytes_.assign(num_ops, 0);
    all_reduce_duration_.assign(num_ops, 0);
    for (int32_t u = 0; u < num_ops; ++u) {
      if (!gradient_producer_[u]) continue;
      int64_t bytes = 0;
      for (EdgeId e = out_offset_[u]; e < out_offset_[u + 1]; ++e) {
        if (once_rank_[out_dst_[e]]) bytes = std::max(bytes, out_bytes_[e]);
      }
      all_reduce_bytes_[u] = bytes;
      if (replicas_ > 1) {
        all_reduce_duration_[u] =
            AllReduceDurationNs(model_.ring_link[info_[u].device], replicas_, bytes);
      }
    }
  }
  microbatch_left_.assign(m_count, per_microbatch_ops_);
  microbatch_done_.assign(m_count, per_microbatch_ops_ == 0 ? 0 : -1);
  if (window_ < m_count) {
    gate_head_.assign(m_count, -1);
    gate_next_.resize(instances);
  }
}

__attribute__((always_inline)) inline void Simulator::PushEvent(int64_t time, int32_t op, int32_t kind) {
  HeapPush(events_, Event{time, op, kind}, kEventLater);
}

template <bool kPlan>
__attribute__((always_inline)) inline void Simulator::Enqueue(int32_t instance, int32_t rank,
                                                              int32_t klass) {
  const DeviceId d = info_[rank].device;
  HeapPush(ready_[d], ReadyOp{info_[rank].bottom_level, op_of_rank_[rank], instance, rank, klass},
           LessUrgent<kPlan>());
  if (!is_candidate_[d]) {
    is_candidate_[d] = 1;
    candidates_.push_back(d);
  }
}

template <bool kPlan>
__attribute__((always_inline)) inline void Simulator::MakeReady(int32_t instance) {
  if (!kPlan || microbatches_ == 1) {
    Enqueue<kPlan>(instance, instance, kPlan ? info_[instance].once_class : 0);
    return;
  }
  const int32_t num_ops = model_.num_ops();
  const int32_t m = instance / num_ops;
  const int32_t rank = instance - m * num_ops;
  if (once_rank_[rank]) {
    Enqueue<kPlan>(instance, rank, info_[rank].once_class);
  } else if (m >= window_ && microbatch_done_[m - window_] < 0) {
    // Inputs are all there but the window is full: ready once microbatch m - W is done.
    gate_next_[instance] = gate_head_[m - window_];
    gate_head_[m - window_] = instance;
  } else {
    Enqueue<kPlan>(instance, rank, m);
  }
}

void Simulator::MicrobatchDone(int32_t m, int64_t now) {
  microbatch_done_[m] = now;
  if (window_ >= microbatches_) return;
  const int32_t num_ops = model_.num_ops();
  for (int32_t instance = gate_head_[m]; instance >= 0; instance = gate_next_[instance]) {
    const int32_t k = instance / num_ops;
    Enqueue<true>(instance, instance - k * num_ops, k);
  }
  gate_head_[m] = -1;
}

template <bool kPlan>
__attribute__((always_inline)) inline void Simulator::InputKnown(int32_t instance, int64_t arrival,
                                                                 int64_t now) {
  InstanceState& s = state_[instance];
  if (arrival > s.ready_time) s.ready_time = arrival;
  // The plain step's early stop (SimOptions::stop_at_ns): the op starts at or after this arrival, and
  // its bottom level follows.
  if (!kPlan && stop_at_ > 0) ReachBound(arrival + info_[instance].bottom_level);
  if (--s.pending == 0) {
    // Inputs arriving now are events at `now`, so the op may be picked in the coming round.
    if (s.ready_time <= now) {
      MakeReady<kPlan>(instance);
    } else {
      PushEvent(s.ready_time, instance, kReady);
    }
  }
}

__attribute__((always_inline)) inline void Simulator::Allocate(DeviceId d, int64_t bytes) {
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
                               int64_t from, int64_t until, int32_t microbatch) {
  if (bytes == 0 || from >= until) return;
  result_.memory_intervals.push_back(
      MemoryInterval{d, op_of_rank_[rank], kind, bytes, from, until, microbatch});
}

// Transfer ids of each rank are contiguous, so the producer is found by searching the offsets.
int32_t Simulator::ProducerOfTransfer(int32_t x) const {
  return static_cast<int32_t>(
      std::upper_bound(transfer_offset_.begin(), transfer_offset_.end(), x) -
      transfer_offset_.begin() - 1);
}

void Simulator::StartOp(int32_t instance, int32_t rank, DeviceId d, int64_t now, bool memory) {
  start_[instance] = now;
  previous_[instance] = last_instance_[d];
  last_instance_[d] = instance;
  busy_[d] = 1;
  PushEvent(now + info_[rank].duration, instance, kFinish);
  if (memory) {
    Allocate(d, temp_output_bytes_[rank].first + temp_output_bytes_[rank].second);
    if (has_once_ && gradient_producer_[rank] && accumulation_start_[rank] < 0) {
      // The accumulation buffer exists from the first copy's start (api.md §2.1).
      accumulation_start_[rank] = now;
      Allocate(d, temp_output_bytes_[rank].second);
    }
  }
  // FinishOp will walk these; fetch them while other events are applied in between. Pointer
  // arithmetic, not operator[]: an op without transfers or edges has its offset at the end of the
  // array (or the array is empty), where operator[] would bind a reference past the end (UB, found by
  // the place_request fuzzer under UBSan).
  __builtin_prefetch(transfers_.data() + transfer_offset_[rank]);
  __builtin_prefetch(out_dst_.data() + out_offset_[rank]);
  __builtin_prefetch(edge_transfer_.data() + out_offset_[rank]);
  if (memory) __builtin_prefetch(in_holder_.data() + in_offset_[rank]);
}

template <bool kPlan>
void Simulator::FinishOp(int32_t instance, int64_t now, const SimOptions& options) {
  const int32_t num_ops = model_.num_ops();
  int32_t m = 0;
  int32_t u = instance;
  if (kPlan && microbatches_ > 1) {
    m = instance / num_ops;
    u = instance - m * num_ops;
  }
  const DeviceId a = info_[u].device;
  busy_[a] = 0;
  if (!is_candidate_[a]) {
    is_candidate_[a] = 1;
    candidates_.push_back(a);
  }
  makespan_ = now;  // finishes are applied in time order
  const bool memory = options.compute_memory;
  const bool once = kPlan && once_rank_[u] != 0;
  const int32_t num_transfers = static_cast<int32_t>(transfers_.size());
  // Transfers that leave now: a per-microbatch op's per-copy ones, or a once op's.
  const int32_t leaving_end = once ? transfer_offset_[u + 1] : gradient_offset_[u];
  const size_t slot_base = once ? 0 : static_cast<size_t>(m) * num_transfers;
  for (int32_t x = transfer_offset_[u]; x < leaving_end; ++x) {
    const Transfer& t = transfers_[x];
    const int64_t arrival = now + t.duration;
    if (memory) {
      PushEvent(arrival, instance, x);
      transfer_arrival_[slot_base + x] = arrival;
    }
    if (options.record_transfers) {
      result_.transfers.push_back(TransferRecord{op_of_rank_[u], a, t.device, t.bytes, now, arrival,
                                                 once ? -1 : m});
    }
  }
  if (!once) {
    const int32_t base = m * num_ops;
    if (!kPlan || !has_once_) {
      for (EdgeId e = out_offset_[u]; e < out_offset_[u + 1]; ++e) {
        const int32_t x = edge_transfer_[e];
        InputKnown<kPlan>(base + out_dst_[e], x < 0 ? now : now + transfers_[x].duration, now);
      }
    } else {
      for (EdgeId e = out_offset_[u]; e < out_offset_[u + 1]; ++e) {
        const int32_t v = out_dst_[e];
        if (once_rank_[v]) continue;  // served by the accumulated gradient
        const int32_t x = edge_transfer_[e];
        InputKnown<kPlan>(base + v, x < 0 ? now : now + transfers_[x].duration, now);
      }
    }
    if (kPlan && --microbatch_left_[m] == 0) MicrobatchDone(m, now);
    if (kPlan && has_once_ && gradient_producer_[u] && --copies_left_[u] == 0) {
      if (replicas_ > 1) {
        all_reduce_ready_[u] = now;
        HeapPush(ring_ready_[a], ReadyAllReduce{now, op_of_rank_[u], u}, kReadyLater);
        if (!ring_is_candidate_[a]) {
          ring_is_candidate_[a] = 1;
          ring_candidates_.push_back(a);
        }
      } else {
        ReleaseGradient(u, now, options);
      }
    }
  } else {
    for (EdgeId e = out_offset_[u]; e < out_offset_[u + 1]; ++e) {
      const int32_t v = out_dst_[e];
      const int32_t x = edge_transfer_[e];
      const int64_t arrival = x < 0 ? now : now + transfers_[x].duration;
      if (once_rank_[v]) {
        InputKnown<kPlan>(v, arrival, now);
      } else {
        for (int32_t k = 0; k < microbatches_; ++k) InputKnown<kPlan>(k * num_ops + v, arrival, now);
      }
    }
  }
  if (!memory) return;

  const bool record = options.record_memory_intervals;
  const int32_t microbatch = once ? -1 : m;
  const auto [temp_bytes, output_bytes] = temp_output_bytes_[u];
  Release(a, temp_bytes);
  if (record) {
    RecordInterval(a, u, MemoryInterval::Kind::kTemp, temp_bytes, start_[instance], now, microbatch);
  }
  if (state_[instance].holders == 0) {
    Release(a, output_bytes);
    if (record) {
      RecordInterval(a, u, MemoryInterval::Kind::kOutput, output_bytes, start_[instance], now,
                     microbatch);
    }
  }
  ReleaseInputs<kPlan>(instance, u, m, a, now, record);
}

// Instance (u, m) on device a finished: it no longer needs its inputs. The last consumer of a local
// output, of a received copy or of an accumulation buffer frees it.
template <bool kPlan>
void Simulator::ReleaseInputs(int32_t instance, int32_t u, int32_t m, DeviceId a, int64_t now,
                              bool record) {
  const int32_t num_ops = model_.num_ops();
  const int32_t num_transfers = static_cast<int32_t>(transfers_.size());
  (void)instance;
  if (!kPlan || !has_once_) {
    // Every producer and consumer is per microbatch: the output of the producer's copy m, or the
    // received copy of copy m's transfer (api.md §2 when M = 1).
    const size_t base = static_cast<size_t>(m) * num_ops;
    const size_t transfer_base = static_cast<size_t>(m) * num_transfers;
    for (EdgeId i = in_offset_[u]; i < in_offset_[u + 1]; ++i) {
      const int32_t h = in_holder_[i];
      if (h >= 0) {
        if (--state_[base + h].holders != 0) continue;
        const int64_t bytes = temp_output_bytes_[h].second;
        Release(a, bytes);
        if (record) {
          RecordInterval(a, h, MemoryInterval::Kind::kOutput, bytes, start_[base + h], now, m);
        }
        continue;
      }
      const int32_t x = ~h;
      if (--transfer_holders_[transfer_base + x] != 0) continue;
      const int64_t bytes = transfers_[x].bytes;
      Release(a, bytes);
      if (record) {
        RecordInterval(a, ProducerOfTransfer(x), MemoryInterval::Kind::kReceived, bytes,
                       transfer_arrival_[transfer_base + x], now, m);
      }
    }
    return;
  }
  const bool consumer_once = once_rank_[u] != 0;
  for (EdgeId i = in_offset_[u]; i < in_offset_[u + 1]; ++i) {
    const int32_t h = in_holder_[i];
    if (h >= 0) {
      if (!consumer_once && !once_rank_[h]) {
        // The output of the producer's copy m (§2 per copy).
        const int32_t producer = m * num_ops + h;
        if (--state_[producer].holders != 0) continue;
        const int64_t bytes = temp_output_bytes_[h].second;
        Release(a, bytes);
        if (record) {
          RecordInterval(a, h, MemoryInterval::Kind::kOutput, bytes, start_[producer], now, m);
        }
      } else if (once_rank_[h]) {
        // A once producer's output, read by every copy of its per-microbatch consumers.
        if (--state_[h].holders != 0) continue;
        const int64_t bytes = temp_output_bytes_[h].second;
        Release(a, bytes);
        if (record) RecordInterval(a, h, MemoryInterval::Kind::kOutput, bytes, start_[h], now, -1);
      } else {
        // A once consumer of a gradient producer on the same device: its accumulation buffer.
        if (--accumulation_holders_[h] != 0) continue;
        const int64_t bytes = temp_output_bytes_[h].second;
        Release(a, bytes);
        if (record) {
          RecordInterval(a, h, MemoryInterval::Kind::kAccumulation, bytes, accumulation_start_[h],
                         now, -1);
        }
      }
      continue;
    }
    const int32_t x = ~h;
    const Transfer& t = transfers_[x];
    const bool per_copy = t.kind == TransferKind::kPerCopy;
    const size_t slot = per_copy ? static_cast<size_t>(m) * num_transfers + x : x;
    if (--transfer_holders_[slot] != 0) continue;
    Release(a, t.bytes);
    if (record) {
      RecordInterval(a, ProducerOfTransfer(x), MemoryInterval::Kind::kReceived, t.bytes,
                     transfer_arrival_[slot], now, per_copy ? m : -1);
    }
  }
}

// The accumulated gradient of u may leave now (its last copy finished, or its all-reduce ended):
// transfers to once consumers elsewhere, and the once consumers on u's device have it now.
void Simulator::ReleaseGradient(int32_t u, int64_t now, const SimOptions& options) {
  gradient_ready_[u] = now;
  const DeviceId a = info_[u].device;
  for (int32_t x = gradient_offset_[u]; x < transfer_offset_[u + 1]; ++x) {
    const Transfer& t = transfers_[x];
    const int64_t arrival = now + t.duration;
    if (options.compute_memory) {
      PushEvent(arrival, u, x);
      transfer_arrival_[x] = arrival;
    }
    if (options.record_transfers) {
      result_.transfers.push_back(
          TransferRecord{op_of_rank_[u], a, t.device, t.bytes, now, arrival, -1});
    }
  }
  for (EdgeId e = out_offset_[u]; e < out_offset_[u + 1]; ++e) {
    const int32_t v = out_dst_[e];
    if (!once_rank_[v]) continue;
    const int32_t x = edge_transfer_[e];
    InputKnown<true>(v, x < 0 ? now : now + transfers_[x].duration, now);
  }
}

// Only scheduled when memory is computed: readiness uses the arrival computed at the producer's finish.
template <bool kPlan>
void Simulator::ArriveTransfer(int32_t instance, int32_t x, int64_t now, const SimOptions& options) {
  const Transfer& t = transfers_[x];
  Allocate(t.device, t.bytes);
  const bool record = options.record_memory_intervals;
  if (kPlan && t.kind == TransferKind::kGradient) {
    const int32_t u = instance;
    if (--accumulation_holders_[u] != 0) return;
    const int64_t bytes = temp_output_bytes_[u].second;
    Release(info_[u].device, bytes);
    if (record) {
      RecordInterval(info_[u].device, u, MemoryInterval::Kind::kAccumulation, bytes,
                     accumulation_start_[u], now, -1);
    }
    return;
  }
  if (--state_[instance].holders != 0) return;
  int32_t m = 0;
  int32_t u = instance;
  if (kPlan && microbatches_ > 1) {
    m = instance / model_.num_ops();
    u = instance - m * model_.num_ops();
  }
  const DeviceId a = info_[u].device;
  const int64_t bytes = temp_output_bytes_[u].second;
  Release(a, bytes);
  if (record) {
    RecordInterval(a, u, MemoryInterval::Kind::kOutput, bytes, start_[instance], now,
                   t.kind == TransferKind::kOnce ? -1 : m);
  }
}

template <bool kPlan>
void Simulator::Simulate(const SimOptions& options) {
  const int32_t num_ops = model_.num_ops();
  const int32_t num_devices = model_.num_devices();
  const bool memory = options.compute_memory;
  ready_.resize(std::max<size_t>(ready_.size(), num_devices));
  for (DeviceId d = 0; d < num_devices; ++d) ready_[d].clear();
  busy_.assign(num_devices, 0);
  last_instance_.assign(num_devices, -1);
  usage_.assign(num_devices, 0);
  persistent_.assign(num_devices, 0);
  is_candidate_.assign(num_devices, 0);
  is_dirty_.assign(num_devices, 0);
  candidates_.clear();
  dirty_.clear();
  events_.clear();
  makespan_ = 0;
  const bool rings = kPlan && has_once_ && replicas_ > 1;
  if (rings) {
    ring_ready_.resize(std::max<size_t>(ring_ready_.size(), num_devices));
    for (DeviceId d = 0; d < num_devices; ++d) ring_ready_[d].clear();
    ring_busy_.assign(num_devices, 0);
    ring_is_candidate_.assign(num_devices, 0);
    ring_candidates_.clear();
  }

  if (memory) {
    for (int32_t v = 0; v < num_ops; ++v) persistent_[info_[v].device] += persistent_bytes_[v];
    // Usage over [0, first event) is the persistent bytes alone (valid when makespan > 0; see below).
    for (DeviceId d = 0; d < num_devices; ++d) result_.peak_memory_bytes[d] = persistent_[d];
  }
  if (stop_at_ > 0) work_left_ = result_.busy_ns;
  for (int32_t m = 0; m < microbatches_; ++m) {
    for (int32_t v = 0; v < num_ops; ++v) {
      const int32_t instance = m * num_ops + v;
      if (state_[instance].pending == 0) {
        if (!kPlan && stop_at_ > 0) ReachBound(info_[v].bottom_level);  // a source starts at 0 at the earliest
        MakeReady<kPlan>(instance);
      }
    }
  }

  int64_t now = 0;
  int64_t finished = 0;
  for (;;) {
    // Pick round. Each device picks from its own queue only, so the order in which devices pick within
    // a round cannot change the schedule; "devices pick in id order" holds trivially. Rings likewise.
    for (const DeviceId d : candidates_) {
      is_candidate_[d] = 0;
      std::vector<ReadyOp>& heap = ready_[d];
      if (busy_[d] || heap.empty()) continue;
      const ReadyOp picked = HeapPop(heap, LessUrgent<kPlan>());
      StartOp(picked.instance, picked.rank, d, now, memory);
      if (stop_at_ > 0) {
        // The device runs the work it has left (this op's included) one op at a time from now on.
        ReachBound(now + work_left_[d]);
        work_left_[d] -= info_[picked.rank].duration;
      }
    }
    candidates_.clear();
    // Rings pick after everything else at this time (every event, every device pick, zero-duration
    // ops included), so all-reduces that become ready at one time start in name order.
    if (rings && (events_.empty() || events_.front().time != now)) {
      for (const DeviceId d : ring_candidates_) {
        ring_is_candidate_[d] = 0;
        std::vector<ReadyAllReduce>& heap = ring_ready_[d];
        if (ring_busy_[d] || heap.empty()) continue;
        const ReadyAllReduce picked = HeapPop(heap, kReadyLater);
        ring_busy_[d] = 1;
        all_reduce_start_[picked.rank] = now;
        PushEvent(now + all_reduce_duration_[picked.rank], picked.rank, kAllReduceEnd);
      }
      ring_candidates_.clear();
    }
    if (events_.empty()) break;
    const int64_t next = events_.front().time;
    if (next != now) {
      if (memory) RecordPeaks(now);
      now = next;
    }
    if (stopped_at_ > 0) return;  // SimOptions::stop_at_ns reached: the step is at least that
    // Every event at `now`, including those pushed while applying them (zero-duration ops and
    // zero-time transfers), is applied before the next pick round.
    while (!events_.empty() && events_.front().time == now) {
      const Event event = HeapPop(events_, kEventLater);
      if (event.kind == kFinish) {
        ++finished;
        FinishOp<kPlan>(event.op, now, options);
      } else if (event.kind == kReady) {
        MakeReady<kPlan>(event.op);
      } else if (event.kind == kAllReduceEnd) {
        const int32_t u = event.op;
        const DeviceId d = info_[u].device;
        ring_busy_[d] = 0;
        if (!ring_is_candidate_[d]) {
          ring_is_candidate_[d] = 1;
          ring_candidates_.push_back(d);
        }
        if (options.record_transfers) {
          result_.all_reduces.push_back(AllReduceRecord{op_of_rank_[u], d, all_reduce_bytes_[u],
                                                        all_reduce_ready_[u], all_reduce_start_[u],
                                                        now});
        }
        ReleaseGradient(u, now, options);
      } else {
        ArriveTransfer<kPlan>(event.op, event.kind, now, options);
      }
    }
  }
  if (memory) RecordPeaks(now);
  const int64_t expected = static_cast<int64_t>(per_microbatch_ops_) * microbatches_ +
                           (num_ops - per_microbatch_ops_);
  if (finished != expected) Die("ops left unscheduled (deadlock)", expected - finished);
  if (!kPlan && microbatches_ == 1 && per_microbatch_ops_ > 0) microbatch_done_[0] = makespan_;
}

void Simulator::WriteResult(const SimOptions& options) {
  const int32_t num_ops = model_.num_ops();
  const int32_t m_count = microbatches_;
  const size_t instances = static_cast<size_t>(m_count) * num_ops;
  SimResult& r = result_;
  r.makespan_ns = makespan_;
  r.start_ns.resize(instances);
  r.finish_ns.resize(instances);
  r.previous_on_device.resize(instances);
  r.bottom_level_ns.resize(num_ops);
  for (int32_t m = 0; m < m_count; ++m) {
    const size_t base = static_cast<size_t>(m) * num_ops;
    for (int32_t i = 0; i < num_ops; ++i) {
      const size_t out = base + op_of_rank_[i];
      if (m > 0 && once_rank_[i]) {
        r.start_ns[out] = -1;
        r.finish_ns[out] = -1;
        r.previous_on_device[out] = kNone;
        continue;
      }
      const int64_t start = start_[base + i];
      r.start_ns[out] = start;
      r.finish_ns[out] = start + info_[i].duration;
      const int32_t previous = previous_[base + i];
      if (previous < 0) {
        r.previous_on_device[out] = kNone;
      } else {
        const int32_t pm = previous / num_ops;
        r.previous_on_device[out] = pm * num_ops + op_of_rank_[previous - pm * num_ops];
      }
    }
  }
  for (int32_t i = 0; i < num_ops; ++i) r.bottom_level_ns[op_of_rank_[i]] = info_[i].bottom_level;
  r.gradient_ready_ns.clear();
  if (has_once_) {
    r.gradient_ready_ns.assign(num_ops, -1);
    for (int32_t i = 0; i < num_ops; ++i) r.gradient_ready_ns[op_of_rank_[i]] = gradient_ready_[i];
  }
  r.microbatch_done_ns.assign(microbatch_done_.begin(), microbatch_done_.end());
  if (!options.compute_memory) return;
  if (makespan_ == 0) {
    // Every interval, the persistent ones included, is empty: nothing is ever held.
    std::fill(r.peak_memory_bytes.begin(), r.peak_memory_bytes.end(), 0);
    std::fill(r.peak_time_ns.begin(), r.peak_time_ns.end(), 0);
  } else if (options.record_memory_intervals) {
    for (int32_t i = 0; i < num_ops; ++i) {
      RecordInterval(info_[i].device, i, MemoryInterval::Kind::kPersistent, persistent_bytes_[i], 0,
                     makespan_, -1);
    }
  }
}

namespace {

// What both bounds read: the longest path of op times on the fastest device (each op's time rounded as
// the simulator rounds it), and the unrolled step's compute and its op instances.
struct BoundTerms {
  int64_t longest = 0;
  __int128 total_compute = 0;        // compute_ns over every instance (M copies, once ops once)
  __int128 total_fastest_time = 0;   // the same in op times on the fastest device, each rounded
  __int128 instances = 0;
  double fastest = 0;
  double total_speed = 0;
  bool homogeneous = true;           // every device of the model has the same speed
};

BoundTerms ComputeBoundTerms(const Model& model) {
  BoundTerms t;
  const int32_t num_devices = model.num_devices();
  t.fastest = model.speed[0];
  for (DeviceId d = 0; d < num_devices; ++d) {
    t.fastest = std::max(t.fastest, model.speed[d]);
    t.total_speed += model.speed[d];
    t.homogeneous &= model.speed[d] == model.speed[0];
  }
  const int64_t copies = std::max(1, model.plan.microbatches);
  // Longest path with free communication: earliest finish in topological order. The unrolled graph's
  // longest path is one microbatch's: copies only meet at once ops, and no per-microbatch op follows an
  // update (validation).
  std::vector<int64_t> finish(model.num_ops(), 0);
  for (const OpId v : model.topo_order) {
    int64_t start = 0;
    for (EdgeId i = model.in_begin(v); i < model.in_end(v); ++i) {
      start = std::max(start, finish[model.in_src[i]]);
    }
    const int64_t time = ScaledComputeNs(model.compute_ns[v], t.fastest);
    finish[v] = start + time;
    t.longest = std::max(t.longest, finish[v]);
    const int64_t n = model.is_once(v) ? 1 : copies;
    t.total_compute += static_cast<__int128>(model.compute_ns[v]) * n;
    t.total_fastest_time += static_cast<__int128>(time) * n;
    t.instances += n;
  }
  return t;
}

}  // namespace

int64_t LowerBoundNs(const Model& model) {
  if (model.num_ops() == 0 || model.num_devices() == 0) return 0;
  const BoundTerms t = ComputeBoundTerms(model);
  const int64_t work_bound = std::llround(static_cast<double>(t.total_compute) / t.total_speed);
  return std::max(t.longest, work_bound);
}

int64_t ProvenLowerBoundNs(const Model& model) {
  const int32_t num_devices = model.num_devices();
  if (model.num_ops() == 0 || num_devices == 0) return 0;
  const BoundTerms t = ComputeBoundTerms(model);
  int64_t work_bound = 0;
  if (t.homogeneous) {
    // The devices' busy times are integers summing to every instance's time: the busiest holds at
    // least the ceiling of their mean.
    const __int128 ceiling = (t.total_fastest_time + num_devices - 1) / num_devices;
    work_bound = static_cast<int64_t>(std::min<__int128>(ceiling, std::numeric_limits<int64_t>::max()));
  } else {
    // Device d runs an op of c ns in round(c / s_d) >= c / s_d - 1/2 ns, so in a step of T it fits
    // compute of at most s_d (T + n_d / 2): T >= (total compute - fastest x instances / 2) / total speed.
    // One ns off for the double's rounding.
    const double bound = (static_cast<double>(t.total_compute) - 0.5 * t.fastest * static_cast<double>(t.instances)) /
                         t.total_speed;
    if (bound > 1.0) {
      work_bound = static_cast<int64_t>(std::min(std::floor(bound) - 1.0, 9.0e18));
    }
  }
  return std::max(t.longest, work_bound);
}

int64_t AssignedLowerBoundNs(const Model& model, const Assignment& assignment,
                             LowerBoundScratch* scratch) {
  const int32_t num_ops = model.num_ops();
  const int32_t num_devices = model.num_devices();
  if (num_ops == 0 || num_devices == 0) return 0;
  const int64_t copies = std::max(1, model.plan.microbatches);
  using Node = LowerBoundScratch::Node;
  LowerBoundScratch own;
  std::vector<Node>& node = (scratch != nullptr ? scratch : &own)->nodes_;
  node.resize(num_ops);  // every field of every op is written below
  for (OpId v = 0; v < num_ops; ++v) {
    node[v].time = model.OpTimeNs(v, assignment[v]);
    node[v].device = assignment[v];
    node[v].once = model.is_once(v);
  }
  // The least delay an edge u -> v adds: its own bytes' transfer across devices between per-microbatch
  // ops (the simulated transfer carries at least these bytes), nothing otherwise.
  const auto edge_ns = [&model](const Node& u, const Node& v, int64_t bytes) -> int64_t {
    if (u.once || v.once) return 0;
    return model.TransferNs(u.device, v.device, bytes);
  };
  for (const OpId v : model.topo_order) {
    int64_t start = 0;
    for (EdgeId i = model.in_begin(v); i < model.in_end(v); ++i) {
      const Node& u = node[model.in_src[i]];
      start = std::max(start, u.finish + edge_ns(u, node[v], model.in_bytes[i]));
    }
    node[v].finish = start + node[v].time;
  }
  for (auto it = model.topo_order.rbegin(); it != model.topo_order.rend(); ++it) {
    const OpId v = *it;
    int64_t after = 0;
    for (EdgeId e = model.out_begin(v); e < model.out_end(v); ++e) {
      const Node& w = node[model.out_dst[e]];
      after = std::max(after, edge_ns(node[v], w, model.out_bytes[e]) + w.from);
    }
    node[v].from = node[v].time + after;
  }
  constexpr int64_t kUnset = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> first_start(num_devices, kUnset), least_tail(num_devices, kUnset);
  std::vector<__int128> busy(num_devices, 0);
  int64_t bound = 0;
  for (const Node& v : node) {
    const int64_t head = v.finish - v.time, tail = v.from - v.time;
    first_start[v.device] = std::min(first_start[v.device], head);
    least_tail[v.device] = std::min(least_tail[v.device], tail);
    busy[v.device] += static_cast<__int128>(v.time) * (v.once ? 1 : copies);
    bound = std::max(bound, v.finish + tail);
  }
  for (DeviceId d = 0; d < num_devices; ++d) {
    if (first_start[d] == kUnset) continue;
    const __int128 device_bound = static_cast<__int128>(first_start[d]) + busy[d] + least_tail[d];
    bound = std::max<int64_t>(
        bound, static_cast<int64_t>(std::min<__int128>(device_bound, std::numeric_limits<int64_t>::max())));
  }
  return bound;
}

namespace {

// An instance of the schedule: op and microbatch (0 for a once op), ordered by (op, microbatch).
struct Instance {
  OpId op = kNone;
  int32_t microbatch = 0;
  bool operator<(const Instance& other) const {
    return op != other.op ? op < other.op : microbatch < other.microbatch;
  }
};

// max(bytes of u's edges into device b), over the consumers `take` selects.
template <typename Take>
int64_t MaxBytesInto(const Model& model, const Assignment& assignment, OpId u, DeviceId b, Take take) {
  int64_t bytes = 0;
  for (EdgeId e = model.out_begin(u); e < model.out_end(u); ++e) {
    const OpId v = model.out_dst[e];
    if (assignment[v] == b && take(v)) bytes = std::max(bytes, model.out_bytes[e]);
  }
  return bytes;
}

}  // namespace

std::vector<OpId> CriticalPath(const Model& model, const Assignment& assignment,
                               const SimResult& result) {
  std::vector<OpId> path;
  const int32_t num_ops = model.num_ops();
  if (num_ops == 0) return path;
  const int32_t m_count = std::max(1, result.microbatches);
  const int32_t window = std::max(1, result.max_in_flight);
  auto copies = [&](OpId v) { return model.is_once(v) ? 1 : m_count; };
  auto index = [&](const Instance& x) { return static_cast<size_t>(x.microbatch) * num_ops + x.op; };
  Instance current;
  for (OpId u = 0; u < num_ops && current.op == kNone; ++u) {
    for (int32_t m = 0; m < copies(u); ++m) {
      if (result.finish_ns[static_cast<size_t>(m) * num_ops + u] == result.makespan_ns) {
        current = {u, m};
        break;
      }
    }
  }
  std::vector<Instance> walk;
  while (current.op != kNone) {
    walk.push_back(current);
    const OpId v = current.op;
    const int32_t m = current.microbatch;
    const int64_t start = result.start_ns[index(current)];
    const DeviceId b = assignment[v];
    const bool v_once = model.is_once(v);
    Instance next;
    const int32_t previous =
        result.previous_on_device.empty() ? kNone : result.previous_on_device[index(current)];
    if (previous != kNone && result.finish_ns[previous] == start) {
      next = {previous % num_ops, previous / num_ops};
    }
    for (EdgeId i = model.in_begin(v); i < model.in_end(v); ++i) {
      const OpId u = model.in_src[i];
      const bool u_once = model.is_once(u);
      Instance producer{u, u_once ? 0 : m};
      int64_t arrival = 0;
      if (!u_once && v_once) {
        // The accumulated gradient: from u's last copy to finish (the smallest microbatch on ties).
        int64_t last = -1;
        for (int32_t k = 0; k < m_count; ++k) {
          const int64_t f = result.finish_ns[static_cast<size_t>(k) * num_ops + u];
          if (f > last) {
            last = f;
            producer.microbatch = k;
          }
        }
        arrival = result.gradient_ready_ns.empty() ? last : result.gradient_ready_ns[u];
        if (assignment[u] != b) {
          arrival += model.TransferNs(assignment[u], b, MaxBytesInto(model, assignment, u, b, [&](OpId w) {
                                        return model.is_once(w);
                                      }));
        }
      } else {
        if (!(producer < next) && next.op != kNone) continue;
        arrival = result.finish_ns[index(producer)];
        if (arrival > start) continue;
        if (assignment[u] != b) {
          // The one transfer from u to b carries the largest of u's edges into b (per copy: into the
          // per-microbatch ops there).
          const int64_t bytes = MaxBytesInto(model, assignment, u, b, [&](OpId w) {
            return u_once || !model.is_once(w);
          });
          arrival += model.TransferNs(assignment[u], b, bytes);
        }
      }
      if (arrival == start && (next.op == kNone || producer < next)) next = producer;
    }
    if (next.op == kNone && !v_once && m >= window && m - window < static_cast<int32_t>(result.microbatch_done_ns.size()) &&
        result.microbatch_done_ns[m - window] == start && start > 0) {
      // The window held the copy back: step to the last copy of microbatch m − W.
      const int32_t k = m - window;
      for (OpId u = 0; u < num_ops; ++u) {
        if (!model.is_once(u) && result.finish_ns[static_cast<size_t>(k) * num_ops + u] == start) {
          next = {u, k};
          break;
        }
      }
    }
    current = next;
  }
  std::reverse(walk.begin(), walk.end());
  std::vector<uint8_t> seen(num_ops, 0);
  for (const Instance& x : walk) {
    if (seen[x.op]) continue;
    seen[x.op] = 1;
    path.push_back(x.op);
  }
  return path;
}

}  // namespace placement::engine
