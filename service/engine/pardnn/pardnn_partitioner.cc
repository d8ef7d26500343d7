#include "service/engine/pardnn/pardnn_partitioner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "service/engine/baselines/heft.h"
#include "service/engine/baselines/m_etf.h"
#include "service/engine/baselines/m_topo.h"
#include "service/engine/baselines/metis.h"
#include "service/engine/baselines/pipeline.h"
#include "service/engine/pardnn/cluster_mapping.h"
#include "service/engine/pardnn/linear_clustering.h"
#include "service/engine/pardnn/list_schedule_seed.h"
#include "service/engine/pardnn/refinement.h"
#include "service/engine/partition/placement_rules.h"
#include "service/engine/repair/memory_repair.h"
#include "service/engine/sim/simulator.h"

namespace placement::engine {
namespace {

// PLACEMENT_PARDNN_DEBUG=1 traces the stages on stderr (development aid).
bool DebugEnabled() {
  static const bool enabled = std::getenv("PLACEMENT_PARDNN_DEBUG") != nullptr;
  return enabled;
}

struct Score {
  int64_t overflow = INT64_MAX;
  int64_t makespan = INT64_MAX;
  bool Better(const Score& other) const {
    return overflow != other.overflow ? overflow < other.overflow : makespan < other.makespan;
  }
};

class PardnnPartitioner final : public Partitioner {
 public:
  explicit PardnnPartitioner(const PardnnOptions& options) : options_(options) {}

  std::string_view name() const override { return "pardnn"; }
  std::string_view version() const override { return "2"; }
  std::string_view description() const override {
    return "ParDNN: critical-path slicing into linear clusters, span/communication-aware mapping "
           "(Fenwick trees), memory repair on the simulated timeline, critical-path refinement.";
  }
  absl::StatusOr<PartitionResult> Partition(const Model& model,
                                            const SolveContext& context) const override;

