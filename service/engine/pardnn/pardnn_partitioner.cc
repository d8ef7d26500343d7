#include "service/engine/pardnn/pardnn_partitioner.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "service/engine/model/replica_group.h"
#include "service/engine/pardnn/cluster_mapping.h"
#include "service/engine/pardnn/linear_clustering.h"
#include "service/engine/pardnn/refinement.h"
#include "service/engine/pardnn/work_balance.h"
#include "service/engine/partition/simple_partitioners.h"
#include "service/engine/repair/memory_repair.h"
#include "service/engine/repair/repair_each.h"
#include "service/engine/sim/placement_score.h"
#include "service/engine/sim/simulator.h"

namespace placement::engine {
namespace {

// The devices of the fewest nodes, in order of first appearance, whose capacity holds `bytes`; empty
// when that takes every node, or when an op is pinned to a device outside them.
std::vector<DeviceId> FewerHostsDevices(const Model& model, double bytes) {
  const int32_t nodes = static_cast<int32_t>(model.node_name.size());
  std::vector<DeviceId> devices;
  double capacity = 0.0;
  for (int32_t node = 0; node < nodes && capacity < bytes; ++node) {
    for (DeviceId d = 0; d < model.num_devices(); ++d) {
      if (model.device_node[d] != node) continue;
      devices.push_back(d);
      capacity += static_cast<double>(model.capacity_bytes[d]);
    }
  }
  if (capacity < bytes || static_cast<int32_t>(devices.size()) == model.num_devices()) return {};
  std::sort(devices.begin(), devices.end());
  for (OpId v = 0; v < model.num_ops(); ++v) {
    const DeviceId pin = model.pinned_device[v];
    if (pin != kNone && !std::binary_search(devices.begin(), devices.end(), pin)) return {};
  }
  return devices;
}

// `model` with only `devices` (ascending), renumbered 0..n-1 in that order, pins too. Precondition: no
// op pinned outside them, no previous placement, one replica.
Model DeviceSubsetModel(const Model& model, const std::vector<DeviceId>& devices) {
  Model sub = DeviceSubset(model, devices);
  std::vector<DeviceId> index_of(model.num_devices(), kNone);
  for (size_t i = 0; i < devices.size(); ++i) index_of[devices[i]] = static_cast<DeviceId>(i);
  for (DeviceId& pin : sub.pinned_device) {
    if (pin != kNone) pin = index_of[pin];
  }
  sub.cluster_devices = static_cast<int32_t>(devices.size());
  return sub;
}

class PardnnPartitioner final : public Partitioner {
 public:
  // Without refinement and re-timing (what a re-placement asks for: its own search follows) the
  // answers differ, and so does the version.
  explicit PardnnPartitioner(const PardnnOptions& options)
      : options_(options),
        version_(options.refinement_max_simulations == 0 && options.retiming_rounds == 0 ? "11-quick" : "11") {}

  std::string_view name() const override { return "pardnn"; }
  bool searches() const override { return true; }
  std::string_view version() const override { return version_; }
  std::string_view description() const override {
    return "ParDNN on its own: critical-path slicing into linear clusters, span/communication-aware "
           "mapping (Fenwick trees), memory stage on the simulated timeline, critical-path refinement; "
           "no other algorithm's answer is used";
  }
  absl::StatusOr<PartitionResult> Partition(const Model& model,
                                            const SolveContext& context) const override;

