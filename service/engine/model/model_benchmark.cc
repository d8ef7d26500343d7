// model_benchmark.cc — cost of turning a request into a model and a cache key.
//
// On layered random DAGs with ~3 edges per op and 8 devices (the 1,000,000-op case is the target:
// validation + build + both digests <= 1.5 s, process peak RSS <= 1.5 GiB), it times:
//   BM_GenerateRequest   the test generator itself (tests/testutil), for reference
//   BM_BuildModel        validation + construction (BuildModel)
//   BM_Digests           GraphDigestHex + RequestDigestHex on a built model
//   BM_BuildAndDigest    both, as a request pays them
// and reports the process's peak resident set (getrusage ru_maxrss) as the counter peak_rss_MiB.
//
// Run (Release build):
//   ninja -C build model_benchmark && build/service/engine/model/model_benchmark
//   build/service/engine/model/model_benchmark --benchmark_filter='/1000000'
#include <sys/resource.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "benchmark/benchmark.h"
#include "service/engine/model/digest.h"
#include "service/engine/model/model_builder.h"
#include "tests/testutil/random_graph.h"

namespace placement::engine {
namespace {

testutil::RandomGraphOptions BenchmarkOptions(int32_t num_ops) {
  testutil::RandomGraphOptions options;
  options.num_ops = num_ops;
  options.avg_out_degree = 3.0;
  options.num_devices = 8;
  options.num_nodes = 2;
  options.seed = 2024;
  return options;
}

// One request per size, generated once and kept for the whole run (as a server keeps a decoded request).
const v1::PlaceRequest& RequestOfSize(int32_t num_ops) {
  static auto* cache = new std::map<int32_t, std::unique_ptr<v1::PlaceRequest>>();
  std::unique_ptr<v1::PlaceRequest>& entry = (*cache)[num_ops];
  if (entry == nullptr) {
    entry = std::make_unique<v1::PlaceRequest>(testutil::RandomLayeredRequest(BenchmarkOptions(num_ops)));
  }
  return *entry;
}

double PeakRssMiB() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

void SetCounters(benchmark::State& state, const v1::PlaceRequest& request) {
  state.counters["ops"] = request.graph().ops_size();
  state.counters["edges"] = request.graph().edges_size();
  state.counters["peak_rss_MiB"] = PeakRssMiB();
}

// The algorithm, version and seed the request digests are taken for.
constexpr const char* kAlgorithm = "pardnn";
constexpr const char* kAlgorithmVersion = "1.0";
constexpr uint64_t kSeed = 1;

// For the benchmarks that time what comes after BuildModel: the model, built once; a failure skips the
// benchmark.
absl::StatusOr<Model> BuildOutsideTheLoop(benchmark::State& state, const v1::PlaceRequest& request) {
  absl::StatusOr<Model> model = BuildModel(request);
  if (!model.ok()) state.SkipWithError("BuildModel failed");
  return model;
}

void BM_GenerateRequest(benchmark::State& state) {
  const testutil::RandomGraphOptions options = BenchmarkOptions(static_cast<int32_t>(state.range(0)));
  int64_t edges = 0;
  for (auto _ : state) {
    auto request = std::make_unique<v1::PlaceRequest>(testutil::RandomLayeredRequest(options));
    edges = request->graph().edges_size();
    state.PauseTiming();
    request.reset();
    state.ResumeTiming();
  }
  state.counters["edges"] = static_cast<double>(edges);
  state.counters["peak_rss_MiB"] = PeakRssMiB();
}

void BM_BuildModel(benchmark::State& state) {
  const v1::PlaceRequest& request = RequestOfSize(static_cast<int32_t>(state.range(0)));
  for (auto _ : state) {
    auto model = std::make_unique<absl::StatusOr<Model>>(BuildModel(request));
    if (!model->ok()) state.SkipWithError("BuildModel failed");
    benchmark::DoNotOptimize(model.get());
    state.PauseTiming();  // freeing the model is not part of building it
    model.reset();
    state.ResumeTiming();
  }
  SetCounters(state, request);
}

void BM_Digests(benchmark::State& state) {
  const v1::PlaceRequest& request = RequestOfSize(static_cast<int32_t>(state.range(0)));
  const absl::StatusOr<Model> model = BuildOutsideTheLoop(state, request);
  if (!model.ok()) return;
  for (auto _ : state) {
    const std::string graph_digest = GraphDigestHex(*model);
    std::string request_digest = RequestDigestHex(*model, kAlgorithm, kAlgorithmVersion, kSeed, graph_digest);
    benchmark::DoNotOptimize(request_digest);
  }
  SetCounters(state, request);
}

void BM_GraphDigest(benchmark::State& state) {
  const v1::PlaceRequest& request = RequestOfSize(static_cast<int32_t>(state.range(0)));
  const absl::StatusOr<Model> model = BuildOutsideTheLoop(state, request);
  if (!model.ok()) return;
  for (auto _ : state) {
    std::string digest = GraphDigestHex(*model);
    benchmark::DoNotOptimize(digest);
  }
  SetCounters(state, request);
}

void BM_RequestDigest(benchmark::State& state) {
  const v1::PlaceRequest& request = RequestOfSize(static_cast<int32_t>(state.range(0)));
  const absl::StatusOr<Model> model = BuildOutsideTheLoop(state, request);
  if (!model.ok()) return;
  const std::string graph_digest = GraphDigestHex(*model);
  for (auto _ : state) {
    std::string digest = RequestDigestHex(*model, kAlgorithm, kAlgorithmVersion, kSeed, graph_digest);
    benchmark::DoNotOptimize(digest);
  }
  SetCounters(state, request);
}

void BM_BuildAndDigest(benchmark::State& state) {
  const v1::PlaceRequest& request = RequestOfSize(static_cast<int32_t>(state.range(0)));
  for (auto _ : state) {
    auto model = std::make_unique<absl::StatusOr<Model>>(BuildModel(request));
    if (!model->ok()) {
      state.SkipWithError("BuildModel failed");
      break;
    }
    const std::string graph_digest = GraphDigestHex(**model);
    std::string request_digest = RequestDigestHex(**model, kAlgorithm, kAlgorithmVersion, kSeed, graph_digest);
    benchmark::DoNotOptimize(request_digest);
    state.PauseTiming();
    model.reset();
    state.ResumeTiming();
  }
  SetCounters(state, request);
}

// Sizes: 10k and 100k for scaling, 1M = the target.
#define MODEL_BENCHMARK(fn)                 \
  BENCHMARK(fn)                             \
      ->Arg(10'000)                         \
      ->Arg(100'000)                        \
      ->Arg(1'000'000)                      \
      ->Unit(benchmark::kMillisecond)       \
      ->UseRealTime()                       \
      ->MinTime(1.0)

MODEL_BENCHMARK(BM_GenerateRequest);
MODEL_BENCHMARK(BM_BuildModel);
MODEL_BENCHMARK(BM_GraphDigest);
MODEL_BENCHMARK(BM_RequestDigest);
MODEL_BENCHMARK(BM_Digests);
MODEL_BENCHMARK(BM_BuildAndDigest);

}  // namespace
}  // namespace placement::engine
