// stages_partitioner.h — `stages`, the stage planner users know from PipeDream and the NeurIPS'20 DP
// (Tarnawski et al., "Efficient Algorithms for Device Placement of DNN Graph Operators"): contiguous
// stages of a linear order of the ops, chosen by dynamic programming to minimise the slowest stage, one
// stage per device; and the interleaved variant, v stages per device.
//
// 1. Units (colocation groups, single ops) are put in a linear order (chain_problem.h: by layer, or
//    folded so that a layer's backward work sits with its forward work) and coarsened into at most
//    `max_elements` blocks.
// 2. The DP (stage_dp.h) splits the order into contiguous stages minimising the slowest stage's cost:
//    its compute on its device (heterogeneous speeds: the DP's state counts the devices used per class
//    of identical devices, so it chooses which class takes which stage — faster devices take heavier
//    stages), the transfers into and out of it, and its memory within capacity (persistent bytes,
//    activations of the microbatches in flight, accumulation buffers). Memory is tried with
//    min(W, K) microbatches in flight, then 1, then none (persistent bytes only), then not at all: the
//    first regime with a split wins, and the simulator reports any overflow.
// 3. Stages go to devices in pipeline order along the device chain (baselines::PipelineDeviceChain:
//    neighbours on fast links, devices of one host together); within a class, the first stage the DP
//    gives the class takes its first device along the chain.
// 4. Interleaved (with microbatches): with v ∈ {2, 4} virtual stages per device, the order is split
//    into v·K stages and stage s runs on chain device s mod K (each stage may use 1/v of the device's
//    memory); a smaller pipeline bubble for the same work.
// 5. Every contiguous split: for small graphs (at most 2048 elements, 20000 ideals), the DP runs over
//    every ideal of the forward work's partial order, each forward unit with the backward work that
//    reads it (chain_problem.h, BuildAnchoredElements) — the NeurIPS'20 DP's search space — not only
//    the prefixes of one order; bounded by the chain's optimum, a budget of 4M stages evaluated and
//    the deadline.
// 6. Fewer stages: with few microbatches and coarse stages, one more device can shorten the slowest
//    stage less than it lengthens the pipeline's fill and drain; the DP's table also gives the best
//    split on every smaller set of devices, and the one minimising slowest stage × (M + stages − 1)
//    (GPipe's bubble) is one more candidate when it uses fewer stages.
// Every candidate (two orders × transfers charged or overlapped, the exact search, each with its
// fewer-stage split, then the interleaved ones on the best order) is simulated on the model's plan (the simulator has the last word); the best (fits, then the
// shortest step) is the answer; when the solver chooses W, the best three (one on large steps) get their
// own fastest window that fits and the best of those is the answer, with its W
// (PartitionResult::max_in_flight). Pins, kinds and colocation groups hold by construction (units are
// placed whole; a stage never goes to a device one of its units may not use). Once-per-step ops go with
// their unit, or follow the parameters they update (chain_problem.h).
//
// Cost: O(V + E) to build each order, the DP O(pairs × (senders per block + states)) with pairs about
// max_elements² / K, and one simulation per candidate; under a deadline, candidates stop at the
// deadline (the first is always simulated). Deterministic.
//
// Example:
//   std::unique_ptr<Partitioner> stages = MakeStagesPartitioner();
//   absl::StatusOr<PartitionResult> result = stages->Partition(model, context);
#ifndef PLACEMENT_SERVICE_ENGINE_STAGES_STAGES_PARTITIONER_H_
#define PLACEMENT_SERVICE_ENGINE_STAGES_STAGES_PARTITIONER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "service/engine/model/model.h"
#include "service/engine/partition/partitioner.h"
#include "service/engine/stages/chain_problem.h"

namespace placement::engine {

struct StagesOptions {
  // Blocks the order is coarsened into (the DP's resolution): the stage boundaries fall between them.
  int32_t max_elements = 1024;
  // Virtual stages per device tried besides 1 (the interleaved variant).
  std::vector<int32_t> interleave = {2, 4};
  // Skip simulating a candidate whose AssignedLowerBoundNs (simulator.h) is above the best fitting
  // candidate's step: it cannot win. Off only in tests that check the answer does not change.
  bool skip_by_bound = true;
  // Step 5, the exact search over every contiguous split (small graphs). Off: the two orders' DP only —
  // what a re-placement's `stages` candidate runs (../replace/): on branchy small graphs the exact search
  // is most of the planner's time (Inception-v1: 0.14 of 0.15 s) for a fresh plan that a re-placement
  // rarely keeps.
  bool exact_search = true;
};

// api.md name "stages".
std::unique_ptr<Partitioner> MakeStagesPartitioner(StagesOptions options = StagesOptions());

namespace stages {

// One candidate of the planner, for tests and benchmarks: the assignment the DP's split gives for one
// order, transfer model and interleave factor, with the DP's objective (kInfeasible when even the
// last memory regime found no split).
struct StagePlan {
  Assignment assignment;
  int64_t objective = 0;
  int32_t stages = 0;  // non-empty stages
  OrderKind order = OrderKind::kLevels;
  bool charge_transfers = true;
  int32_t interleave = 1;
  bool exact = false;  // over every contiguous split of the forward-anchored elements (SolveIdeals)
  std::string Describe() const;
};

// `exact`: every contiguous split of the forward-anchored elements, when the graph is small enough
// (else as without it; `order` is then the level order).
StagePlan PlanStages(const Model& model, OrderKind order, bool charge_transfers, int32_t interleave,
                     int32_t max_elements = StagesOptions().max_elements, bool exact = false);

}  // namespace stages
}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_STAGES_STAGES_PARTITIONER_H_