 private:
  PardnnOptions options_;
  std::string version_;
};

// One run of ParDNN on one model, in its stages (pardnn_partitioner.h numbers them): mapping candidates
// (stage 1, with the memory calibration, the second cost model, re-timing and, when memory binds, the
// attach mapping), the memory stage on those that overflow (stage 2), the serial last resort, and the
// critical-path refinement (stage 3). Every candidate is judged by the simulator of the model it places
// (with a training plan: the unrolled step).
//
// When memory binds, stage 1 runs in three families: the time-resolved memory estimate with the
// critical path in chunks (MappingOptions defaults); the static estimate with contiguous critical-path
// pieces; and (PardnnOptions::parameters_family) the same pieces carrying the parameters their ops read,
// sized by each device's share of that whole footprint, with every backward op on the piece that holds
// its activation (MappingOptions::segment_with_parameters: a training step cut into stretches of layers
// with their weights, as pipeline stages hold them); a fourth, when it fits, is the first family's
// mapping with memory out of view (PardnnOptions::memory_oblivious_mapping: ParDNN's own first stage,
// for where the estimates are pessimistic). Each family keeps its best mapping; all go
// through stage 2 (with the quicker mappings that were set aside only for their overflow; the third
// family's after the others', with at most half the time they leave), and the refinement starts from
// the best answer of each family, each with the whole budget: where a local search ends depends on
// where it starts; each start's work balance (work_balance.h) too, refined when it is better than its
// family's refined best. On a cluster of several hosts, last, pardnn on the devices of the fewest hosts
// that hold the step (FewerHosts). When memory never binds there is one family and every stage is as
// it was.
class PardnnRun {
 public:
  PardnnRun(const PardnnOptions& options, const Model& model, const SolveContext& context)
      : options_(options), model_(model), context_(context), sim_(model),
        batched_(model.num_ops() > options.batch_refinement_min_ops),
        lower_bound_ns_(LowerBoundNs(model)) {
    sim_options_.compute_memory = MemoryCanBind(model);
  }

  absl::StatusOr<PartitionResult> Run() {
    if (model_.num_ops() == 0) return out_;
    context_.Report("slicing", 0.0);
    const pardnn::SlicingCosts costs = pardnn::ComputeSlicingCosts(model_);
    const pardnn::LinearClusters clusters =
        pardnn::SliceIntoLinearClusters(model_, costs, model_.num_devices());
    out_.ccr = clusters.ccr;
    out_.dop = clusters.dop;
    context_.Report("mapping", 0.1);
    pardnn::MappingOptions first_options = options_.mapping;
    if (batched_) {
      // Few refinement simulations: the mapping's own worklist improvement pass does part of their job.
      first_options.improvement_evaluations_per_cluster =
          std::max(first_options.improvement_evaluations_per_cluster, options_.batched_improvement_evaluations);
    }
    absl::Status mapped = MapFamily(costs, clusters, first_options);
    if (!mapped.ok()) return mapped;
    const pardnn::MappingOptions first_family_options = mapping_options_;
    if (memory_binds_ && options_.mapping.memory_timeline && !context_.ShouldStop()) {
      pardnn::MappingOptions static_estimate = first_options;
      static_estimate.memory_timeline = false;
      static_estimate.chunk_critical_path = false;
      mapped = MapFamily(costs, clusters, static_estimate);
      if (!mapped.ok()) return mapped;
      if (options_.parameters_family && !context_.ShouldStop()) {
        // The third family: contiguous critical-path pieces that carry the parameters they read,
        // sized by the path's whole footprint (MappingOptions::segment_with_parameters). Its
        // mappings go through stage 2 after the other families' (RepairOverflowing).
        static_estimate.segment_with_parameters = true;
        parameters_family_index_ = static_cast<int32_t>(kept_.size());
        mapped = MapFamily(costs, clusters, static_estimate);
        if (!mapped.ok()) return mapped;
      }
    }
    if (memory_binds_ && options_.memory_oblivious_mapping && !context_.ShouldStop()) {
      MapWithoutMemory(costs, clusters, first_family_options);
    }
    for (const Candidate& c : kept_) Consider(c);
    context_.Report("mapping", 0.2, BestFit());
    RepairOverflowing();
    SerialLastResort();
    Refine();
    FewerHosts();
    if (context_.ShouldStop()) out_.time_limited = true;
    out_.simulated = PartitionResult::SimulatedScore{Best().score.overflow_bytes, Best().score.makespan_ns};
    out_.assignment = std::move(Best().assignment);
    context_.Report("done", 1.0);
    return out_;
  }

 private:
  struct Candidate {
    Assignment assignment;
    PlacementScore score;
    int32_t family = 0;
    // A mapping's simulated schedule of microbatch 0 (start and finish per op), kept for re-timing so
    // that it need not simulate the same assignment again; empty for other candidates.
    std::vector<int64_t> start_ns, finish_ns;
  };

