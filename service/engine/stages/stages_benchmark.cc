// Speed of the stage planner on layered random DAGs (synthetic: for timing only) of 10^3 .. 10^6 ops on
// 8 devices over 2 nodes, 10% of the ops in colocation groups. Run:
//   stages_benchmark --benchmark_filter='/100000'
//
// * `stages_plan`: one candidate (order, units, blocks, cost model, DP, assignment) — the planner
//   proper;
// * `stages`: the whole partitioner (every candidate, each simulated), on one microbatch;
// * `stages_m16`: the same with 16 microbatches (the simulations of the unrolled step dominate).
// Models are built once per size.
#include <cstdint>
#include <map>
#include <memory>

#include "benchmark/benchmark.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/stages/stages_partitioner.h"
#include "tests/testutil/random_graph.h"

namespace placement::engine {
namespace {

const Model& ModelOfSize(int64_t num_ops, int32_t microbatches) {
  static auto* models = new std::map<std::pair<int64_t, int32_t>, std::unique_ptr<Model>>();
  auto it = models->find({num_ops, microbatches});
  if (it != models->end()) return *it->second;
  testutil::RandomGraphOptions options;
  options.num_ops = static_cast<int32_t>(num_ops);
  options.avg_out_degree = 2.5;
  options.num_devices = 8;
  options.num_nodes = 2;
  options.colocation_fraction = 0.1;
  options.seed = 17;
  v1::PlaceRequest request = testutil::RandomLayeredRequest(options);
  request.mutable_options()->set_microbatches(microbatches);
  absl::StatusOr<Model> model = BuildModel(request);
  if (!model.ok()) std::abort();
  std::unique_ptr<Model>& slot = (*models)[{num_ops, microbatches}];
  slot = std::make_unique<Model>(*std::move(model));
  return *slot;
}

void BM_Plan(benchmark::State& state) {
  const Model& model = ModelOfSize(state.range(0), 1);
  for (auto _ : state) {
    stages::StagePlan plan = stages::PlanStages(model, stages::OrderKind::kFolded, true, 1);
    benchmark::DoNotOptimize(plan);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void Partition(benchmark::State& state, int32_t microbatches) {
  const Model& model = ModelOfSize(state.range(0), microbatches);
  const std::unique_ptr<Partitioner> algorithm = MakeStagesPartitioner();
  for (auto _ : state) {
    absl::StatusOr<PartitionResult> result = algorithm->Partition(model, SolveContext());
    benchmark::DoNotOptimize(result);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_Partition(benchmark::State& state) { Partition(state, 1); }
void BM_PartitionM16(benchmark::State& state) { Partition(state, 16); }

BENCHMARK(BM_Plan)->Name("stages_plan")->Arg(1'000)->Arg(10'000)->Arg(100'000)->Arg(1'000'000)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Partition)->Name("stages")->Arg(1'000)->Arg(10'000)->Arg(100'000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PartitionM16)->Name("stages_m16")->Arg(10'000)->Arg(100'000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace placement::engine
