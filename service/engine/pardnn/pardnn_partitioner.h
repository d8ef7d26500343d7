// pardnn_partitioner.h — the product's default algorithm, "pardnn": ParDNN (arXiv 2008.08636) done
// right (docs/design.md), as a Partitioner.
//
// Stages (each in its own file, see README.md):
//   1. slicing        linear_clustering.h   K primaries along the heaviest paths, then secondary chains
//   2. mapping        cluster_mapping.h     clusters onto devices with per-span loads (Fenwick trees)
//                                           and communication; constraints honoured while mapping
//   3. memory         repair/memory_repair.h  moves off overflowing devices using the simulator's
//                                           memory timeline
//   4. refinement     refinement.h          critical-path local search judged by the simulator
// Reference points are simulated next to the ParDNN mapping (everything on the fastest device, a greedy
// earliest-finish list schedule), so the answer is never worse than those; the best, after memory repair,
// is refined. The result carries CCR and DoP; progress is reported per stage; the deadline and
// cancellation are checked at loop boundaries and the best answer so far is returned.
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
  RepairOptions repair;
  // Refinement budget in simulations: round(refinement_scale * (1e4 / (V + E))^refinement_exponent),
  // clamped to [refinement_min_simulations, refinement_max_simulations]. It shrinks faster than
  // linearly with the graph so that the total stays near a few stage-1 times on huge graphs while small
  // graphs get thousands of tries. refinement_max_simulations = 0 turns refinement off.
  double refinement_scale = 2000.0;
  double refinement_exponent = 1.7;
  int64_t refinement_min_simulations = 2;
  int64_t refinement_max_simulations = 4000;
  // Simulate the reference points (single device, list schedule) and keep the best.
  bool compare_reference_points = true;
};

std::unique_ptr<Partitioner> MakePardnnPartitioner();
std::unique_ptr<Partitioner> MakePardnnPartitioner(const PardnnOptions& options);

// The refinement budget the options give for a graph of this size.
int64_t PardnnRefinementBudget(const PardnnOptions& options, int64_t num_ops, int64_t num_edges);

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_PARDNN_PARDNN_PARTITIONER_H_