  // A placement that fits within lower_bound_tolerance of the lower bound: no later stage can gain
  // more than that, so the stages that only shorten the step are skipped.
  bool AtLowerBound(const PlacementScore& score) const {
    const double tolerance = batched_ ? options_.batched_lower_bound_tolerance : options_.lower_bound_tolerance;
    return score.Fits() &&
           static_cast<double>(score.makespan_ns) <= (1.0 + tolerance) * static_cast<double>(lower_bound_ns_);
  }
  // The best answer so far of each family (after stage 2 where it ran).
  void Consider(const Candidate& c) {
    if (static_cast<size_t>(c.family) >= best_.size()) best_.resize(c.family + 1);
    std::optional<Candidate>& best = best_[c.family];
    if (!best || c.score.BetterThan(best->score)) best = c;
  }
  Candidate& Best() {
    Candidate* best = nullptr;
    for (std::optional<Candidate>& c : best_) {
      if (c && (best == nullptr || c->score.BetterThan(best->score))) best = &*c;
    }
    return *best;
  }
  int64_t BestFit() {
    const Candidate& best = Best();
    return best.score.Fits() ? best.score.makespan_ns : 0;
  }
  // The family's kept mapping (kept_.back()) becomes `c` when it scores better; what is not kept and
  // overflows is set aside (SetAside).
  bool KeepIfBetter(Candidate c) {
    if (!c.score.BetterThan(kept_.back().score)) {
      SetAside(std::move(c));
      return false;
    }
    std::swap(kept_.back(), c);
    SetAside(std::move(c));
    return true;
  }
  // A mapping that overflows but may be quicker than the kept ones once stage 2 has fixed it.
  void SetAside(Candidate c) {
    if (c.score.Fits()) return;
    c.start_ns = {};  // only a kept mapping is re-timed
    c.finish_ns = {};
    for (const Candidate& other : set_aside_) {
      if (other.assignment == c.assignment) return;
    }
    set_aside_.push_back(std::move(c));
  }
  // A mapping, simulated; `peaks` (when given) receives its per-device memory peaks.
  absl::StatusOr<Candidate> Map(const pardnn::SlicingCosts& costs, const pardnn::LinearClusters& clusters,
                                const pardnn::MappingOptions& options, std::vector<int64_t>* peaks = nullptr) {
    absl::StatusOr<pardnn::ClusterMapping> mapping =
        pardnn::MapClustersToDevices(model_, costs, clusters, options, context_);
    if (!mapping.ok()) return mapping.status();
    out_.time_limited |= mapping->time_limited;
    memory_binds_ |= mapping->memory_timeline;
    work_bound_ |= !mapping->critical_path_bounds_step;
    Candidate c{std::move(mapping->assignment), PlacementScore(), family_, {}, {}};
    const SimResult& r = sim_.Run(c.assignment, sim_options_);
    c.score = ScoreSimulation(model_, r);
    if (options_.retiming_rounds > 0) {
      // Microbatch 0's times (the first num_ops instances) are the one-microbatch schedule's.
      c.start_ns.assign(r.start_ns.begin(), r.start_ns.begin() + model_.num_ops());
      c.finish_ns.assign(r.finish_ns.begin(), r.finish_ns.begin() + model_.num_ops());
    }
    if (peaks != nullptr) *peaks = r.peak_memory_bytes;
    return c;
  }

  // Stage 1 for one family: the calibrated mapping, the other cost model, re-timing, the attach
  // mapping when memory binds; the family's best goes on (kept_.back()).
  absl::Status MapFamily(const pardnn::SlicingCosts& costs, const pardnn::LinearClusters& clusters,
                         const pardnn::MappingOptions& base) {
    family_ = static_cast<int32_t>(kept_.size());
    absl::Status status = MapWithCalibration(costs, clusters, base);
    if (!status.ok()) return status;
    TryTheOtherCostModel(costs, clusters);
    Retime(costs, clusters);
    AddAttachMapping(costs, clusters);
    return absl::OkStatus();
  }

  // The mapping's memory estimate is calibrated against the simulated peaks: a device that overflows
  // gets a proportionally smaller budget in the next mapping.
  absl::Status MapWithCalibration(const pardnn::SlicingCosts& costs,
                                  const pardnn::LinearClusters& clusters,
                                  const pardnn::MappingOptions& base) {
    const int32_t devices = model_.num_devices();
    mapping_options_ = base;
    mapping_options_.capacity_scale.assign(devices, 1.0);
    for (int32_t round = 0; round <= options_.memory_calibration_rounds; ++round) {
      std::vector<int64_t> peaks;
      absl::StatusOr<Candidate> c = Map(costs, clusters, mapping_options_, &peaks);
      if (!c.ok()) return c.status();
      bool changed = false;
      for (DeviceId d = 0; d < devices; ++d) {
        const int64_t peak = peaks[d], capacity = model_.capacity_bytes[d];
        if (peak <= capacity) continue;
        mapping_options_.capacity_scale[d] *=
            options_.calibration_margin * static_cast<double>(capacity) / static_cast<double>(peak);
        changed = true;
      }
      if (round == 0) {
        kept_.push_back(*std::move(c));
      } else {
        KeepIfBetter(*std::move(c));
      }
      if (!changed || context_.ShouldStop()) break;
    }
    return absl::OkStatus();
  }

