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
#include "service/engine/repair/repair_each.h"
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

// One run of ParDNN on one model, in its stages (pardnn_partitioner.h numbers them): mapping candidates
// (stage 1, with the memory calibration, the second cost model, re-timing and, when memory binds, the
// attach mapping), the memory stage on those that overflow (stage 2), the serial last resort, and the
// critical-path refinement (stage 3). Every candidate is judged by the simulator of the model it places
// (with a training plan: the unrolled step).
class PardnnRun {
 public:
  PardnnRun(const PardnnOptions& options, const Model& model, const SolveContext& context)
      : options_(options), model_(model), context_(context), sim_(model),
        large_(model.num_ops() > options.refinement_max_ops) {}

  absl::StatusOr<PartitionResult> Run() {
    if (model_.num_ops() == 0) return out_;
    context_.Report("slicing", 0.0);
    const pardnn::SlicingCosts costs = pardnn::ComputeSlicingCosts(model_);
    const pardnn::LinearClusters clusters =
        pardnn::SliceIntoLinearClusters(model_, costs, model_.num_devices());
    out_.ccr = clusters.ccr;
    out_.dop = clusters.dop;
    context_.Report("mapping", 0.1);
    absl::Status mapped = MapWithCalibration(costs, clusters);
    if (!mapped.ok()) return mapped;
    TryTheOtherCostModel(costs, clusters);
    Retime(costs, clusters);
    AddAttachMapping(costs, clusters);
    for (size_t i = 0; i < candidates_.size(); ++i) Consider(candidates_[i], scores_[i]);
    context_.Report("mapping", 0.2, best_score_.Fits() ? best_score_.makespan_ns : 0);
    RepairOverflowing();
    SerialLastResort();
    Refine();
    if (context_.ShouldStop()) out_.time_limited = true;
    out_.assignment = std::move(best_);
    context_.Report("done", 1.0);
    return out_;
  }

 private:
  PlacementScore Score(const Assignment& assignment) {
    return ScoreSimulation(model_, sim_.Run(assignment));
  }
  void Consider(const Assignment& assignment, const PlacementScore& score) {
    if (best_.empty() || score.BetterThan(best_score_)) {
      best_ = assignment;
      best_score_ = score;
    }
  }
  // candidates_[0] becomes `assignment` when it scores better.
  bool KeepIfBetter(Assignment assignment, const PlacementScore& score) {
    if (!score.BetterThan(scores_[0])) return false;
    candidates_[0] = std::move(assignment);
    scores_[0] = score;
    return true;
  }

  // The mapping's memory estimate (persistent + half the outputs) is calibrated against the simulated
  // peaks: a device that overflows gets a proportionally smaller budget in the next mapping. Large
  // graphs get one mapping per calibration round, with the plain cost model.
  absl::Status MapWithCalibration(const pardnn::SlicingCosts& costs,
                                  const pardnn::LinearClusters& clusters) {
    const int32_t devices = model_.num_devices();
    mapping_options_ = options_.mapping;
    mapping_options_.capacity_scale.assign(devices, 1.0);
    if (large_) mapping_options_.slack_aware = false;
    for (int32_t round = 0; round <= options_.memory_calibration_rounds; ++round) {
      absl::StatusOr<pardnn::ClusterMapping> mapping =
          pardnn::MapClustersToDevices(model_, costs, clusters, mapping_options_, context_);
      if (!mapping.ok()) return mapping.status();
      out_.time_limited |= mapping->time_limited;
      const SimResult& r = sim_.Run(mapping->assignment);
      const PlacementScore s = ScoreSimulation(model_, r);
      bool changed = false;
      for (DeviceId d = 0; d < devices; ++d) {
        const int64_t peak = r.peak_memory_bytes[d], capacity = model_.capacity_bytes[d];
        if (peak <= capacity) continue;
        mapping_options_.capacity_scale[d] *=
            options_.calibration_margin * static_cast<double>(capacity) / static_cast<double>(peak);
        changed = true;
      }
      if (candidates_.empty()) {
        candidates_.push_back(std::move(mapping->assignment));
        scores_.push_back(s);
      } else {
        KeepIfBetter(std::move(mapping->assignment), s);
      }
      if (!changed || context_.ShouldStop()) break;
    }
    return absl::OkStatus();
  }

  // The other transfer/queueing cost model (MappingOptions::slack_aware): slack-aware costs suit graphs
  // whose critical path dominates, plain costs graphs where many near-critical chains share the
  // devices (an unrolled RNN); the simulator decides which mapping goes on.
  void TryTheOtherCostModel(const pardnn::SlicingCosts& costs, const pardnn::LinearClusters& clusters) {
    if (!options_.try_both_cost_models || large_ || context_.ShouldStop()) return;
    pardnn::MappingOptions other = mapping_options_;
    other.slack_aware = !other.slack_aware;
    absl::StatusOr<pardnn::ClusterMapping> mapping =
        pardnn::MapClustersToDevices(model_, costs, clusters, other, context_);
    if (!mapping.ok()) return;
    const PlacementScore s = Score(mapping->assignment);
    if (KeepIfBetter(std::move(mapping->assignment), s)) mapping_options_ = other;
  }

