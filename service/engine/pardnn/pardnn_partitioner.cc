#include "service/engine/pardnn/pardnn_partitioner.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "service/engine/pardnn/cluster_mapping.h"
#include "service/engine/pardnn/linear_clustering.h"
#include "service/engine/pardnn/refinement.h"
#include "service/engine/partition/simple_partitioners.h"
#include "service/engine/repair/memory_repair.h"
#include "service/engine/sim/placement_score.h"
#include "service/engine/sim/simulator.h"

namespace placement::engine {
namespace {

class PardnnPartitioner final : public Partitioner {
 public:
  explicit PardnnPartitioner(const PardnnOptions& options) : options_(options) {}

  std::string_view name() const override { return "pardnn"; }
  std::string_view version() const override { return "3"; }
  std::string_view description() const override {
    return "ParDNN on its own: critical-path slicing into linear clusters, span/communication-aware "
           "mapping (Fenwick trees), memory stage on the simulated timeline, critical-path refinement; "
           "no other algorithm's answer is used";
  }
  absl::StatusOr<PartitionResult> Partition(const Model& model,
                                            const SolveContext& context) const override;

 private:
  PardnnOptions options_;
};

absl::StatusOr<PartitionResult> PardnnPartitioner::Partition(const Model& model,
                                                             const SolveContext& context) const {
  PartitionResult out;
  const int32_t n = model.num_ops();
  if (n == 0) return out;
  const int32_t devices = model.num_devices();
  Simulator sim(model);

  // ---- Stage 1: slicing and mapping ----
  context.Report("slicing", 0.0);
  const pardnn::SlicingCosts costs = pardnn::ComputeSlicingCosts(model);
  const pardnn::LinearClusters clusters = pardnn::SliceIntoLinearClusters(model, costs, devices);
  out.ccr = clusters.ccr;
  out.dop = clusters.dop;
  context.Report("mapping", 0.1);
  // The mapping's memory estimate (persistent + half the outputs) is calibrated against the simulated
  // peaks: a device that overflows gets a proportionally smaller budget in the next mapping.
  pardnn::MappingOptions mapping_options = options_.mapping;
  mapping_options.capacity_scale.assign(devices, 1.0);
  // Large graphs get one mapping per calibration round, with the plain cost model (see below).
  const bool large = n > options_.refinement_max_ops;
  if (large) mapping_options.slack_aware = false;
  std::vector<Assignment> candidates;
  std::vector<PlacementScore> scores;
  int32_t best_mapping = -1;
  for (int32_t round = 0; round <= options_.memory_calibration_rounds; ++round) {
    absl::StatusOr<pardnn::ClusterMapping> mapping =
        pardnn::MapClustersToDevices(model, costs, clusters, mapping_options, context);
    if (!mapping.ok()) return mapping.status();
    out.time_limited |= mapping->time_limited;
    const SimResult& r = sim.Run(mapping->assignment);
    const PlacementScore s = ScoreSimulation(model, r);
    bool changed = false;
    for (DeviceId d = 0; d < devices; ++d) {
      const int64_t peak = r.peak_memory_bytes[d], capacity = model.capacity_bytes[d];
      if (peak <= capacity) continue;
      mapping_options.capacity_scale[d] *=
          options_.calibration_margin * static_cast<double>(capacity) / static_cast<double>(peak);
      changed = true;
    }
    if (best_mapping < 0 || s.BetterThan(scores[best_mapping])) {
      if (best_mapping < 0) {
        candidates.push_back(std::move(mapping->assignment));
        scores.push_back(s);
        best_mapping = 0;
      } else {
        candidates[0] = std::move(mapping->assignment);
        scores[0] = s;
      }
    }
    if (!changed || context.ShouldStop()) break;
  }
  // The other transfer/queueing cost model (MappingOptions::slack_aware): slack-aware costs suit graphs
  // whose critical path dominates, plain costs graphs where many near-critical chains share the
  // devices (an unrolled RNN); the simulator decides which mapping goes on.
  if (options_.try_both_cost_models && !large && !context.ShouldStop()) {
    pardnn::MappingOptions other = mapping_options;
    other.slack_aware = !other.slack_aware;
    absl::StatusOr<pardnn::ClusterMapping> mapping =
        pardnn::MapClustersToDevices(model, costs, clusters, other, context);
    if (mapping.ok()) {
      const PlacementScore s = ScoreSimulation(model, sim.Run(mapping->assignment));
      if (s.BetterThan(scores[0])) {
        candidates[0] = std::move(mapping->assignment);
        scores[0] = s;
        mapping_options = other;
      }
    }
  }
  // Re-timing: map again with the best mapping's simulated schedule as the time axis (its queueing and
  // transfers are then where the spans can see them); kept when it simulates better.
  const int32_t retiming_rounds = large ? 0 : options_.retiming_rounds;
  for (int32_t round = 0; round < retiming_rounds && !context.ShouldStop(); ++round) {
    const SimResult& base = sim.Run(candidates[0]);
    const std::vector<int64_t> start_ns = base.start_ns, finish_ns = base.finish_ns;
    pardnn::MappingOptions retimed = mapping_options;
    retimed.schedule_start_ns = &start_ns;
    retimed.schedule_finish_ns = &finish_ns;
    absl::StatusOr<pardnn::ClusterMapping> mapping =
        pardnn::MapClustersToDevices(model, costs, clusters, retimed, context);
    if (!mapping.ok()) break;
    const PlacementScore s = ScoreSimulation(model, sim.Run(mapping->assignment));
    if (!s.BetterThan(scores[0])) break;
    candidates[0] = std::move(mapping->assignment);
    scores[0] = s;
  }
  // Memory-bound graphs: also the mapping that attaches every cluster to the device it talks to most
  // (few cut edges, so few tensors are held twice), with the last calibration.
  if (!scores[0].Fits() && !context.ShouldStop()) {
    pardnn::MappingOptions attach = mapping_options;
    attach.load_weight = 0.0;
    absl::StatusOr<pardnn::ClusterMapping> mapping =
        pardnn::MapClustersToDevices(model, costs, clusters, attach, context);
    if (mapping.ok()) {
      scores.push_back(ScoreSimulation(model, sim.Run(mapping->assignment)));
      candidates.push_back(std::move(mapping->assignment));
    }
  }
  Assignment best;
  PlacementScore best_score = PlacementScore::Worst();
  auto consider = [&](const Assignment& a, const PlacementScore& s) {
    if (best.empty() || s.BetterThan(best_score)) {
      best = a;
      best_score = s;
    }
  };
  for (size_t i = 0; i < candidates.size(); ++i) consider(candidates[i], scores[i]);
  context.Report("mapping", 0.2, best_score.Fits() ? best_score.makespan_ns : 0);

  // ---- Stage 2: memory, for every mapping that overflows (least overflow first; each gets an equal
  // share of the time left, so one slow repair cannot starve the other). ----
  RepairOptions repair = options_.repair;
  repair.progress_from = 0.2;
  repair.progress_to = 0.4;
  RepairOptions to_the_brim = repair;
  to_the_brim.target_fill = 1.0;
  to_the_brim.max_stalled_rounds = std::max(repair.max_stalled_rounds, 30);
  std::vector<size_t> to_repair;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (!scores[i].Fits()) to_repair.push_back(i);
  }
  std::stable_sort(to_repair.begin(), to_repair.end(),
                   [&](size_t a, size_t b) { return scores[a].overflow_bytes < scores[b].overflow_bytes; });
  for (size_t k = 0; k < to_repair.size() && !context.ShouldStop(); ++k) {
    const SolveContext slice =
        context.WithShareOfTimeLeft(1.0 / static_cast<double>(to_repair.size() - k));
    Assignment a = candidates[to_repair[k]];
    RepairOutcome outcome = RepairMemory(model, slice, repair, a);
    out.time_limited |= outcome.time_limited;
    if (!outcome.fits && !slice.ShouldStop()) {
      // Stalled: every device is nearly full, so no target keeps the usual safety margin below its
      // capacity (RepairOptions::target_fill). Go on from there filling targets to the brim.
      outcome = RepairMemory(model, slice, to_the_brim, a);
      out.time_limited |= outcome.time_limited;
    }
    consider(a, PlacementScore{outcome.overflow_bytes, outcome.makespan_ns});
  }

