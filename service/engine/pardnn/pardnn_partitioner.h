// pardnn_partitioner.h — "pardnn": ParDNN (arXiv 2008.08636) done right (../shared/docs/design.md), as
// a Partitioner — ParDNN's own stages only. The default algorithm is `auto` (../portfolio/), which runs
// this one first and the baselines after it.
//
// Stages (each in its own file, see README.md):
//   1. slicing        linear_clustering.h   K primaries along the heaviest paths, then secondary chains
//   2. mapping        cluster_mapping.h     clusters onto devices with per-span loads (Fenwick trees)
//                                           and communication; constraints honoured while mapping
//   3. memory         repair/memory_repair.h  moves off overflowing devices using the simulator's
//                                           memory timeline
//   4. refinement     refinement.h          critical-path local search judged by the simulator
// The mapping's memory estimate is calibrated against the simulated peaks (re-mapping with smaller
// budgets where a device overflowed); when memory is tight a communication-only "attach" mapping is
// tried as well; every mapping that overflows goes through stage 2; the best is refined. Nothing else
// seeds it: no baseline's answer and no list schedule (the `auto` portfolio, portfolio/portfolio.h, is
// where other methods meet). The result carries CCR and DoP; progress is reported per stage; the
// deadline and cancellation are checked at loop boundaries and the best answer so far is returned.
// Budgets scale with the graph (see PardnnOptions).
//
// The decisions that matter most for quality (measured effects: bench/README.md):
//   * The spans' time axis is compute-only (MappingOptions::span_comm_weight = 0). The reference measures
//     spans on levels that charge every edge between clusters in full; on communication-heavy graphs that
//     stretches the axis by transfers that vanish once clusters share a device, every window looks empty,
//     nothing seems to queue, and the critical path's device gets far more than its share of the work.
//   * Both transfer/queueing cost models (MappingOptions::slack_aware) are mapped and the simulator keeps
//     the better one; then re-timing maps again on the best mapping's simulated schedule (queueing and
//     transfers included) while that simulates better (retiming_rounds).
//   * Memory: the mapping's estimate is calibrated against simulated peaks (memory_calibration_rounds); an
//     "attach" mapping (few cut edges) is added when memory is tight; every mapping that overflows goes
//     through stage 2, which goes on filling targets to the brim when its usual margin stalls; last
//     resort, the single-device placement (partition/simple_partitioners.h) spread by stage 2.
//   * Graphs of more than refinement_max_ops ops get one cost model, the calibration and the memory stage
//     only: no second cost model, no re-timing, no refinement.
// Progress stages: "slicing" (0) -> "mapping" (0.1-0.2) -> "memory" (0.2-0.4) -> "refinement" (0.4-1.0)
// -> "done". Deterministic for a model and seed (ties by op id; the only randomness is the seeded kick of
// the refinement).
//
// Example:
//   std::unique_ptr<Partitioner> pardnn = MakePardnnPartitioner();
//   absl::StatusOr<PartitionResult> result = pardnn->Partition(model, context);
#ifndef PLACEMENT_SERVICE_ENGINE_PARDNN_PARDNN_PARTITIONER_H_
#define PLACEMENT_SERVICE_ENGINE_PARDNN_PARDNN_PARTITIONER_H_

#include <cstdint>
#include <memory>

#include "service/engine/pardnn/cluster_mapping.h"
#include "service/engine/pardnn/refinement.h"
#include "service/engine/partition/partitioner.h"
#include "service/engine/repair/memory_repair.h"

namespace placement::engine {

struct PardnnOptions {
  pardnn::MappingOptions mapping;
  // Re-mappings with memory budgets calibrated against the simulated peaks of the previous mapping
  // (budget x= margin x capacity / peak on each overflowing device); the best mapping is kept.
  int32_t memory_calibration_rounds = 3;
  double calibration_margin = 0.97;
  // Also map with the other cost model (MappingOptions::slack_aware flipped) and keep the mapping that
  // simulates better (one more mapping and simulation).
  bool try_both_cost_models = true;
  // Re-mappings with the best mapping's simulated schedule as the spans' time axis (each costs one
  // mapping and one simulation; stops at the first that does not improve).
  int32_t retiming_rounds = 2;
  RepairOptions repair;
  // Refinement budget in simulations: floor(refinement_scale * (1e4 / (V + E))^refinement_exponent),
  // clamped to [0, refinement_max_simulations]. It shrinks faster than the graph grows: ~700
  // simulations at 6K ops (16K ops + edges), ~20 at 30K ops.
  // refinement_max_simulations = 0 turns refinement off.
  double refinement_scale = 2000.0;
  double refinement_exponent = 2.2;
  int64_t refinement_max_simulations = 4000;
  // Both cost models, re-timing and refinement only on graphs of at most this many ops: larger ones get
  // the plain cost model, the calibration and the memory stage, a few simulations' time in all (~1/50
  // of the published code's whole run).
  int64_t refinement_max_ops = 40'000;
};

std::unique_ptr<Partitioner> MakePardnnPartitioner();
std::unique_ptr<Partitioner> MakePardnnPartitioner(const PardnnOptions& options);

// The refinement budget the options give for a graph of this size.
int64_t PardnnRefinementBudget(const PardnnOptions& options, int64_t num_ops, int64_t num_edges);

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_PARDNN_PARDNN_PARTITIONER_H_