  // The other transfer/queueing cost model (MappingOptions::slack_aware): slack-aware costs suit graphs
  // whose critical path dominates, plain costs graphs where many near-critical chains share the
  // devices (an unrolled RNN); the simulator decides which mapping goes on. Where the total work
  // bounds the step, slack_aware alone maps with plain costs, so the other model is then the slack
  // costs measured against the critical path (MappingOptions::slack_beyond_critical_bound).
  void TryTheOtherCostModel(const pardnn::SlicingCosts& costs, const pardnn::LinearClusters& clusters) {
    if (!options_.try_both_cost_models || AtLowerBound(kept_.back().score) || context_.ShouldStop()) return;
    pardnn::MappingOptions other = mapping_options_;
    if (options_.slack_costs_where_work_bound && other.slack_aware && work_bound_ &&
        !other.slack_beyond_critical_bound) {
      other.slack_beyond_critical_bound = true;
    } else {
      other.slack_aware = !other.slack_aware;
    }
    absl::StatusOr<Candidate> c = Map(costs, clusters, other);
    if (!c.ok()) return;
    if (KeepIfBetter(*std::move(c))) mapping_options_ = other;
  }

  // Re-timing: map again with the best mapping's simulated schedule as the time axis (its queueing and
  // transfers are then where the spans can see them); kept when it simulates better.
  void Retime(const pardnn::SlicingCosts& costs, const pardnn::LinearClusters& clusters) {
    for (int32_t round = 0; round < options_.retiming_rounds && !context_.ShouldStop(); ++round) {
      if (AtLowerBound(kept_.back().score)) break;
      const Candidate& kept = kept_.back();
      std::vector<int64_t> start_ns = kept.start_ns, finish_ns = kept.finish_ns;
      if (start_ns.empty()) {
        const SimResult& base = sim_.Run(kept.assignment, sim_options_);
        start_ns.assign(base.start_ns.begin(), base.start_ns.begin() + model_.num_ops());
        finish_ns.assign(base.finish_ns.begin(), base.finish_ns.begin() + model_.num_ops());
      }
      pardnn::MappingOptions retimed = mapping_options_;
      retimed.schedule_start_ns = &start_ns;
      retimed.schedule_finish_ns = &finish_ns;
      absl::StatusOr<Candidate> c = Map(costs, clusters, retimed);
      if (!c.ok()) break;
      if (!KeepIfBetter(*std::move(c))) break;
    }
  }

  // Memory-bound graphs: the first family's options with memory out of view (ParDNN's own first
  // stage), a family of its own when it fits (the refinement starts from it too: where a local
  // search ends depends on where it starts). The estimates (static, or per span on the spans' time
  // axis) can be far above the simulated peaks: on GPT-96x256's training step at K = 8 and 0.35 x its
  // one-device peak they chunk the critical path over four devices (40.2 ms after refinement) where
  // the path fits one device (26.5 ms, as with ample memory).
  void MapWithoutMemory(const pardnn::SlicingCosts& costs, const pardnn::LinearClusters& clusters,
                        const pardnn::MappingOptions& base) {
    family_ = static_cast<int32_t>(kept_.size());
    pardnn::MappingOptions oblivious = base;
    oblivious.ignore_memory = true;
    absl::StatusOr<Candidate> c = Map(costs, clusters, oblivious);
    if (c.ok() && c->score.Fits()) kept_.push_back(*std::move(c));
  }

  // Memory-bound graphs: also the mapping that attaches every cluster to the device it talks to most
  // (few cut edges, so few tensors are held twice), with the last calibration; it goes through stage 2
  // beside the family's best.
  void AddAttachMapping(const pardnn::SlicingCosts& costs, const pardnn::LinearClusters& clusters) {
    if (kept_.back().score.Fits() || context_.ShouldStop()) return;
    pardnn::MappingOptions attach = mapping_options_;
    attach.load_weight = 0.0;
    absl::StatusOr<Candidate> c = Map(costs, clusters, attach);
    if (!c.ok()) return;
    attach_.push_back(*std::move(c));
  }

