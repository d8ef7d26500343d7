#include "service/engine/pardnn/linear_clustering.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace placement::engine::pardnn {

SlicingCosts ComputeSlicingCosts(const Model& model) {
  SlicingCosts costs;
  const int32_t n = model.num_ops();
  const int32_t devices = model.num_devices();
  double speed_sum = 0.0;
  for (DeviceId d = 0; d < devices; ++d) speed_sum += model.speed[d];
  costs.mean_speed = devices > 0 ? speed_sum / devices : 1.0;

  // The mean link over ordered pairs of distinct devices: mean latency and mean ns per byte.
  double latency = 0.0, ns_per_byte = 0.0;
  if (devices >= 2) {
    for (DeviceId a = 0; a < devices; ++a) {
      for (DeviceId b = 0; b < devices; ++b) {
        if (a == b) continue;
        const LinkCost& link = model.Link(a, b);
        latency += static_cast<double>(link.latency_ns);
        ns_per_byte += 1e9 / static_cast<double>(std::max<int64_t>(1, link.bandwidth_bytes_per_second));
      }
    }
    const double pairs = static_cast<double>(devices) * (devices - 1);
    latency /= pairs;
    ns_per_byte /= pairs;
  }
  auto edge_time = [&](int64_t bytes) -> int64_t {
    if (devices < 2) return 0;
    return static_cast<int64_t>(std::llround(latency + ns_per_byte * static_cast<double>(bytes)));
  };

  costs.op_ns.resize(n);
  for (OpId v = 0; v < n; ++v) {
    costs.op_ns[v] = ScaledComputeNs(model.compute_ns[v], costs.mean_speed);
    costs.total_work_ns += costs.op_ns[v];
  }
  costs.out_edge_ns.resize(model.num_edges());
  costs.in_edge_ns.resize(model.num_edges());
  for (EdgeId e = 0; e < model.num_edges(); ++e) {
    costs.out_edge_ns[e] = edge_time(model.out_bytes[e]);
    costs.in_edge_ns[e] = edge_time(model.in_bytes[e]);
    costs.total_comm_ns += costs.out_edge_ns[e];
  }
  return costs;
}

void ComputeClusteredLevels(const Model& model, const SlicingCosts& costs,
                            const std::vector<int32_t>& cluster_of, std::vector<int64_t>* top_level,
                            std::vector<int64_t>* bottom_level) {
  const int32_t n = model.num_ops();
  std::vector<int64_t>& tl = *top_level;
  std::vector<int64_t>& bl = *bottom_level;
  tl.assign(n, 0);
  bl.assign(n, 0);
  auto same = [&](OpId a, OpId b) { return cluster_of[a] != kNone && cluster_of[a] == cluster_of[b]; };
  for (const OpId v : model.topo_order) {
    int64_t start = 0;
    for (EdgeId e = model.in_begin(v); e < model.in_end(v); ++e) {
      const OpId p = model.in_src[e];
      start = std::max(start, tl[p] + costs.op_ns[p] + (same(p, v) ? 0 : costs.in_edge_ns[e]));
    }
    tl[v] = start;
  }
  for (auto it = model.topo_order.rbegin(); it != model.topo_order.rend(); ++it) {
    const OpId v = *it;
    int64_t tail = 0;
    for (EdgeId e = model.out_begin(v); e < model.out_end(v); ++e) {
      const OpId c = model.out_dst[e];
      tail = std::max(tail, bl[c] + (same(v, c) ? 0 : costs.out_edge_ns[e]));
    }
    bl[v] = costs.op_ns[v] + tail;
  }
}