  // Re-timing: map again with the best mapping's simulated schedule as the time axis (its queueing and
  // transfers are then where the spans can see them); kept when it simulates better.
  void Retime(const pardnn::SlicingCosts& costs, const pardnn::LinearClusters& clusters) {
    const int32_t rounds = large_ ? 0 : options_.retiming_rounds;
    for (int32_t round = 0; round < rounds && !context_.ShouldStop(); ++round) {
      const SimResult& base = sim_.Run(candidates_[0]);
      // Microbatch 0's times (the first num_ops instances) are the one-microbatch schedule's.
      const std::vector<int64_t> start_ns(base.start_ns.begin(), base.start_ns.begin() + model_.num_ops());
      const std::vector<int64_t> finish_ns(base.finish_ns.begin(),
                                           base.finish_ns.begin() + model_.num_ops());
      pardnn::MappingOptions retimed = mapping_options_;
      retimed.schedule_start_ns = &start_ns;
      retimed.schedule_finish_ns = &finish_ns;
      absl::StatusOr<pardnn::ClusterMapping> mapping =
          pardnn::MapClustersToDevices(model_, costs, clusters, retimed, context_);
      if (!mapping.ok()) break;
      const PlacementScore s = Score(mapping->assignment);
      if (!KeepIfBetter(std::move(mapping->assignment), s)) break;
    }
  }

  // Memory-bound graphs: also the mapping that attaches every cluster to the device it talks to most
  // (few cut edges, so few tensors are held twice), with the last calibration.
  void AddAttachMapping(const pardnn::SlicingCosts& costs, const pardnn::LinearClusters& clusters) {
    if (scores_[0].Fits() || context_.ShouldStop()) return;
    pardnn::MappingOptions attach = mapping_options_;
    attach.load_weight = 0.0;
    absl::StatusOr<pardnn::ClusterMapping> mapping =
        pardnn::MapClustersToDevices(model_, costs, clusters, attach, context_);
    if (!mapping.ok()) return;
    scores_.push_back(Score(mapping->assignment));
    candidates_.push_back(std::move(mapping->assignment));
  }

  // Stage 2: memory, for every mapping that overflows (repair_each.h), retried to the brim when stalled.
  void RepairOverflowing() {
    RepairEachOptions each;
    each.repair = options_.repair;
    each.repair.progress_from = 0.2;
    each.repair.progress_to = 0.4;
    each.retry_to_the_brim = true;
    each.skip_duplicates = false;
    std::vector<ScoredCandidate> table;
    for (size_t i = 0; i < candidates_.size(); ++i) table.push_back({&candidates_[i], scores_[i]});
    const RepairEachResult repaired = RepairEachOverflowing(model_, context_, each, table);
    out_.time_limited |= repaired.time_limited;
    for (const RepairedCandidate& r : repaired.candidates) Consider(r.assignment, r.score);
  }

  // Last resort when no mapping fits after stage 2: ParDNN for a single device (one cluster: the whole
  // graph on the fastest device, serial, so the fewest tensors are live at once), spread by the memory
  // stage. Serial placements hold the least activation memory; the memory stage then moves whole
  // colocation units off it, cheapest first, until every device fits.
  void SerialLastResort() {
    if (best_score_.Fits() || model_.num_devices() <= 1 || context_.ShouldStop()) return;
    RepairOptions to_the_brim = options_.repair;
    to_the_brim.progress_from = 0.2;
    to_the_brim.progress_to = 0.4;
    to_the_brim.target_fill = 1.0;
    to_the_brim.max_stalled_rounds = std::max(to_the_brim.max_stalled_rounds, 30);
    Assignment serial = SingleDeviceAssignment(model_);
    const RepairOutcome outcome = RepairMemory(model_, context_, to_the_brim, serial);
    out_.time_limited |= outcome.time_limited;
    Consider(serial, PlacementScore{outcome.overflow_bytes, outcome.makespan_ns});
  }

  // Stage 3: refinement, critical-path local search on the best. Its budget counts the unrolled step.
  void Refine() {
    pardnn::RefinementOptions refinement;
    const int64_t copies = std::max(1, model_.plan.microbatches);
    refinement.max_simulations =
        large_ ? 0
               : PardnnRefinementBudget(options_, model_.num_ops() * copies, model_.num_edges() * copies);
    refinement.progress_from = 0.4;
    refinement.progress_to = 1.0;
    if (refinement.max_simulations <= 0 || model_.num_devices() <= 1 || context_.ShouldStop()) return;
    const pardnn::RefinementResult r =
        pardnn::RefineAlongCriticalPath(model_, refinement, context_, sim_, best_);
    out_.time_limited |= r.time_limited;
  }

  const PardnnOptions& options_;
  const Model& model_;
  const SolveContext& context_;
  Simulator sim_;
  const bool large_;
  PartitionResult out_;
  pardnn::MappingOptions mapping_options_;
  // Mapping candidates: [0] the best calibrated mapping, [1] the attach mapping when memory binds.
  std::vector<Assignment> candidates_;
  std::vector<PlacementScore> scores_;
  Assignment best_;
  PlacementScore best_score_ = PlacementScore::Worst();
};

absl::StatusOr<PartitionResult> PardnnPartitioner::Partition(const Model& model,
                                                             const SolveContext& context) const {
  return PardnnRun(options_, model, context).Run();
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