  // Last resort when no mapping fits after stage 2: ParDNN for a single device (one cluster: the whole
  // graph on the fastest device, serial, so the fewest tensors are live at once), spread by the memory
  // stage. Serial placements hold the least activation memory; the memory stage then moves whole
  // colocation units off it, cheapest first, until every device fits.
  if (!best_score.Fits() && devices > 1 && !context.ShouldStop()) {
    Assignment serial = SingleDeviceAssignment(model);
    const RepairOutcome outcome = RepairMemory(model, context, to_the_brim, serial);
    out.time_limited |= outcome.time_limited;
    consider(serial, PlacementScore{outcome.overflow_bytes, outcome.makespan_ns});
  }

  // ---- Stage 3: refinement, critical-path local search on the best ----
  pardnn::RefinementOptions refinement;
  refinement.max_simulations = large ? 0 : PardnnRefinementBudget(options_, n, model.num_edges());
  refinement.progress_from = 0.4;
  refinement.progress_to = 1.0;
  if (refinement.max_simulations > 0 && devices > 1 && !context.ShouldStop()) {
    const pardnn::RefinementResult r =
        pardnn::RefineAlongCriticalPath(model, refinement, context, sim, best);
    out.time_limited |= r.time_limited;
  }
  if (context.ShouldStop()) out.time_limited = true;
  out.assignment = std::move(best);
  context.Report("done", 1.0);
  return out;
}

}  // namespace

int64_t PardnnRefinementBudget(const PardnnOptions& options, int64_t num_ops, int64_t num_edges) {
  if (options.refinement_max_simulations <= 0) return 0;
  return pardnn::SimulationBudget(options.refinement_scale, options.refinement_exponent,
                                  num_ops + num_edges, 0, options.refinement_max_simulations);
}

std::unique_ptr<Partitioner> MakePardnnPartitioner() {
  return std::make_unique<PardnnPartitioner>(PardnnOptions());
}

std::unique_ptr<Partitioner> MakePardnnPartitioner(const PardnnOptions& options) {
  return std::make_unique<PardnnPartitioner>(options);
}

}  // namespace placement::engine
