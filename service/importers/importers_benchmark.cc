// Micro-benchmarks of the importers and generators on the committed fixtures. Run from the source root
// (or with PLACEMENT_SOURCE_DIR set):
//   importers_benchmark --benchmark_filter=Chakra
#include <cstdlib>
#include <string>

#include "benchmark/benchmark.h"
#include "service/importers/chakra_importer.h"
#include "service/importers/msr_importer.h"
#include "service/importers/onnx_importer.h"
#include "service/importers/pipedream_importer.h"
#include "service/importers/scaled_graphs.h"

namespace placement::importers {
namespace {

std::string Fixture(const char* relative) {
  const char* root = std::getenv("PLACEMENT_SOURCE_DIR");
  return std::string(root != nullptr && *root ? root : ".") + "/tests/data/importers/" + relative;
}

template <typename Import>
void RunImport(benchmark::State& state, const std::string& path, Import import) {
  const ImportOptions options;
  int64_t ops = 0;
  for (auto _ : state) {
    absl::StatusOr<v1::PlaceRequest> request = import(path, options);
    if (!request.ok()) {
      state.SkipWithError(std::string(request.status().message()).c_str());
      return;
    }
    ops = request->graph().ops_size();
    benchmark::DoNotOptimize(request);
  }
  state.counters["ops"] = static_cast<double>(ops);
  state.SetItemsProcessed(state.iterations() * ops);
}

void BM_MsrBert3Training(benchmark::State& state) {
  RunImport(state, Fixture("msr/bert_l-3_training.json.gz"),
            [](const std::string& p, const ImportOptions& o) { return ImportMsr(p, o); });
}
BENCHMARK(BM_MsrBert3Training)->Unit(benchmark::kMillisecond);

void BM_PipeDreamGnmt(benchmark::State& state) {
  RunImport(state, Fixture("pipedream/gnmt_graph.txt"),
            [](const std::string& p, const ImportOptions& o) { return ImportPipeDream(p, o); });
}
BENCHMARK(BM_PipeDreamGnmt)->Unit(benchmark::kMillisecond);

void BM_OnnxSqueezeNet(benchmark::State& state) {
  RunImport(state, Fixture("onnx/light_squeezenet.onnx"),
            [](const std::string& p, const ImportOptions& o) { return ImportOnnx(p, o); });
}
BENCHMARK(BM_OnnxSqueezeNet)->Unit(benchmark::kMillisecond);

void BM_ChakraResNet18(benchmark::State& state) {
  RunImport(state, Fixture("chakra/resnet_et_2023_pid23442.json.gz"),
            [](const std::string& p, const ImportOptions& o) { return ImportChakra(p, o); });
}
BENCHMARK(BM_ChakraResNet18)->Unit(benchmark::kMillisecond);

void BM_UnrolledRnn(benchmark::State& state) {
  RnnSpec spec;
  spec.steps = static_cast<int32_t>(state.range(0) / 10);
  for (auto _ : state) benchmark::DoNotOptimize(UnrolledRnn(spec));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_UnrolledRnn)->Arg(100'000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace placement::importers
