// pardnn_partitioner.h — the product's default algorithm, "pardnn": ParDNN (arXiv 2008.08636) done
// right (../shared/docs/design.md), as a Partitioner.
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
// tried as well; reference points (earliest-finish list schedules in ETF and HEFT order, everything on
// the fastest device, and the answers of the m_etf, heft, m_topo and pipeline baselines and the METIS
// cut) are simulated beside it when the budget affords them, so the answer is never worse than those. Every seed that overflows goes through stage 2; the best is refined. The result carries CCR
// and DoP; progress is reported per stage; the deadline and cancellation are checked at loop boundaries
// and the best answer so far is returned. Budgets scale with the graph (see PardnnOptions): thousands of
// simulations for small graphs, none above ~100K ops (stage 1 + one simulation, ~6x a simulation).
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
  RepairOptions repair;
  // Refinement budget in simulations: floor(refinement_scale * (1e4 / (V + E))^refinement_exponent),
  // clamped to [0, refinement_max_simulations]. It shrinks faster than linearly with the graph: small
  // graphs (thousands of ops) get thousands of simulations, 25K ops about ten, 100K ops none, so the
  // total stays within a few simulations' time on huge graphs. refinement_max_simulations = 0 turns
  // refinement off.
  double refinement_scale = 2000.0;
  double refinement_exponent = 2.2;
  int64_t refinement_max_simulations = 4000;
  // Reference points simulated next to the ParDNN mapping: the ETF-order list schedule whenever the
  // refinement budget is at least one simulation; the HEFT-order one and everything-on-the-fastest-
  // device too when it is at least this many (graphs small enough that two more simulations do not
  // matter).
  int64_t reference_points_min_budget = 8;
  // Also seed from the baselines' answers whenever the refinement budget is at least one simulation:
  // m_topo and the METIS cut (cheap) always, m_etf, heft and pipeline too from
  // reference_points_min_budget on or when the ParDNN mapping overflows memory (below that budget and
  // with memory to spare, near 100K ops, they would cost more than pardnn itself).
  // Off = ParDNN's own mapping and list schedules only.
  bool baseline_seeds = true;
};

std::unique_ptr<Partitioner> MakePardnnPartitioner();
std::unique_ptr<Partitioner> MakePardnnPartitioner(const PardnnOptions& options);

// The refinement budget the options give for a graph of this size.
int64_t PardnnRefinementBudget(const PardnnOptions& options, int64_t num_ops, int64_t num_edges);

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_PARDNN_PARDNN_PARTITIONER_H_
