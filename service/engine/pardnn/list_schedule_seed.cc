#include "service/engine/pardnn/list_schedule_seed.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "service/engine/partition/placement_rules.h"

namespace placement::engine::pardnn {

Assignment EarliestFinishSeed(const Model& model, const SlicingCosts& costs) {
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
  std::vector<OpId> order(model.topo_order.begin(), model.topo_order.end());
  std::sort(order.begin(), order.end(), [&](OpId a, OpId b) {
    return rank[a] != rank[b] ? rank[a] > rank[b] : topo_index[a] < topo_index[b];
  });

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
  for (const OpId v : order) {
    const int32_t g = model.colocation_group[v];
    const int64_t bytes = g != kNone ? group_persistent[g] : model.persistent_bytes[v];
    DeviceId best = kNone, best_fitting = kNone;
    int64_t best_finish = std::numeric_limits<int64_t>::max();
    int64_t best_fitting_finish = std::numeric_limits<int64_t>::max();
    auto consider = [&](DeviceId k) {
      int64_t ready = free_at[k];
      for (EdgeId e = model.in_begin(v); e < model.in_end(v); ++e) {
        const OpId p = model.in_src[e];
        ready = std::max(ready, finish[p] + model.TransferNs(assignment[p], k, model.in_bytes[e]));
      }
      const int64_t f = ready + model.OpTimeNs(v, k);
      if (f < best_finish) {
        best = k;
        best_finish = f;
      }
      if (f < best_fitting_finish && persistent[k] + bytes <= model.capacity_bytes[k]) {
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
  }
  return assignment;
}

}  // namespace placement::engine::pardnn
