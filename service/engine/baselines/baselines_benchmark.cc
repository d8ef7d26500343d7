// Speed of each baseline on layered random graphs (synthetic: for timing only) of 10^3 .. 10^6 ops on 8
// devices over 2 nodes. Run:
//   baselines_benchmark --benchmark_filter='heft/100000'
// Models are built once per size and shared by all algorithms.
#include <cstdint>
#include <map>
#include <memory>

#include "benchmark/benchmark.h"
#include "service/engine/baselines/heft.h"
#include "service/engine/baselines/m_etf.h"
#include "service/engine/baselines/m_topo.h"
#include "service/engine/baselines/metis.h"
#include "service/engine/baselines/pipeline.h"
#include "service/engine/model/model_builder.h"
#include "tests/testutil/random_graph.h"

namespace placement::engine {
namespace {

const Model& ModelOfSize(int64_t num_ops) {
  static auto* models = new std::map<int64_t, std::unique_ptr<Model>>();
  auto it = models->find(num_ops);
  if (it != models->end()) return *it->second;
  testutil::RandomGraphOptions options;
  options.num_ops = static_cast<int32_t>(num_ops);
  options.avg_out_degree = 2.5;
  options.num_devices = 8;
  options.num_nodes = 2;
  options.colocation_fraction = 0.1;
  options.seed = 17;
  absl::StatusOr<Model> model = BuildModel(testutil::RandomLayeredRequest(options));
  if (!model.ok()) std::abort();
  std::unique_ptr<Model>& slot = (*models)[num_ops];
  slot = std::make_unique<Model>(*std::move(model));
  return *slot;
}

void Run(benchmark::State& state, std::unique_ptr<Partitioner> (*make)()) {
  const Model& model = ModelOfSize(state.range(0));
  const std::unique_ptr<Partitioner> algorithm = make();
  for (auto _ : state) {
    absl::StatusOr<PartitionResult> result = algorithm->Partition(model, SolveContext());
    benchmark::DoNotOptimize(result);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_MTopo(benchmark::State& state) { Run(state, MakeMTopoPartitioner); }
void BM_MEtf(benchmark::State& state) { Run(state, MakeMEtfPartitioner); }
void BM_Heft(benchmark::State& state) { Run(state, MakeHeftPartitioner); }
void BM_Metis(benchmark::State& state) { Run(state, MakeMetisPartitioner); }
void BM_Pipeline(benchmark::State& state) {
  Run(state, [] { return MakePipelinePartitioner(); });
}

#define PLACEMENT_SIZES ->Arg(1'000)->Arg(10'000)->Arg(100'000)->Arg(1'000'000)->Unit(benchmark::kMillisecond)
BENCHMARK(BM_MTopo)->Name("m_topo") PLACEMENT_SIZES;
BENCHMARK(BM_MEtf)->Name("m_etf") PLACEMENT_SIZES;
BENCHMARK(BM_Heft)->Name("heft") PLACEMENT_SIZES;
BENCHMARK(BM_Metis)->Name("metis") PLACEMENT_SIZES;
BENCHMARK(BM_Pipeline)->Name("pipeline") PLACEMENT_SIZES;

}  // namespace
}  // namespace placement::engine
