#include "service/engine/pardnn/linear_clustering.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
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

TopoGraph BuildTopoGraph(const Model& model, const SlicingCosts& costs) {
  TopoGraph g;
  const int32_t n = model.num_ops();
  g.op_at.assign(model.topo_order.begin(), model.topo_order.end());
  g.pos_of.resize(n);
  for (int32_t i = 0; i < n; ++i) g.pos_of[g.op_at[i]] = i;
  g.op_ns.resize(n);
  g.out_offset.resize(static_cast<size_t>(n) + 1);
  g.in_offset.resize(static_cast<size_t>(n) + 1);
  g.out_dst.resize(model.num_edges());
  g.in_src.resize(model.num_edges());
  g.out_ns.resize(model.num_edges());
  g.in_ns.resize(model.num_edges());
  g.out_bytes.resize(model.num_edges());
  g.in_bytes.resize(model.num_edges());
  int64_t out = 0, in = 0;
  for (int32_t i = 0; i < n; ++i) {
    const OpId v = g.op_at[i];
    g.op_ns[i] = costs.op_ns[v];
    g.out_offset[i] = out;
    for (EdgeId e = model.out_begin(v); e < model.out_end(v); ++e, ++out) {
      g.out_dst[out] = g.pos_of[model.out_dst[e]];
      g.out_ns[out] = costs.out_edge_ns[e];
      g.out_bytes[out] = model.out_bytes[e];
    }
    g.in_offset[i] = in;
    for (EdgeId e = model.in_begin(v); e < model.in_end(v); ++e, ++in) {
      g.in_src[in] = g.pos_of[model.in_src[e]];
      g.in_ns[in] = costs.in_edge_ns[e];
      g.in_bytes[in] = model.in_bytes[e];
    }
  }
  g.out_offset[n] = out;
  g.in_offset[n] = in;
  return g;
}

namespace {

// Levels by position; cluster ids by position (kNone never matches).
void PositionLevels(const TopoGraph& g, const std::vector<int32_t>& cluster, std::vector<int64_t>& tl,
                    std::vector<int64_t>& bl, double cross_edge_weight = 1.0) {
  auto cross = [cross_edge_weight](int64_t ns) {
    return cross_edge_weight == 1.0 ? ns : static_cast<int64_t>(static_cast<double>(ns) * cross_edge_weight);
  };
  const int32_t n = g.size();
  tl.assign(n, 0);
  bl.assign(n, 0);
  for (int32_t i = 0; i < n; ++i) {
    const int32_t c = cluster[i];
    int64_t start = 0;
    for (int64_t e = g.in_offset[i]; e < g.in_offset[i + 1]; ++e) {
      const int32_t p = g.in_src[e];
      const bool same = c != kNone && cluster[p] == c;
      start = std::max(start, tl[p] + g.op_ns[p] + (same ? 0 : cross(g.in_ns[e])));
    }
    tl[i] = start;
  }
  for (int32_t i = n - 1; i >= 0; --i) {
    const int32_t c = cluster[i];
    int64_t tail = 0;
    for (int64_t e = g.out_offset[i]; e < g.out_offset[i + 1]; ++e) {
      const int32_t ch = g.out_dst[e];
      const bool same = c != kNone && cluster[ch] == c;
      tail = std::max(tail, bl[ch] + (same ? 0 : cross(g.out_ns[e])));
    }
    bl[i] = g.op_ns[i] + tail;
  }
}

}  // namespace

void ComputePositionLevels(const TopoGraph& graph, const std::vector<int32_t>& cluster_by_position,
                           std::vector<int64_t>* top_level, std::vector<int64_t>* bottom_level,
                           double cross_edge_weight) {
  PositionLevels(graph, cluster_by_position, *top_level, *bottom_level, cross_edge_weight);
}

void ComputeClusteredLevels(const TopoGraph& g, const std::vector<int32_t>& cluster_of,
                            std::vector<int64_t>* top_level, std::vector<int64_t>* bottom_level) {
  const int32_t n = g.size();
  std::vector<int32_t> cluster(n);
  for (int32_t i = 0; i < n; ++i) cluster[i] = cluster_of[g.op_at[i]];
  std::vector<int64_t> tl, bl;
  PositionLevels(g, cluster, tl, bl);
  top_level->resize(n);
  bottom_level->resize(n);
  for (int32_t i = 0; i < n; ++i) {
    (*top_level)[g.op_at[i]] = tl[i];
    (*bottom_level)[g.op_at[i]] = bl[i];
  }
}

