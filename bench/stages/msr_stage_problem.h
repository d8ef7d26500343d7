// msr_stage_problem.h — the stage planner's DP in the NeurIPS'20 DP's own cost model (msr-fiddle/
// dnn-partitioning, `throughput-dp`): an adapter that reads that repository's input format, applies the
// same graph preparation, and hands the result to the planner's DP (service/engine/stages/stage_dp.h),
// so that both optimise the same objective on the same search space.
//
// The cost model (the paper's max-load, as the published DP evaluates it):
//   * a device is an accelerator (k of them, `maxFPGAs`) or a CPU core (`maxCPUs`);
//   * load(accelerator) = Σ fpgaLatency of its nodes + Σ `cost` over the nodes whose output crosses
//     its boundary (a node inside with an edge out, or a node outside with an edge in; once per node);
//     load(CPU) = Σ cpuLatency (CPUs pay no transfers); the objective is the largest load;
//   * an accelerator holds at most `maxSizePerFPGA` bytes (Σ node size); nodes with supportedOnFpga
//     false run on CPUs only; nodes of one colorClass share a device.
// The search space: contiguous splits of the forward graph — differences of two ideals of it — where
// every backward node goes with the forward nodes of its colorClass. The graph preparation, as in the
// published DP: nodes are contracted per (colorClass, forward/backward); a class with backward nodes
// only gets an empty forward node, tied by mirrored edges to the forward nodes of the classes its
// backward nodes exchange data with; classes whose forward nodes lie on a cycle of the contracted
// forward graph are merged; a forward node without work or size of its class's backward nodes, with no
// backward neighbour and exactly one forward neighbour (counting parallel edges), is merged into that
// neighbour's class, repeatedly. Each surviving forward node and its backward sibling is one element of
// a StageProblem: compute column 0 = accelerator latency, 1 = CPU latency; memory = size; every input
// node with out-edges is a sender of its `cost`.
//
// Times and sizes become integers: times × kTimeScale (the files' unit, ms, to 1e-9 ms), sizes in bytes
// (llround). The objective is reported back in the files' unit.
//
// Example:
//   absl::StatusOr<MsrInput> input = ReadMsrInput("bert24_training.json");
//   MsrStagePlan plan = SolveMsr(*input, MsrSolveOptions());
//   double max_load = plan.max_load;              // the published DP's objective for the same input
//   double check = MsrMaxLoad(*input, plan.device_of_node);  // the same, evaluated independently
#ifndef PLACEMENT_BENCH_STAGES_MSR_STAGE_PROBLEM_H_
#define PLACEMENT_BENCH_STAGES_MSR_STAGE_PROBLEM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "service/engine/stages/stage_problem.h"

namespace placement::bench {

inline constexpr double kTimeScale = 1e9;

struct MsrInput {
  double max_size_per_fpga = 0;
  int32_t max_fpgas = 0;
  int32_t max_cpus = 0;
  struct Node {
    int64_t id = 0;
    bool on_fpga = true;
    double cpu_latency = 0, fpga_latency = 0, size = 0;
    bool backward = false;
    int64_t color = 0;
  };
  struct Edge {
    int32_t src = 0, dst = 0;  // indices into nodes
    double cost = 0;
  };
  std::vector<Node> nodes;  // file order
  std::vector<Edge> edges;
  // Per node: the transfer cost of its output (the same on every out-edge), 0 without out-edges.
  std::vector<double> output_cost;
};

absl::StatusOr<MsrInput> ReadMsrInput(const std::string& path);
absl::StatusOr<MsrInput> ParseMsrInput(const std::string& text);

// The prepared problem: elements in a topological order of the forward graph (so SolveChain works on
// it too), their member nodes, and the problem itself with classes {accelerators, CPUs}.
struct MsrStageProblem {
  engine::stages::StageProblem problem;
  std::vector<std::vector<int32_t>> members;  // per element: node indices
  int32_t fpga_class = 0, cpu_class = 1;
};
MsrStageProblem BuildMsrStageProblem(const MsrInput& input);

struct MsrSolveOptions {
  // Exact over every contiguous split when the forward graph has at most this many ideals; else (or
  // with `chain_only`) over the splits of one topological order.
  int64_t max_ideals = 2'000'000;
  bool chain_only = false;
};

struct MsrStagePlan {
  double max_load = 0;  // in the files' time unit; +inf when nothing fits
  int64_t ideals = 0;   // 0 when the chain was used
  int64_t pairs_visited = 0;
  int32_t elements = 0;
  // Per node (file order): 0 = CPU, 1..k = accelerator (pipeline order), as the published output's
  // device numbering (cpus first) reads.
  std::vector<int32_t> device_of_node;
  // The split in the published output format: {"maxLoad", "fpgas": [{"load", "nodes": [ids]}], "cpus"}.
  std::string ToJson(const MsrInput& input) const;
};
MsrStagePlan SolveMsr(const MsrInput& input, const MsrSolveOptions& options);

// The max-load of an assignment (per node: 0 = CPU, 1.. = accelerator) in the cost model above,
// computed directly from the input in double precision (no contraction, no DP): the independent check.
double MsrMaxLoad(const MsrInput& input, const std::vector<int32_t>& device_of_node);
// Whether it respects colorClasses, accelerator memory and supportedOnFpga.
bool MsrFeasible(const MsrInput& input, const std::vector<int32_t>& device_of_node);

// A split file in the published output format (a DP answer or a human expert's) as device per node;
// nodes it does not list take the device of a listed node of their colorClass (the published `-expert`
// mode's completion of a forward-only split to training), else -1.
absl::StatusOr<std::vector<int32_t>> ReadMsrSplit(const MsrInput& input, const std::string& path);

}  // namespace placement::bench

#endif  // PLACEMENT_BENCH_STAGES_MSR_STAGE_PROBLEM_H_
