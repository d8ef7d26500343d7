#include "service/engine/baselines/metis.h"

#include <metis.h>

#include <algorithm>
#include <optional>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "service/engine/baselines/placement_units.h"
#include "service/engine/repair/memory_repair.h"

namespace placement::engine {
namespace {

using baselines::PlacementUnits;

// METIS sums weights in 32-bit integers: keep each total well below 2^31.
constexpr double kMaxTotalWeight = static_cast<double>(1 << 28);

// Scales `values` (non-negative) so that their sum fits METIS and each is at least 1.
std::vector<idx_t> ScaleWeights(const std::vector<double>& values) {
  double total = 0.0;
  for (double value : values) total += value;
  const double scale = total > kMaxTotalWeight ? kMaxTotalWeight / total : 1.0;
  std::vector<idx_t> scaled(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    scaled[i] = std::max<idx_t>(1, static_cast<idx_t>(std::llround(values[i] * scale)));
  }
  return scaled;
}

struct UnitGraph {
  std::vector<idx_t> xadj;
  std::vector<idx_t> adjncy;
  std::vector<double> bytes;  // per adjacency entry, unscaled
};

// The undirected unit graph, neighbours sorted, parallel edges merged.
UnitGraph BuildUnitGraph(const Model& model, const PlacementUnits& units) {
  const int32_t n = units.num_units();
  UnitGraph graph;
  std::vector<int64_t> degree(n + 1, 0);
  for (OpId v = 0; v < model.num_ops(); ++v) {
    for (EdgeId e = model.out_begin(v); e < model.out_end(v); ++e) {
      const int32_t a = units.unit_of_op[v];
      const int32_t b = units.unit_of_op[model.out_dst[e]];
      if (a == b) continue;
      ++degree[a + 1];
      ++degree[b + 1];
    }
  }
  for (int32_t u = 0; u < n; ++u) degree[u + 1] += degree[u];
  std::vector<std::pair<int32_t, double>> entries(degree[n]);
  {
    std::vector<int64_t> fill(degree.begin(), degree.end() - 1);
    for (OpId v = 0; v < model.num_ops(); ++v) {
      for (EdgeId e = model.out_begin(v); e < model.out_end(v); ++e) {
        const int32_t a = units.unit_of_op[v];
        const int32_t b = units.unit_of_op[model.out_dst[e]];
        if (a == b) continue;
        // Control edges (0 bytes) still tie their ends together a little.
        const double bytes = std::max<double>(1.0, static_cast<double>(model.out_bytes[e]));
        entries[fill[a]++] = {b, bytes};
        entries[fill[b]++] = {a, bytes};
      }
    }
  }
  graph.xadj.reserve(n + 1);
  graph.xadj.push_back(0);
  for (int32_t u = 0; u < n; ++u) {
    auto first = entries.begin() + degree[u];
    auto last = entries.begin() + degree[u + 1];
    std::sort(first, last);
    for (auto it = first; it != last; ++it) {
      if (static_cast<idx_t>(graph.adjncy.size()) > graph.xadj.back() &&
          graph.adjncy.back() == it->first) {
        graph.bytes.back() += it->second;
      } else {
        graph.adjncy.push_back(it->first);
        graph.bytes.push_back(it->second);
      }
    }
    graph.xadj.push_back(static_cast<idx_t>(graph.adjncy.size()));
  }
  return graph;
}

class MetisPartitioner final : public Partitioner {
 public:
  std::string_view name() const override { return "metis"; }
  std::string_view version() const override { return "1"; }
  std::string_view description() const override {
    return "METIS k-way partition (libmetis; vertex weight = compute, edge weight = bytes, part weights "
           "by device speed), then repaired for constraints and memory";
  }

  absl::StatusOr<PartitionResult> Partition(const Model& model,
                                            const SolveContext& context) const override {
    absl::StatusOr<PartitionResult> result = Cut(model, context);
    if (!result.ok() || result->assignment.empty() || model.num_devices() == 0) return result;
    const RepairOutcome repair = RepairMemory(model, context, result->assignment);
    result->time_limited = result->time_limited || repair.time_limited;
    return result;
  }