 private:
  PardnnOptions options_;
};

// Every op on a real device (a baseline that gives up may leave ops unplaced).
bool CompleteAssignment(const Model& model, const Assignment& assignment) {
  if (assignment.size() != static_cast<size_t>(model.num_ops())) return false;
  for (DeviceId d : assignment) {
    if (d < 0 || d >= model.num_devices()) return false;
  }
  return true;
}

Score Simulate(const Model& model, Simulator& sim, const Assignment& assignment) {
  SimOptions sim_options;
  sim_options.compute_memory = true;
  const SimResult& r = sim.Run(assignment, sim_options);
  Score s;
  s.makespan = r.makespan_ns;
  s.overflow = 0;
  for (DeviceId d = 0; d < model.num_devices(); ++d) {
    s.overflow += std::max<int64_t>(0, r.peak_memory_bytes[d] - model.capacity_bytes[d]);
  }
  return s;
}

Assignment FastestDeviceSeed(const Model& model, const PlacementRules& rules) {
  DeviceId best = 0;
  for (DeviceId d = 1; d < model.num_devices(); ++d) {
    if (model.speed[d] > model.speed[best] ||
        (model.speed[d] == model.speed[best] && model.capacity_bytes[d] > model.capacity_bytes[best])) {
      best = d;
    }
  }
  Assignment a(model.num_ops(), best);
  rules.Enforce(a);
  return a;
}

Assignment RoundRobinSeed(const Model& model, const PlacementRules& rules) {
  Assignment a(model.num_ops(), 0);
  for (size_t k = 0; k < model.topo_order.size(); ++k) {
    a[model.topo_order[k]] = static_cast<DeviceId>(k % model.num_devices());
  }
  rules.Enforce(a);
  return a;
}

absl::StatusOr<PartitionResult> PardnnPartitioner::Partition(const Model& model,
                                                             const SolveContext& context) const {
  PartitionResult out;
  const int32_t n = model.num_ops();
  if (n == 0) return out;
  const int32_t devices = model.num_devices();
  Simulator sim(model);
  PlacementRules rules(model);

  // ---- Stage 1: slicing and mapping ----
  const absl::Time start_time = absl::Now();
  auto trace = [&](const char* what) {
    if (DebugEnabled()) {
      std::fprintf(stderr, "pardnn %.3f s: %s\n", absl::ToDoubleSeconds(absl::Now() - start_time),
                   what);
    }
  };
  context.Report("slicing", 0.0);
  const pardnn::SlicingCosts costs = pardnn::ComputeSlicingCosts(model);
  trace("costs");
  const pardnn::LinearClusters clusters = pardnn::SliceIntoLinearClusters(model, costs, devices);
  trace("sliced");
  out.ccr = clusters.ccr;
  out.dop = clusters.dop;
  context.Report("mapping", 0.1);
  // The mapping's memory estimate (persistent + half the outputs) is calibrated against the simulated
  // peaks: a device that overflows gets a proportionally smaller budget in the next mapping.
  pardnn::MappingOptions mapping_options = options_.mapping;
  mapping_options.capacity_scale.assign(devices, 1.0);
  Assignment mapped;
  Score mapped_score;
  for (int32_t round = 0; round <= options_.memory_calibration_rounds; ++round) {
    absl::StatusOr<pardnn::ClusterMapping> mapping =
        pardnn::MapClustersToDevices(model, costs, clusters, mapping_options, context);
    if (!mapping.ok()) return mapping.status();
    out.time_limited |= mapping->time_limited;
    trace("mapped");
    const SimResult& r = sim.Run(mapping->assignment);
    trace("simulated");
    Score s;
    s.makespan = r.makespan_ns;
    s.overflow = 0;
    bool changed = false;
    for (DeviceId d = 0; d < devices; ++d) {
      const int64_t peak = r.peak_memory_bytes[d], capacity = model.capacity_bytes[d];
      if (peak <= capacity) continue;
      s.overflow += peak - capacity;
      mapping_options.capacity_scale[d] *=
          options_.calibration_margin * static_cast<double>(capacity) / static_cast<double>(peak);
      changed = true;
    }
    if (DebugEnabled()) {
      std::fprintf(stderr, "pardnn mapping %d: overflow %lld makespan %lld\n", round,
                   static_cast<long long>(s.overflow), static_cast<long long>(s.makespan));
    }
    if (mapped.empty() || s.Better(mapped_score)) {
      mapped = std::move(mapping->assignment);
      mapped_score = s;
    }
    if (!changed || context.ShouldStop()) break;
  }

  // Seeds: the ParDNN mapping first; reference points beside it.
  std::vector<Assignment> seeds;
  std::vector<Score> known_scores;  // of the first seeds, already simulated
  seeds.push_back(std::move(mapped));
  known_scores.push_back(mapped_score);
  // Memory-bound graphs: also the mapping that attaches every cluster to the device it talks to most
  // (few cut edges, so few tensors are held twice), with the last calibration.
  if (mapped_score.overflow > 0 && !context.ShouldStop()) {
    pardnn::MappingOptions attach = mapping_options;
    attach.load_weight = 0.0;
    absl::StatusOr<pardnn::ClusterMapping> mapping =
        pardnn::MapClustersToDevices(model, costs, clusters, attach, context);
    if (mapping.ok()) {
      const Score s = Simulate(model, sim, mapping->assignment);
      if (DebugEnabled()) {
        std::fprintf(stderr, "pardnn attach mapping: overflow %lld makespan %lld\n",
                     static_cast<long long>(s.overflow), static_cast<long long>(s.makespan));
      }
      seeds.push_back(std::move(mapping->assignment));
      known_scores.push_back(s);
    }
  }
  const int64_t refinement_budget = PardnnRefinementBudget(options_, n, model.num_edges());
  int32_t fastest_seed_index = -1;
  // Reference points, when the budget affords them: the ETF-order list schedule as soon as one
  // refinement simulation is affordable, the HEFT-order one and the fastest device from a few.
  if (refinement_budget >= 1) {
    seeds.push_back(pardnn::EarliestFinishSeed(model, costs, pardnn::SeedOrder::kReadyTime));
  }
  // The published baselines' answers as further reference points (their progress is not reported:
  // it would jump back and forth inside ours). They are cheap next to the refinement on graphs this
  // size, and the memory-aware ones are what tight memory favours: with them stage 2 and the
  // refinement start from the best of every method, so pardnn is never behind a baseline it ran.
  if (options_.baseline_seeds && refinement_budget >= 1) {
    SolveContext quiet = context;
    quiet.on_progress = nullptr;
    // Near the size where refinement stops (budget below reference_points_min_budget, ~100K ops) and
    // with memory to spare, only the cheap ones (m_topo and the METIS cut, tens of milliseconds) run:
    // the list schedulers cost a few tenths of a second there, more than the rest of pardnn, for a
    // percent at most. When the mapping overflows, stage 2 dominates anyway and a memory-aware list
    // schedule is often the seed that fits, so they run whatever the size.
    std::vector<std::unique_ptr<Partitioner>> baselines;
    if (refinement_budget >= options_.reference_points_min_budget || mapped_score.overflow > 0) {
      baselines.push_back(MakeMEtfPartitioner());
      baselines.push_back(MakeHeftPartitioner());
      baselines.push_back(MakePipelinePartitioner());
    }
    baselines.push_back(MakeMTopoPartitioner());
    for (const std::unique_ptr<Partitioner>& baseline : baselines) {
      if (context.ShouldStop()) break;
      absl::StatusOr<PartitionResult> r = baseline->Partition(model, quiet);
      if (r.ok() && CompleteAssignment(model, r->assignment)) seeds.push_back(std::move(r->assignment));
    }
    if (!context.ShouldStop()) {
      absl::StatusOr<PartitionResult> cut = baselines::MetisCut(model, quiet);
      if (cut.ok() && CompleteAssignment(model, cut->assignment)) {
        seeds.push_back(std::move(cut->assignment));
      }
    }
  }
  if (refinement_budget >= options_.reference_points_min_budget) {
    seeds.push_back(pardnn::EarliestFinishSeed(model, costs, pardnn::SeedOrder::kRank));
    fastest_seed_index = static_cast<int32_t>(seeds.size());
    seeds.push_back(FastestDeviceSeed(model, rules));
  }
  std::vector<Score> scores;
  Assignment best;
  Score best_score;
  auto consider = [&](const Assignment& a, const Score& s) {
    if (best.empty() || s.Better(best_score)) {
      best = a;
      best_score = s;
    }
  };
  for (const Assignment& seed : seeds) {
    scores.push_back(scores.size() < known_scores.size() ? known_scores[scores.size()]
                                                         : Simulate(model, sim, seed));
    consider(seed, scores.back());
    if (DebugEnabled()) {
      std::fprintf(stderr, "pardnn seed %zu: overflow %lld makespan %lld\n", scores.size() - 1,
                   static_cast<long long>(scores.back().overflow),
                   static_cast<long long>(scores.back().makespan));
    }
  }
  context.Report("mapping", 0.2, best_score.overflow == 0 ? best_score.makespan : 0);

  // ---- Stage 2: memory, for the seeds that overflow (the ParDNN mapping and the list schedule),
  // whether or not another seed already fits: a repaired seed is often the better answer. ----
  RepairOptions repair = options_.repair;
  repair.progress_from = 0.2;
  repair.progress_to = 0.4;
  {
    // Every seed but the fastest device alone (the last resort below).
    const size_t repairable = seeds.size() - (fastest_seed_index >= 0 ? 1 : 0);
    std::vector<size_t> to_repair;
    for (size_t i = 0; i < repairable; ++i) {
      if (scores[i].overflow == 0) continue;
      bool duplicate = false;  // e.g. the two list schedules often agree
      for (size_t j = 0; j < i && !duplicate; ++j) duplicate = seeds[j] == seeds[i];
      if (!duplicate) to_repair.push_back(i);
    }
    // Least overflow first (the likeliest to fit soon), and each repair gets an equal share of the
    // time left, so one slow repair cannot starve the seeds after it (unused time flows on).
    std::stable_sort(to_repair.begin(), to_repair.end(),
                     [&](size_t a, size_t b) { return scores[a].overflow < scores[b].overflow; });
    for (size_t k = 0; k < to_repair.size() && !context.ShouldStop(); ++k) {
      const size_t i = to_repair[k];
      SolveContext slice = context;
      if (context.deadline != absl::InfiniteFuture()) {
        const absl::Time now = context.Now();
        slice.deadline = std::min(
            context.deadline,
            now + (context.deadline - now) / static_cast<int64_t>(to_repair.size() - k));
      }
      Assignment a = seeds[i];
      const RepairOutcome outcome = RepairMemory(model, slice, repair, a);
      out.time_limited |= outcome.time_limited;
      consider(a, Score{outcome.overflow_bytes, outcome.makespan_ns});
      if (DebugEnabled()) {
        std::fprintf(stderr, "pardnn repaired seed %zu: overflow %lld makespan %lld rounds %d\n", i,
                     static_cast<long long>(outcome.overflow_bytes),
                     static_cast<long long>(outcome.makespan_ns), outcome.rounds);
      }
    }
    // Last resorts when nothing fits yet: spread by memory from the trivial placements.
    if (best_score.overflow > 0) {
      Assignment fallbacks[2] = {fastest_seed_index >= 0 ? seeds[fastest_seed_index]
                                                         : FastestDeviceSeed(model, rules),
                                 RoundRobinSeed(model, rules)};
      for (Assignment& a : fallbacks) {
        if (context.ShouldStop() || best_score.overflow == 0) break;
        const RepairOutcome outcome = RepairMemory(model, context, repair, a);
        out.time_limited |= outcome.time_limited;
        consider(a, Score{outcome.overflow_bytes, outcome.makespan_ns});
      }
    }
  }

  trace("seeds and memory");
  // ---- Refinement: critical-path local search on the best ----
  pardnn::RefinementOptions refinement;
  refinement.max_simulations = refinement_budget;
  refinement.progress_from = 0.4;
  refinement.progress_to = 1.0;
  if (refinement.max_simulations > 0 && devices > 1 && !context.ShouldStop()) {
    const pardnn::RefinementResult r =
        pardnn::RefineAlongCriticalPath(model, refinement, context, sim, best);
    out.time_limited |= r.time_limited;
    if (DebugEnabled()) {
      std::fprintf(stderr,
                   "pardnn refined: overflow %lld makespan %lld (%lld sims of %lld, %lld moves%s)\n",
                   static_cast<long long>(r.overflow_bytes), static_cast<long long>(r.makespan_ns),
                   static_cast<long long>(r.simulations),
                   static_cast<long long>(refinement.max_simulations),
                   static_cast<long long>(r.moves), r.local_optimum ? ", local optimum" : "");
    }
  }
  trace("refined");
  if (context.ShouldStop()) out.time_limited = true;
  out.assignment = std::move(best);
  context.Report("done", 1.0);
  return out;
}

}  // namespace

int64_t PardnnRefinementBudget(const PardnnOptions& options, int64_t num_ops, int64_t num_edges) {
  if (options.refinement_max_simulations <= 0) return 0;
  const double size = static_cast<double>(std::max<int64_t>(1, num_ops + num_edges));
  const double sims =
      options.refinement_scale * std::pow(1e4 / size, options.refinement_exponent);
  return std::clamp<int64_t>(static_cast<int64_t>(std::min(sims, 1e12)), 0,
                             options.refinement_max_simulations);
}

std::unique_ptr<Partitioner> MakePardnnPartitioner() {
  return std::make_unique<PardnnPartitioner>(PardnnOptions());
}

std::unique_ptr<Partitioner> MakePardnnPartitioner(const PardnnOptions& options) {
  return std::make_unique<PardnnPartitioner>(options);
}

}  // namespace placement::engine