  // Stage 2: memory, for every kept or attach mapping that overflows, and for the quickest few set
  // aside (repair_each.h), retried to the brim when stalled.
  void RepairOverflowing() {
    // The parameters family's mappings come second, with the time the others leave: under a time
    // limit the first families' repairs get the shares they would get without it (on a 20K-op
    // transformer step at K = 2 a repair takes seconds, and the one that fits was theirs).
    RepairFamilies(0, parameters_family_index_, context_);
    // ... and at most half the time then left, so that the refinement keeps the rest.
    RepairFamilies(parameters_family_index_, INT32_MAX, context_.WithShareOfTimeLeft(0.5));
  }
  // Stage 2 for the families in [from, to).
  void RepairFamilies(int32_t from, int32_t to, const SolveContext& context) {
    if (from >= to) return;
    auto in_range = [&](const Candidate& c) { return c.family >= from && c.family < to; };
    RepairEachOptions each;
    each.repair = options_.repair;
    each.repair.progress_from = 0.2;
    each.repair.progress_to = 0.4;
    each.retry_to_the_brim = true;
    each.skip_duplicates = true;
    std::vector<const Candidate*> pool;
    for (const Candidate& c : kept_) {
      if (in_range(c)) pool.push_back(&c);
    }
    for (const Candidate& c : attach_) {
      if (in_range(c)) pool.push_back(&c);
    }
    // The mappings that lost to a kept one only by their overflow and simulate quicker than every kept
    // mapping that fits: a small overflow often costs the memory stage far less than the detour the
    // calibration took to avoid it.
    int64_t fitting = INT64_MAX;
    for (const Candidate& c : kept_) {
      if (in_range(c) && c.score.Fits()) fitting = std::min(fitting, c.score.makespan_ns);
    }
    std::vector<const Candidate*> quicker;
    for (const Candidate& c : set_aside_) {
      if (in_range(c) && c.score.makespan_ns < fitting) quicker.push_back(&c);
    }
    std::stable_sort(quicker.begin(), quicker.end(), [](const Candidate* a, const Candidate* b) {
      return a->score.makespan_ns < b->score.makespan_ns;
    });
    if (quicker.size() > static_cast<size_t>(options_.max_repaired_alternatives)) {
      quicker.resize(options_.max_repaired_alternatives);
    }
    pool.insert(pool.end(), quicker.begin(), quicker.end());
    std::vector<ScoredCandidate> table;
    for (const Candidate* c : pool) table.push_back({&c->assignment, c->score});
    RepairEachResult repaired = RepairEachOverflowing(model_, context, each, table);
    out_.time_limited |= repaired.time_limited;
    for (RepairedCandidate& r : repaired.candidates) {
      Consider(Candidate{std::move(r.assignment), r.score, pool[r.index]->family, {}, {}});
    }
    for (const Candidate& c : attach_) {
      if (in_range(c) && c.score.Fits()) Consider(c);
    }
  }

  // Last resort when no mapping fits after stage 2: ParDNN for a single device (one cluster: the whole
  // graph on the fastest device, serial, so the fewest tensors are live at once), spread by the memory
  // stage. Serial placements hold the least activation memory; the memory stage then moves whole
  // colocation units off it, cheapest first, until every device fits.
  void SerialLastResort() {
    if (Best().score.Fits() || model_.num_devices() <= 1 || context_.ShouldStop()) return;
    RepairOptions to_the_brim = options_.repair;
    to_the_brim.progress_from = 0.2;
    to_the_brim.progress_to = 0.4;
    to_the_brim.target_fill = 1.0;
    to_the_brim.max_stalled_rounds = std::max(to_the_brim.max_stalled_rounds, 30);
    Candidate serial{SingleDeviceAssignment(model_), PlacementScore(), 0, {}, {}};
    const RepairOutcome outcome = RepairMemory(model_, context_, to_the_brim, serial.assignment);
    out_.time_limited |= outcome.time_limited;
    serial.score = PlacementScore{outcome.overflow_bytes, outcome.makespan_ns};
    // Into the family whose best it beats (it is the answer only when it is better than all).
    Candidate& best = Best();
    serial.family = best.family;
    Consider(serial);
  }

