// stages_msr_dp — the stage planner's DP on a NeurIPS'20 input (msr-fiddle/dnn-partitioning format), in
// that paper's cost model (msr_stage_problem.h): prints the max-load and writes the split in the
// published DP's output format.
//
//   stages_msr_dp --input=bert24_training.json [--fpgas=K] [--out=split.json] [--chain_only]
//
// Output (one line): elements, ideals (0 = one topological order only), stages evaluated, max-load in
// the file's unit, the same recomputed from the split by the independent evaluator, feasibility, time.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "bench/stages/msr_stage_problem.h"

ABSL_FLAG(std::string, input, "", "An msr input (throughput-inputs/*/*.json)");
ABSL_FLAG(int32_t, fpgas, 0, "Accelerators (0 = the file's maxFPGAs)");
ABSL_FLAG(std::string, out, "", "Write the split here (the published DP's output format)");
ABSL_FLAG(bool, chain_only, false, "Only the splits of one topological order (no ideal lattice)");
ABSL_FLAG(int64_t, max_ideals, 2'000'000, "Largest ideal lattice to enumerate");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("stages_msr_dp --input=FILE [--fpgas=K] [--out=split.json] [--chain_only]");
  absl::ParseCommandLine(argc, argv);
  absl::StatusOr<placement::bench::MsrInput> input = placement::bench::ReadMsrInput(absl::GetFlag(FLAGS_input));
  if (!input.ok()) {
    std::fprintf(stderr, "%s\n", std::string(input.status().message()).c_str());
    return 1;
  }
  if (absl::GetFlag(FLAGS_fpgas) > 0) input->max_fpgas = absl::GetFlag(FLAGS_fpgas);
  placement::bench::MsrSolveOptions options;
  options.chain_only = absl::GetFlag(FLAGS_chain_only);
  options.max_ideals = absl::GetFlag(FLAGS_max_ideals);
  const auto start = std::chrono::steady_clock::now();
  const placement::bench::MsrStagePlan plan = placement::bench::SolveMsr(*input, options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double check = placement::bench::MsrMaxLoad(*input, plan.device_of_node);
  const bool feasible = placement::bench::MsrFeasible(*input, plan.device_of_node);
  std::printf("elements=%d ideals=%lld stages_evaluated=%lld max_load=%.9f check=%.9f feasible=%d seconds=%.3f\n",
              plan.elements, static_cast<long long>(plan.ideals), static_cast<long long>(plan.pairs_visited),
              plan.max_load, check, feasible ? 1 : 0, seconds);
  if (!absl::GetFlag(FLAGS_out).empty()) {
    std::ofstream out(absl::GetFlag(FLAGS_out));
    out << plan.ToJson(*input) << "\n";
  }
  return 0;
}