  // The partition with pins, kinds and colocation honoured, before the memory repair.
  static absl::StatusOr<PartitionResult> Cut(const Model& model, const SolveContext& context) {
    if (std::optional<PartitionResult> none = baselines::NothingToPlace(model)) return *std::move(none);
    PartitionResult result;
    const DeviceId num_devices = model.num_devices();
    result.assignment.assign(model.num_ops(), kNone);
    const PlacementUnits units = baselines::BuildPlacementUnits(model);
    const int32_t num_units = units.num_units();
    if (num_units >= std::numeric_limits<idx_t>::max() / 2) {
      return absl::InvalidArgumentError("metis: graph too large for 32-bit METIS indices");
    }

    std::vector<idx_t> part(num_units, 0);
    UnitGraph graph = BuildUnitGraph(model, units);
    std::vector<idx_t> edge_weight = ScaleWeights(graph.bytes);
    graph.bytes = {};
    if (num_devices > 1 && !context.ShouldStop()) {
      std::vector<double> compute(num_units);
      for (int32_t u = 0; u < num_units; ++u) compute[u] = static_cast<double>(units.compute_ns[u]);
      std::vector<idx_t> vertex_weight = ScaleWeights(compute);
      double total_speed = 0.0;
      for (DeviceId d = 0; d < num_devices; ++d) total_speed += model.speed[d];
      std::vector<real_t> target(num_devices);
      for (DeviceId d = 0; d < num_devices; ++d) {
        target[d] = static_cast<real_t>(model.speed[d] / total_speed);
      }
      idx_t options[METIS_NOPTIONS];
      METIS_SetDefaultOptions(options);
      options[METIS_OPTION_SEED] = static_cast<idx_t>(context.seed & 0x7fffffff);
      options[METIS_OPTION_NUMBERING] = 0;
      idx_t nvtxs = num_units;
      idx_t ncon = 1;
      idx_t nparts = num_devices;
      idx_t edgecut = 0;
      const int status = METIS_PartGraphKway(
          &nvtxs, &ncon, graph.xadj.data(), graph.adjncy.data(), vertex_weight.data(),
          /*vsize=*/nullptr, edge_weight.data(), &nparts, target.data(), /*ubvec=*/nullptr, options,
          &edgecut, part.data());
      if (status != METIS_OK) {
        // METIS refuses degenerate inputs (e.g. fewer vertices than parts): fall back to putting the
        // heaviest units on the least loaded devices, which is what METIS would balance towards.
        LongestFirst(model, units, part);
      }
    } else if (num_devices > 1) {
      result.time_limited = true;
      LongestFirst(model, units, part);
    }

    FixConstraints(model, units, graph, edge_weight, part);
    for (int32_t u = 0; u < num_units; ++u) {
      for (int32_t i = units.begin(u); i < units.end(u); ++i) result.assignment[units.member[i]] = part[u];
    }
    return result;
  }

 private:
  // Units by decreasing compute, each to the device where it would finish its share soonest.
  static void LongestFirst(const Model& model, const PlacementUnits& units, std::vector<idx_t>& part) {
    std::vector<int32_t> order(units.num_units());
    for (int32_t u = 0; u < units.num_units(); ++u) order[u] = u;
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return units.compute_ns[a] > units.compute_ns[b];
    });
    std::vector<double> load(model.num_devices(), 0.0);
    for (int32_t u : order) {
      DeviceId best = 0;
      double best_load = std::numeric_limits<double>::infinity();
      for (DeviceId d = 0; d < model.num_devices(); ++d) {
        const double after = load[d] + static_cast<double>(units.compute_ns[u]) / model.speed[d];
        if (after < best_load) {
          best_load = after;
          best = d;
        }
      }
      load[best] = best_load;
      part[u] = best;
    }
  }

  // Moves every unit on a device it may not use to the allowed device it shares the most bytes with.
  static void FixConstraints(const Model& model, const PlacementUnits& units, const UnitGraph& graph,
                             const std::vector<idx_t>& edge_weight, std::vector<idx_t>& part) {
    const DeviceId num_devices = model.num_devices();
    std::vector<double> load(num_devices, 0.0);
    for (int32_t u = 0; u < units.num_units(); ++u) {
      load[part[u]] += static_cast<double>(units.compute_ns[u]) / model.speed[part[u]];
    }
    std::vector<int64_t> shared(num_devices, 0);
    for (int32_t u = 0; u < units.num_units(); ++u) {
      if (units.Allowed(model, u, part[u])) continue;
      std::fill(shared.begin(), shared.end(), 0);
      for (idx_t i = graph.xadj[u]; i < graph.xadj[u + 1]; ++i) shared[part[graph.adjncy[i]]] += edge_weight[i];
      DeviceId best = kNone;
      for (DeviceId d = 0; d < num_devices; ++d) {
        if (!units.Allowed(model, u, d)) continue;
        if (best == kNone || shared[d] > shared[best] ||
            (shared[d] == shared[best] && load[d] < load[best])) {
          best = d;
        }
      }
      load[part[u]] -= static_cast<double>(units.compute_ns[u]) / model.speed[part[u]];
      part[u] = best;
      load[best] += static_cast<double>(units.compute_ns[u]) / model.speed[best];
    }
  }
};

}  // namespace

std::unique_ptr<Partitioner> MakeMetisPartitioner() { return std::make_unique<MetisPartitioner>(); }

}  // namespace placement::engine
