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
//     the better one (where the work bounds the step, the slack model measures slack against the
//     critical path: slack_costs_where_work_bound); then re-timing maps again on the best mapping's
//     simulated schedule (queueing and transfers included) while that simulates better
//     (retiming_rounds).
//   * Memory: the mapping's estimate is calibrated against simulated peaks (memory_calibration_rounds); an
//     "attach" mapping (few cut edges) is added when memory is tight; every mapping that overflows goes
//     through stage 2, which goes on filling targets to the brim when its usual margin stalls; last
//     resort, the single-device placement (partition/simple_partitioners.h) spread by stage 2. When
//     memory binds, three families of mappings compete (pardnn_partitioner.cc), the third made of
//     contiguous critical-path pieces that carry their parameters (segment_with_parameters), and a
//     fourth when it fits: the mapping with memory out of view (memory_oblivious_mapping), as ParDNN
//     itself maps before its memory stage, for where the estimates are pessimistic. Where memory binds,
//     each refinement start's work balance (work_balance.h: compute-dense, memory-light units moved in
//     batches from the busiest device to the least busy while the busiest bounds the step) is a start
//     of its own (balance_work); on a cluster of several hosts, pardnn on the fewest hosts that hold
//     the step competes too (fewer_hosts_family).
//   * Every graph gets every stage; large ones refine in batches of moves per simulation, with a budget
//     that has a floor in simulated work (refinement_min_work, batch_refinement_min_ops). Where memory
//     cannot bind, the refinement also moves whole branches: where the critical path runs on one device
//     through chains that only waited for the device, each chain at once (branch_moves).
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
#include "service/engine/pardnn/work_balance.h"
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
  // ... where the total work, not the critical path, bounds the step (the first mapping then used
  // plain costs), the other model is the slack costs measured against the critical path
  // (MappingOptions::slack_beyond_critical_bound); false = plain costs again, i.e. the same mapping.
  bool slack_costs_where_work_bound = true;
  // Re-mappings with the best mapping's simulated schedule as the spans' time axis (each costs one
  // mapping and one simulation; stops at the first that does not improve).
  int32_t retiming_rounds = 2;
  RepairOptions repair;
  // Stage 2 also repairs up to this many mappings that were set aside for their overflow although they
  // simulate quicker than every kept mapping that fits (the quickest first).
  int32_t max_repaired_alternatives = 4;
  // Refinement budget in simulations: floor(refinement_scale * (1e4 / (V + E))^refinement_exponent)
  // (~700 simulations at 6K ops = 16K ops + edges), but at least what refinement_min_work simulated
  // ops + edges pay for (a budget in simulated work: ~36 simulations at 48K ops, ~10 at 100K, one at
  // 1M), clamped to refinement_max_simulations. refinement_max_simulations = 0 turns refinement off.
  // Memory-bound graphs are mapped in three or four families (pardnn_partitioner.cc); the refinement
  // starts from each family's best answer. Up to this many starts each get the whole budget (more
  // share it).
  int32_t refine_each_family_fully = 4;
  // When memory binds, also the first family's mapping with memory out of view, as ParDNN's own first
  // stage maps (MappingOptions::ignore_memory): a family of its own when its simulation fits. The
  // mapping's memory estimates are pessimistic where lifetimes overlap less than they assume, and then
  // cut the critical path for memory the simulated schedule never needs.
  bool memory_oblivious_mapping = true;
  // When memory binds, a third family besides the two above: the static estimate with contiguous
  // critical-path pieces that carry the parameters they read and fold each backward op onto the piece
  // holding its activation (MappingOptions::segment_with_parameters). Its mappings are repaired after
  // the other families' (with the time they leave) and refined from as a family of its own.
  bool parameters_family = true;
  // When memory binds, each refinement start first goes through the work balance (work_balance.h):
  // compute-dense, memory-light units move in batches from the busiest device to the least busy one
  // while the busiest bounds the step, within a share of the start's refinement budget (at most
  // work_balance.max_simulations). Off: the refinement alone (tests, measurements).
  bool balance_work = true;
  pardnn::WorkBalanceOptions work_balance;
  // When memory binds on a cluster of several nodes (hosts): also pardnn on the devices of the fewest
  // nodes, in cluster order, whose capacity holds fewer_hosts_peak_factor x the step's one-device peak
  // (its answer judged on the whole cluster, kept when better), with the time left (it is pardnn's
  // last stage; a cut run marks the answer time_limited); not on graphs that refine in batches
  // (batch_refinement_min_ops), where it would double the time. With K clusters for K devices the
  // mapping spreads the chunked critical path over every host, and where the links between hosts are
  // slow, fewer hosts pay (DenseNet-121 at 8 GPUs over four hosts and 0.45 x its peak: 21.7 ms on all
  // eight, 19.4 ms on the first two hosts).
  bool fewer_hosts_family = true;
  double fewer_hosts_peak_factor = 1.25;
  double refinement_scale = 2000.0;
  double refinement_exponent = 2.2;
  int64_t refinement_min_work = 4'000'000;
  int64_t refinement_max_simulations = 4000;
  // Graphs of more than this many ops refine with batches of up to refinement_batch_moves moves per
  // simulation (RefinementOptions::batch_moves), so that the few simulations they can afford still
  // move a lot.
  int64_t batch_refinement_min_ops = 20'000;
  // At most this many per simulation (in effect: every non-conflicting candidate of the critical path
  // at first; a batch that does not improve is halved).
  int32_t refinement_batch_moves = 16384;
  // Smaller graphs on three or more devices where memory cannot bind refine in batches too, of at most
  // this many moves (version 10; 0 = one move per simulation, as before): each round first tries the
  // best-ranked few moves of the critical path together, then half of them, then one at a time
  // (RefinementOptions::batch_moves). Not at K = 2, where every move goes to the one other device (the
  // main corpus: 3 of 106 steps shorter, 9 longer), nor where memory can bind (the tight-memory
  // corpus: 23 shorter, 21 longer, up to +7.4 %); pardnn README, version 10.
  int32_t small_graph_batch_moves = 4;
  // Where memory cannot bind, the refinement also moves whole chains off a device where the critical
  // path runs through parallel branches interleaved on it (RefinementOptions::branch_moves; version 9).
  bool branch_moves = true;
  // ... and those graphs' mappings run the worklist improvement pass
  // (MappingOptions::improvement_evaluations_per_cluster) with at least this many evaluations per
  // cluster: the refinement can afford few simulations there.
  double batched_improvement_evaluations = 3.0;
  // A placement that fits and is within this fraction of the lower bound is final: the stages that
  // only shorten the step (the second cost model, re-timing, refinement) are skipped. Graphs refined in
  // batches (more than batch_refinement_min_ops ops) use the larger tolerance: each of those stages
  // costs them a mapping or a simulation of the whole graph.
  double lower_bound_tolerance = 0.001;
  double batched_lower_bound_tolerance = 0.005;
  // Answers FAILED_PRECONDITION at once, without placing, when memory can bind (MemoryCanBind): for a
  // caller with its own memory repair that asks pardnn for a quick mapping only where memory leaves it
  // quick (a re-placement: on a 100K-op step that overflows, this form's memory work made the
  // re-placement 0.76 x a fresh solve's time instead of 0.24 x, for the same answers).
  bool decline_when_memory_can_bind = false;
};

std::unique_ptr<Partitioner> MakePardnnPartitioner();
std::unique_ptr<Partitioner> MakePardnnPartitioner(const PardnnOptions& options);

// The refinement budget the options give for a graph of this size.
int64_t PardnnRefinementBudget(const PardnnOptions& options, int64_t num_ops, int64_t num_edges);

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_PARDNN_PARDNN_PARTITIONER_H_