  // Stage 3: refinement, critical-path local search from each family's best (equal shares of the
  // budget); the best result is the answer. Its budget counts the unrolled step.
  void Refine() {
    pardnn::RefinementOptions refinement;
    const int64_t copies = std::max(1, model_.plan.microbatches);
    refinement.max_simulations =
        PardnnRefinementBudget(options_, model_.num_ops() * copies, model_.num_edges() * copies);
    if (batched_) {
      refinement.batch_moves = options_.refinement_batch_moves;
    } else if (model_.num_devices() >= 3 && !sim_options_.compute_memory) {
      refinement.batch_moves = options_.small_graph_batch_moves;
    }
    // Only where memory cannot bind: there a chain moved whole takes its activations along, and on the
    // tight corpora branch moves shortened as many steps as they lengthened (pardnn README, version 9).
    refinement.branch_moves = options_.branch_moves && !sim_options_.compute_memory;
    refinement.memory_can_bind = sim_options_.compute_memory;
    refinement.progress_from = 0.4;
    refinement.progress_to = 1.0;
    if (refinement.max_simulations <= 0 || model_.num_devices() <= 1 || context_.ShouldStop()) return;
    // Starting points: the best, and each other family's best that is as feasible as it.
    const bool fits = Best().score.Fits();
    std::vector<Candidate*> starts;
    for (std::optional<Candidate>& c : best_) {
      if (!c || c->score.Fits() != fits || AtLowerBound(c->score)) continue;
      bool duplicate = false;
      for (const Candidate* other : starts) duplicate |= other->assignment == c->assignment;
      if (!duplicate) starts.push_back(&*c);
    }
    if (starts.empty() || AtLowerBound(Best().score)) return;
    if (options_.refine_each_family_fully < static_cast<int32_t>(starts.size())) {
      refinement.max_simulations /= static_cast<int64_t>(starts.size());
    }
    // Where memory binds, each start's work balance (work_balance.h) is a start of its own, refined
    // after the others (where a local search ends depends on where it starts: from a balanced start it
    // may end above the unbalanced start's end, GPT-12x768 K = 2 at 0.45 x peak 27.5 against 26.4 ms),
    // and kept unrefined when no time is left.
    std::vector<Candidate> balanced;
    if (options_.balance_work && memory_binds_) {
      pardnn::WorkBalanceOptions balance = options_.work_balance;
      balance.memory_can_bind = sim_options_.compute_memory;
      balance.max_simulations = std::min(balance.max_simulations, refinement.max_simulations / 4);
      for (const Candidate* c : starts) {
        if (balance.max_simulations < 2 || context_.ShouldStop()) break;
        Candidate copy{c->assignment, c->score, c->family, {}, {}};
        const pardnn::WorkBalanceResult b =
            pardnn::BalanceWork(model_, balance, context_, sim_, copy.assignment);
        out_.time_limited |= b.time_limited;
        copy.score = PlacementScore{b.overflow_bytes, b.makespan_ns};
        if (copy.score.BetterThan(c->score)) balanced.push_back(std::move(copy));
      }
    }
    for (Candidate* c : starts) {
      if (context_.ShouldStop()) break;
      const pardnn::RefinementResult r =
          pardnn::RefineAlongCriticalPath(model_, refinement, context_, sim_, c->assignment);
      out_.time_limited |= r.time_limited;
      c->score = PlacementScore{r.overflow_bytes, r.makespan_ns};
    }
    for (Candidate& c : balanced) {
      // Refined only when it is already better than its family's refined best: from a worse start
      // the search has ended no better on the tight-memory corpus, and it doubled some solves.
      const std::optional<Candidate>& family_best = best_[c.family];
      const bool promising = !family_best || c.score.BetterThan(family_best->score);
      if (promising && !context_.ShouldStop()) {
        const pardnn::RefinementResult r =
            pardnn::RefineAlongCriticalPath(model_, refinement, context_, sim_, c.assignment);
        out_.time_limited |= r.time_limited;
        c.score = PlacementScore{r.overflow_bytes, r.makespan_ns};
      }
      Consider(c);
    }
  }