LinearClusters SliceIntoLinearClusters(const Model& model, const SlicingCosts& costs,
                                       int32_t num_primaries) {
  const int32_t n = model.num_ops();
  LinearClusters result;
  result.cluster_of.assign(n, kNone);
  std::vector<int32_t>& cluster_of = result.cluster_of;
  std::vector<uint8_t> visited(n, 0);
  std::vector<int64_t> bl(n, 0);
  // Paths in extraction order (cluster c = ops path_ops[path_offset[c] .. path_offset[c + 1])).
  std::vector<OpId> path_ops;
  std::vector<int32_t> path_offset = {0};
  path_ops.reserve(n);

  // ---- Primaries: heaviest remaining path, K times. ----
  int64_t critical_work = 0;
  for (int32_t p = 0; p < num_primaries; ++p) {
    // Bottom levels over the unclustered subgraph (edges into clustered ops are ignored).
    OpId start = kNone;
    for (auto it = model.topo_order.rbegin(); it != model.topo_order.rend(); ++it) {
      const OpId v = *it;
      if (visited[v]) continue;
      int64_t tail = 0;
      for (EdgeId e = model.out_begin(v); e < model.out_end(v); ++e) {
        const OpId c = model.out_dst[e];
        if (!visited[c]) tail = std::max(tail, costs.out_edge_ns[e] + bl[c]);
      }
      bl[v] = costs.op_ns[v] + tail;
      if (start == kNone || bl[v] > bl[start] || (bl[v] == bl[start] && v < start)) start = v;
    }
    if (start == kNone) break;  // every op is clustered already
    int64_t work = 0;
    for (OpId v = start; v != kNone;) {
      visited[v] = 1;
      cluster_of[v] = p;
      path_ops.push_back(v);
      work += costs.op_ns[v];
      OpId next = kNone;
      int64_t best = 0;
      for (EdgeId e = model.out_begin(v); e < model.out_end(v); ++e) {
        const OpId c = model.out_dst[e];
        if (visited[c]) continue;
        const int64_t value = costs.out_edge_ns[e] + bl[c];
        if (next == kNone || value > best || (value == best && c < next)) {
          next = c;
          best = value;
        }
      }
      v = next;
    }
    path_offset.push_back(static_cast<int32_t>(path_ops.size()));
    if (p == 0) critical_work = work;
  }
  result.num_primaries = static_cast<int32_t>(path_offset.size()) - 1;
  result.dop = critical_work > 0 ? static_cast<double>(costs.total_work_ns) / critical_work : 1.0;
  result.ccr = costs.total_work_ns > 0
                   ? static_cast<double>(costs.total_comm_ns) / costs.total_work_ns
                   : 0.0;

  // ---- Secondaries: chains in decreasing weighted level. ----
  std::vector<int64_t>& tl = result.top_level;
  std::vector<int64_t>& blc = result.bottom_level;
  ComputeClusteredLevels(model, costs, cluster_of, &tl, &blc);
  std::vector<OpId> order;
  order.reserve(n - path_ops.size());
  for (OpId v = 0; v < n; ++v) {
    if (!visited[v]) order.push_back(v);
  }
  std::sort(order.begin(), order.end(), [&](OpId a, OpId b) {
    const int64_t wa = tl[a] + blc[a], wb = tl[b] + blc[b];
    if (wa != wb) return wa > wb;
    if (tl[a] != tl[b]) return tl[a] < tl[b];
    return a < b;
  });
  int32_t next_id = result.num_primaries;
  for (const OpId first : order) {
    if (visited[first]) continue;
    const int32_t id = next_id++;
    for (OpId v = first;;) {
      visited[v] = 1;
      cluster_of[v] = id;
      path_ops.push_back(v);
      // The critical successor among all children; the chain ends where it is already clustered.
      OpId next = kNone;
      int64_t best = 0;
      for (EdgeId e = model.out_begin(v); e < model.out_end(v); ++e) {
        const OpId c = model.out_dst[e];
        const int64_t value = costs.out_edge_ns[e] + blc[c];
        if (next == kNone || value > best || (value == best && c < next)) {
          next = c;
          best = value;
        }
      }
      if (next == kNone || visited[next]) break;
      v = next;
    }
    path_offset.push_back(static_cast<int32_t>(path_ops.size()));
  }

  // ---- Final levels and the secondaries' processing order. ----
  ComputeClusteredLevels(model, costs, cluster_of, &tl, &blc);
  const int32_t clusters = static_cast<int32_t>(path_offset.size()) - 1;
  std::vector<int32_t> by_level;
  by_level.reserve(clusters - result.num_primaries);
  for (int32_t c = result.num_primaries; c < clusters; ++c) by_level.push_back(c);
  std::sort(by_level.begin(), by_level.end(), [&](int32_t a, int32_t b) {
    const OpId fa = path_ops[path_offset[a]], fb = path_ops[path_offset[b]];
    const int64_t wa = tl[fa] + blc[fa], wb = tl[fb] + blc[fb];
    return wa != wb ? wa > wb : a < b;
  });
  result.offset.assign(1, 0);
  result.offset.reserve(clusters + 1);
  result.ops.reserve(n);
  auto emit = [&](int32_t old_id, int32_t new_id) {
    for (int32_t i = path_offset[old_id]; i < path_offset[old_id + 1]; ++i) {
      result.ops.push_back(path_ops[i]);
      cluster_of[path_ops[i]] = new_id;
    }
    result.offset.push_back(static_cast<int32_t>(result.ops.size()));
  };
  for (int32_t c = 0; c < result.num_primaries; ++c) emit(c, c);
  for (size_t i = 0; i < by_level.size(); ++i) {
    emit(by_level[i], result.num_primaries + static_cast<int32_t>(i));
  }
  return result;
}

}  // namespace placement::engine::pardnn
