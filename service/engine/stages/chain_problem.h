// chain_problem.h — a placement Model as the stage planner's problem: its colocation units in one
// linear order, coarsened into at most `max_elements` blocks, with a cost model (stage_problem.h) built
// from the model's compute, transfers and memory under its training plan.
//
// **The order.** Every op gets a key; a unit (colocation group or single op, placement_units.h) takes
// the smallest key of its *primary* members (per-microbatch ops with an input or with compute of their
// own), and units are sorted by
// (key, units without primary members last, unit id). Two keys:
//   * `kLevels`: the op's level as late as possible (L − height; L the longest path in edges, height
//     the longest path from the op to a sink): a topological order in which the ops of one layer sit
//     together, as a forward pass runs, and an op that only prepares what a later layer reads (a
//     weight's transpose for the backward pass) sits with that layer;
//   * `kFolded`: min(level, height): a training step mirrors its forward pass in the backward
//     pass, so the backward op of layer i is as far from the end as the forward op of layer i is from
//     the start; folding puts both in one stage, as PipeDream's stages hold a layer's forward and
//     backward work (and its weights, read by both).
// Ops follow what they serve: a source (parameter, weight transpose, input) takes its first primary
// consumer's key; a once-per-step op (optimizer update) takes its source inputs' key — the
// stage of its parameter's consumers — or else its inputs' smallest key. A unit with
// no primary member takes its members' smallest key. The planner tries both orders and keeps the one
// the simulator prefers.
//
// **Blocks.** Consecutive units are grouped into at most about `max_elements` blocks of about equal
// weight (the DP cuts between blocks only). In the folded order a key group (one layer's forward and
// backward work) is never split; in the level order a block may close before any primary unit, and
// the units without primary members that follow it ride along.
//
// **Per stage cost** (the DP's estimate; the simulator has the last word):
//   * compute: M × Σ per-microbatch compute + Σ once compute, divided by the device's speed;
//   * transfers: every op whose output leaves its block is one *sender*, costing the transfer of its
//     largest edge out of the block over the reference link (the mean of the device chain's neighbour
//     links), M times for per-microbatch ops; charged to the stage it leaves and to each stage it
//     enters (in and out, as PipeDream and the NeurIPS'20 DP charge them), or not at all when the
//     variant assumes transfers overlap compute (the simulator's links never slow a device down);
//   * memory: persistent bytes + `in_flight` × the outputs of its per-microbatch ops (activations of
//     the microbatches in flight; conservative: every output counted as if kept) + one accumulation
//     buffer per gradient producer; within the device's capacity (× `capacity_share` when a device
//     holds several stages). Temp bytes and received copies are left to the simulator.
//
// Example:
//   ChainElements chain = BuildChainElements(model, units, OrderKind::kFolded, 2048);
//   ChainProblem problem(model, units, chain, device_chain);
//   problem.SetCostModel(cost);  // memory regime, transfers
//   problem.SetClasses(classes); // devices
#ifndef PLACEMENT_SERVICE_ENGINE_STAGES_CHAIN_PROBLEM_H_
#define PLACEMENT_SERVICE_ENGINE_STAGES_CHAIN_PROBLEM_H_

#include <cstdint>
#include <vector>

#include "service/engine/baselines/placement_units.h"
#include "service/engine/model/model.h"
#include "service/engine/stages/stage_problem.h"

namespace placement::engine::stages {

enum class OrderKind { kLevels, kFolded };

struct ChainElements {
  OrderKind order = OrderKind::kLevels;
  std::vector<int32_t> unit_order;       // units in chain order
  std::vector<int32_t> element_of_unit;  // per unit
  int32_t num_elements = 0;
};

// The units of `model` in `order`, grouped into at most `max_elements` consecutive blocks of about
// equal compute (a unit heavier than the share is a block alone).
ChainElements BuildChainElements(const Model& model, const baselines::PlacementUnits& units, OrderKind order,
                                 int32_t max_elements);

// The exact search's elements (the NeurIPS'20 DP's structure, generalised): every unit with a *forward*
// member — a primary op no farther from the sources than from the sinks (depth <= height) — is an
// element, in level order; every other unit rides with an element: the latest element of a forward op
// it reads (a backward op with the layer whose activation it reads), else the latest of its settled
// inputs, else (parameters) the earliest of its consumers. The model's edges between elements then
// order the forward work only (SetPredecessors), as the forward graph orders the published DP's ideals.
ChainElements BuildAnchoredElements(const Model& model, const baselines::PlacementUnits& units);

// Σ over edges of |key(u) − key(v)| in `order`, on levels as soon as possible (depth): how far apart
// the order puts producers and consumers (a contiguous split cuts fewer edges when it is small). The
// planner tries the folded order only when it brings the ops of an edge closer than the level order
// does (a training step: saved activations span the whole level order, not the fold).
int64_t OrderSpan(const Model& model, OrderKind order);

struct CostModel {
  // Microbatches whose activations a stage is charged for; 0 = persistent bytes and accumulation
  // buffers only.
  int32_t in_flight = 1;
  bool memory = true;            // false: no memory limit at all
  bool charge_transfers = true;  // false: transfers overlap compute
  // Of each device's capacity, what one stage may use (1/v when a device runs v stages).
  double capacity_share = 1.0;
  // Pins and kinds forbid classes; false when no contiguous split can honour them (interleaved pins),
  // and the planner moves the units that are not allowed where their stage went afterwards.
  bool constraints = true;
};

// A device class of the model: devices the planner may use interchangeably.
struct DeviceClass {
  std::vector<DeviceId> devices;  // in device-chain order
  DeviceId representative = kNone;
};

// ClassCounts classes: devices grouped by (speed, capacity, kind), a device that some unit is pinned
// to in a class of its own; classes in order of their first device in `device_chain`.
std::vector<DeviceClass> GroupDevices(const Model& model, const baselines::PlacementUnits& units,
                                      const std::vector<DeviceId>& device_chain);
// One class per device of `device_chain` (at most kMaxClasses of them), for fixed slots.
std::vector<DeviceClass> OneClassPerDevice(const std::vector<DeviceId>& device_chain);

class ChainProblem {
 public:
  ChainProblem(const Model& model, const baselines::PlacementUnits& units, const ChainElements& chain,
               const std::vector<DeviceId>& device_chain);

  // Gives every element the predecessors the model's edges imply along the chain (an edge from a block
  // to a later one; edges back, e.g. of a backward pass, impose nothing): a partial order whose ideals
  // include every prefix of the chain, for SolveIdeals.
  void SetPredecessors();

  // Sets the memory of every element, the classes and their capacities; the problem is then ready.
  void Configure(const CostModel& cost, const std::vector<DeviceClass>& classes);
  const StageProblem& problem() const { return problem_; }
  const ChainElements& chain() const { return chain_; }

 private:
  const Model& model_;
  const baselines::PlacementUnits& units_;
  const ChainElements& chain_;
  StageProblem problem_;
  // Per element, before a cost model is chosen.
  std::vector<int64_t> persistent_, activations_, accumulation_;
  std::vector<int64_t> sender_cost_;  // transfers charged (restored when charge_transfers flips back)
};

}  // namespace placement::engine::stages

#endif  // PLACEMENT_SERVICE_ENGINE_STAGES_CHAIN_PROBLEM_H_