  // PardnnOptions::fewer_hosts_family: pardnn on the devices of the fewest hosts that hold the step,
  // its answer a family of its own on the whole cluster.
  void FewerHosts() {
    // Not on the large graphs that refine in batches: a second whole run would double their time.
    if (!options_.fewer_hosts_family || !memory_binds_ || batched_ || model_.node_name.size() < 2 ||
        model_.has_previous_placement() || model_.plan.data_parallel > 1 || context_.ShouldStop() ||
        AtLowerBound(Best().score)) {
      return;
    }
    // The step's peak on one device (the fastest, where pins allow: the largest device peak).
    SimOptions with_memory;
    with_memory.compute_memory = true;
    const std::vector<int64_t>& peaks =
        sim_.Run(SingleDeviceAssignment(model_), with_memory).peak_memory_bytes;
    const int64_t one_device_peak = *std::max_element(peaks.begin(), peaks.end());
    const std::vector<DeviceId> devices =
        FewerHostsDevices(model_, options_.fewer_hosts_peak_factor * static_cast<double>(one_device_peak));
    if (devices.empty()) return;
    const Model sub = DeviceSubsetModel(model_, devices);
    PardnnOptions nested = options_;
    nested.fewer_hosts_family = false;
    SolveContext rest = context_;
    rest.on_progress = nullptr;
    absl::StatusOr<PartitionResult> r = PardnnRun(nested, sub, rest).Run();
    out_.time_limited |= context_.ShouldStop() || (r.ok() && r->time_limited);
    if (!r.ok() || r->assignment.size() != static_cast<size_t>(model_.num_ops())) return;
    Candidate c{std::move(r->assignment), PlacementScore(), static_cast<int32_t>(best_.size()), {}, {}};
    for (DeviceId& d : c.assignment) d = devices[d];
    c.score = ScoreSimulation(model_, sim_.Run(c.assignment, sim_options_));
    Consider(c);
  }

  const PardnnOptions& options_;
  const Model& model_;
  const SolveContext& context_;
  Simulator sim_;
  // Large graphs: the refinement moves in batches (RefinementOptions::batch_moves).
  const bool batched_;
  const int64_t lower_bound_ns_;
  // Memory bookkeeping only where some assignment could overflow (MemoryCanBind).
  SimOptions sim_options_;
  PartitionResult out_;
  pardnn::MappingOptions mapping_options_;  // the current family's best options
  int32_t family_ = 0;
  // The parameters family's index (MapFamily with segment_with_parameters), when it ran.
  int32_t parameters_family_index_ = INT32_MAX;
  // The mapping saw memory that can bind (ClusterMapping::memory_timeline).
  bool memory_binds_ = false;
  // The total work, not the critical path, bounds the step (ClusterMapping::critical_path_bounds_step):
  // slack_aware alone then maps with plain costs.
  bool work_bound_ = false;
  // Per family: its best mapping (stage 1), its attach mapping when memory binds.
  std::vector<Candidate> kept_;
  std::vector<Candidate> attach_;
  // Mappings that overflow and were not kept.
  std::vector<Candidate> set_aside_;
  // Per family: its best answer so far.
  std::vector<std::optional<Candidate>> best_;
};

absl::StatusOr<PartitionResult> PardnnPartitioner::Partition(const Model& model,
                                                             const SolveContext& context) const {
  if (options_.decline_when_memory_can_bind && MemoryCanBind(model)) {
    return absl::FailedPreconditionError(
        "pardnn (decline_when_memory_can_bind): memory can bind on this step; no answer");
  }
  return PardnnRun(options_, model, context).Run();
}

}  // namespace

int64_t PardnnRefinementBudget(const PardnnOptions& options, int64_t num_ops, int64_t num_edges) {
  if (options.refinement_max_simulations <= 0) return 0;
  const int64_t size = std::max<int64_t>(1, num_ops + num_edges);
  const int64_t by_work = options.refinement_min_work / size;
  return pardnn::SimulationBudget(options.refinement_scale, options.refinement_exponent, size,
                                  std::min(by_work, options.refinement_max_simulations),
                                  options.refinement_max_simulations);
}

std::unique_ptr<Partitioner> MakePardnnPartitioner() {
  return std::make_unique<PardnnPartitioner>(PardnnOptions());
}

std::unique_ptr<Partitioner> MakePardnnPartitioner(const PardnnOptions& options) {
  return std::make_unique<PardnnPartitioner>(options);
}

}  // namespace placement::engine
