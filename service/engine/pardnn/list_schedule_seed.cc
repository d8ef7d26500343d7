#include "service/engine/pardnn/list_schedule_seed.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "service/engine/partition/placement_rules.h"

namespace placement::engine::pardnn {

Assignment EarliestFinishSeed(const Model& model, const SlicingCosts& costs, SeedOrder order_kind) {
  const int32_t n = model.num_ops();
  const int32_t devices = model.num_devices();
  Assignment assignment(n, kNone);
  if (n == 0) return assignment;
  PlacementRules rules(model);

  // Upward rank with mean costs; order by rank, then topological position (a valid topological order).
  std::vector<int64_t> rank(n, 0);
  std::vector<int32_t> topo_index(n, 0);
  for (int32_t i = 0; i < n; ++i) topo_index[model.topo_order[i]] = i;
  for (auto it = model.topo_order.rbegin(); it != model.topo_order.rend(); ++it) {
    const OpId v = *it;
    int64_t tail = 0;
    for (EdgeId e = model.out_begin(v); e < model.out_end(v); ++e) {
      tail = std::max(tail, costs.out_edge_ns[e] + rank[model.out_dst[e]]);
    }
    rank[v] = costs.op_ns[v] + tail;
  }

  // Transfer times in floating point (a seed needs no exact rounding; the 128-bit division of
  // Model::TransferNs would dominate this loop).
  std::vector<int64_t> link_latency(static_cast<size_t>(devices) * devices, 0);
  std::vector<double> link_ns_per_byte(static_cast<size_t>(devices) * devices, 0.0);
  for (DeviceId a = 0; a < devices; ++a) {
    for (DeviceId b = 0; b < devices; ++b) {
      if (a == b) continue;
      const LinkCost& link = model.Link(a, b);
      link_latency[static_cast<size_t>(a) * devices + b] = link.latency_ns;
      link_ns_per_byte[static_cast<size_t>(a) * devices + b] =
          1e9 / static_cast<double>(std::max<int64_t>(1, link.bandwidth_bytes_per_second));
    }
  }

  // Persistent bytes per unit (a group is charged once, when its device is chosen).
  std::vector<int64_t> group_persistent(model.num_groups(), 0);
  for (OpId v = 0; v < n; ++v) {
    const int32_t g = model.colocation_group[v];
    if (g != kNone) group_persistent[g] += model.persistent_bytes[v];
  }
  std::vector<DeviceId> group_device(model.num_groups(), kNone);
  std::vector<int64_t> persistent(devices, 0);
  std::vector<int64_t> free_at(devices, 0);
  std::vector<int64_t> finish(n, 0);
  // Live buffers in list order (the m-ETF idea): an output stays until its last consumer is placed; a
  // consumer on another device holds a copy until then too (tracked for up to 64 devices).
  std::vector<int64_t> live(devices, 0);
  std::vector<int32_t> consumers_left(n, 0);
  std::vector<uint64_t> copies(n, 0);
  const bool track_copies = devices <= 64;
  for (OpId v = 0; v < n; ++v) {
    consumers_left[v] = static_cast<int32_t>(model.out_end(v) - model.out_begin(v));
  }
  auto release = [&](OpId p) {
    live[assignment[p]] -= model.output_bytes[p];
    if (!track_copies || copies[p] == 0) return;
    for (DeviceId k = 0; k < devices; ++k) {
      if (((copies[p] >> k) & 1) == 0) continue;
      int64_t bytes = 0;
      for (EdgeId e = model.out_begin(p); e < model.out_end(p); ++e) {
        if (assignment[model.out_dst[e]] == k) bytes = std::max(bytes, model.out_bytes[e]);
      }
      live[k] -= bytes;
    }
  };
  auto place = [&](OpId v) {
    const int32_t g = model.colocation_group[v];
    const int64_t bytes = g != kNone ? group_persistent[g] : model.persistent_bytes[v];
    DeviceId best = kNone, best_fitting = kNone;
    int64_t best_finish = std::numeric_limits<int64_t>::max();
    int64_t best_fitting_finish = std::numeric_limits<int64_t>::max();
    auto consider = [&](DeviceId k) {
      int64_t ready = free_at[k];
      for (EdgeId e = model.in_begin(v); e < model.in_end(v); ++e) {
        const OpId p = model.in_src[e];
        const DeviceId dp = assignment[p];
        if (dp != k) {
          const size_t pair = static_cast<size_t>(dp) * devices + k;
          ready = std::max(ready, finish[p] + link_latency[pair] +
                                      static_cast<int64_t>(link_ns_per_byte[pair] *
                                                           static_cast<double>(model.in_bytes[e])));
        } else {
          ready = std::max(ready, finish[p]);
        }
      }
      const int64_t f = ready + model.OpTimeNs(v, k);
      if (f < best_finish) {
        best = k;
        best_finish = f;
      }
      int64_t need = persistent[k] + bytes + live[k] + model.output_bytes[v] + model.temp_bytes[v];
      if (track_copies) {
        for (EdgeId e = model.in_begin(v); e < model.in_end(v); ++e) {
          const OpId p = model.in_src[e];
          if (assignment[p] != k && ((copies[p] >> k) & 1) == 0) need += model.in_bytes[e];
        }
      }
      if (f < best_fitting_finish && need <= model.capacity_bytes[k]) {
        best_fitting = k;
        best_fitting_finish = f;
      }
    };
    if (g != kNone && group_device[g] != kNone) {
      consider(group_device[g]);
    } else {
      for (DeviceId k = 0; k < devices; ++k) {
        if (rules.Allowed(v, k)) consider(k);
      }
    }
    DeviceId d = best_fitting != kNone ? best_fitting : best;
    if (d == kNone) {  // no allowed device: invalid model; keep the assignment well-formed
      d = std::max<DeviceId>(0, rules.FirstAllowedFrom(v, 0));
      consider(d);
    }
    assignment[v] = d;
    finish[v] = d == best_fitting ? best_fitting_finish : best_finish;
    free_at[d] = finish[v];
    if (g != kNone && group_device[g] == kNone) {
      group_device[g] = d;
      persistent[d] += bytes;
    } else if (g == kNone) {
      persistent[d] += bytes;
    }
    live[d] += model.output_bytes[v];
    for (EdgeId e = model.in_begin(v); e < model.in_end(v); ++e) {
      const OpId p = model.in_src[e];
      if (track_copies && assignment[p] != d && ((copies[p] >> d) & 1) == 0) {
        copies[p] |= uint64_t{1} << d;
        live[d] += model.in_bytes[e];
      }
    }
    for (EdgeId e = model.in_begin(v); e < model.in_end(v); ++e) {
      const OpId p = model.in_src[e];
      if (--consumers_left[p] == 0) release(p);
    }
    if (consumers_left[v] == 0) release(v);
  };

  if (order_kind == SeedOrder::kRank) {
    // HEFT order: decreasing upward rank (then topological position: a valid topological order).
    std::vector<OpId> order(model.topo_order.begin(), model.topo_order.end());
    std::sort(order.begin(), order.end(), [&](OpId a, OpId b) {
      return rank[a] != rank[b] ? rank[a] > rank[b] : topo_index[a] < topo_index[b];
    });
    for (const OpId v : order) place(v);
  } else {
    // ETF order: the ready op whose inputs are done earliest goes next (ties: higher rank, then
    // topological position), so devices fill up in time order and idle ones take parallel work.
    struct Ready {
      int64_t time, rank;
      int32_t topo;
      OpId op;
    };
    auto later = [](const Ready& a, const Ready& b) {
      if (a.time != b.time) return a.time > b.time;
      if (a.rank != b.rank) return a.rank < b.rank;
      return a.topo > b.topo;
    };
    std::vector<Ready> heap;
    std::vector<int32_t> pending(n);
    for (OpId v = 0; v < n; ++v) {
      pending[v] = static_cast<int32_t>(model.in_end(v) - model.in_begin(v));
      if (pending[v] == 0) heap.push_back({0, rank[v], topo_index[v], v});
    }
    std::make_heap(heap.begin(), heap.end(), later);
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), later);
      const OpId v = heap.back().op;
      heap.pop_back();
      place(v);
      for (EdgeId e = model.out_begin(v); e < model.out_end(v); ++e) {
        const OpId c = model.out_dst[e];
        if (--pending[c] != 0) continue;
        int64_t ready = 0;
        for (EdgeId f = model.in_begin(c); f < model.in_end(c); ++f) {
          ready = std::max(ready, finish[model.in_src[f]]);
        }
        heap.push_back({ready, rank[c], topo_index[c], c});
        std::push_heap(heap.begin(), heap.end(), later);
      }
    }
  }
  return assignment;
}

}  // namespace placement::engine::pardnn