LinearClusters SliceIntoLinearClusters(const Model& model, const SlicingCosts& costs,
                                       int32_t num_primaries) {
  const int32_t n = model.num_ops();
  LinearClusters result;
  result.topo = BuildTopoGraph(model, costs);
  const TopoGraph& g = result.topo;
  // Everything below works on positions; op ids only break ties.
  std::vector<int32_t> cluster(n, kNone);
  std::vector<uint8_t> visited(n, 0);
  std::vector<int64_t> bl(n, 0);
  // Paths in extraction order (cluster c = positions path[path_offset[c] .. path_offset[c + 1])).
  std::vector<int32_t> path;
  std::vector<int32_t> path_offset = {0};
  path.reserve(n);
  auto prefer = [&](int32_t a, int64_t va, int32_t b, int64_t vb) {  // is a better than b?
    return b == kNone || va > vb || (va == vb && g.op_at[a] < g.op_at[b]);
  };

  // ---- Primaries: heaviest remaining path, K times. ----
  int64_t critical_work = 0;
  for (int32_t p = 0; p < num_primaries; ++p) {
    // Bottom levels over the unclustered subgraph (edges into clustered ops are ignored).
    int32_t start = kNone;
    for (int32_t i = n - 1; i >= 0; --i) {
      if (visited[i]) continue;
      int64_t tail = 0;
      for (int64_t e = g.out_offset[i]; e < g.out_offset[i + 1]; ++e) {
        const int32_t c = g.out_dst[e];
        if (!visited[c]) tail = std::max(tail, g.out_ns[e] + bl[c]);
      }
      bl[i] = g.op_ns[i] + tail;
      if (prefer(i, bl[i], start, start == kNone ? 0 : bl[start])) start = i;
    }
    if (start == kNone) break;  // every op is clustered already
    int64_t work = 0;
    for (int32_t i = start; i != kNone;) {
      visited[i] = 1;
      cluster[i] = p;
      path.push_back(i);
      work += g.op_ns[i];
      int32_t next = kNone;
      int64_t best = 0;
      for (int64_t e = g.out_offset[i]; e < g.out_offset[i + 1]; ++e) {
        const int32_t c = g.out_dst[e];
        if (visited[c]) continue;
        const int64_t value = g.out_ns[e] + bl[c];
        if (prefer(c, value, next, best)) {
          next = c;
          best = value;
        }
      }
      i = next;
    }
    path_offset.push_back(static_cast<int32_t>(path.size()));
    if (p == 0) critical_work = work;
  }
  result.num_primaries = static_cast<int32_t>(path_offset.size()) - 1;
  result.dop = critical_work > 0 ? static_cast<double>(costs.total_work_ns) / critical_work : 1.0;
  result.ccr = costs.total_work_ns > 0
                   ? static_cast<double>(costs.total_comm_ns) / costs.total_work_ns
                   : 0.0;

  // ---- Secondaries: chains in decreasing weighted level. ----
  std::vector<int64_t> tl, blc;
  PositionLevels(g, cluster, tl, blc);
  // Start order: weighted level descending, then top level, then op id (packed keys sort fast).
  struct StartKey {
    int64_t weighted_level;
    int64_t top_level;
    OpId op;
    int32_t pos;
  };
  std::vector<StartKey> keys;
  keys.reserve(n - path.size());
  for (int32_t i = 0; i < n; ++i) {
    if (!visited[i]) keys.push_back({tl[i] + blc[i], tl[i], g.op_at[i], i});
  }
  std::sort(keys.begin(), keys.end(), [](const StartKey& a, const StartKey& b) {
    if (a.weighted_level != b.weighted_level) return a.weighted_level > b.weighted_level;
    if (a.top_level != b.top_level) return a.top_level < b.top_level;
    return a.op < b.op;
  });
  std::vector<int32_t> order(keys.size());
  for (size_t k = 0; k < keys.size(); ++k) order[k] = keys[k].pos;
  std::vector<StartKey>().swap(keys);
  int32_t next_id = result.num_primaries;
  for (const int32_t first : order) {
    if (visited[first]) continue;
    const int32_t id = next_id++;
    for (int32_t i = first;;) {
      visited[i] = 1;
      cluster[i] = id;
      path.push_back(i);
      // The critical successor among all children; the chain ends where it is already clustered.
      int32_t next = kNone;
      int64_t best = 0;
      for (int64_t e = g.out_offset[i]; e < g.out_offset[i + 1]; ++e) {
        const int32_t c = g.out_dst[e];
        const int64_t value = g.out_ns[e] + blc[c];
        if (prefer(c, value, next, best)) {
          next = c;
          best = value;
        }
      }
      if (next == kNone || visited[next]) break;
      i = next;
    }
    path_offset.push_back(static_cast<int32_t>(path.size()));
  }

  // ---- Final levels and the secondaries' processing order. ----
  PositionLevels(g, cluster, tl, blc);
  const int32_t clusters = static_cast<int32_t>(path_offset.size()) - 1;
  std::vector<std::pair<int64_t, int32_t>> level_keys;  // (-weighted level of first op, cluster)
  level_keys.reserve(clusters - result.num_primaries);
  for (int32_t c = result.num_primaries; c < clusters; ++c) {
    const int32_t f = path[path_offset[c]];
    level_keys.emplace_back(-(tl[f] + blc[f]), c);
  }
  std::sort(level_keys.begin(), level_keys.end());
  std::vector<int32_t> by_level(level_keys.size());
  for (size_t k = 0; k < level_keys.size(); ++k) by_level[k] = level_keys[k].second;
  result.cluster_of.assign(n, kNone);
  result.offset.assign(1, 0);
  result.offset.reserve(clusters + 1);
  result.ops.reserve(n);
  auto emit = [&](int32_t old_id, int32_t new_id) {
    for (int32_t k = path_offset[old_id]; k < path_offset[old_id + 1]; ++k) {
      const OpId v = g.op_at[path[k]];
      result.ops.push_back(v);
      result.cluster_of[v] = new_id;
    }
    result.offset.push_back(static_cast<int32_t>(result.ops.size()));
  };
  for (int32_t c = 0; c < result.num_primaries; ++c) emit(c, c);
  for (size_t k = 0; k < by_level.size(); ++k) {
    emit(by_level[k], result.num_primaries + static_cast<int32_t>(k));
  }
  result.top_level.resize(n);
  result.bottom_level.resize(n);
  for (int32_t i = 0; i < n; ++i) {
    result.top_level[g.op_at[i]] = tl[i];
    result.bottom_level[g.op_at[i]] = blc[i];
  }
  return result;
}

}  // namespace placement::engine::pardnn
