// Benchmarks of Simulator::Run on a 1,000,000-op / ~3,000,000-edge layered random DAG over 8 devices,
// against the floor of one plain topological traversal (Kahn) of the same CSR.
//
//   ninja -C <build> simulator_benchmark && <build>/service/engine/sim/simulator_benchmark
//
// Every benchmark reports `x_topo`: its mean CPU time divided by the fastest CPU time of a Kahn traversal
// measured in the same process, so the ratio is comparable across (noisy, shared) machines. CPU time of
// the thread, not wall time: on a shared machine wall time mostly measures the neighbours.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

#include "benchmark/benchmark.h"
#include "service/engine/model/model.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/sim/simulator.h"
#include "tests/testutil/random_graph.h"

namespace placement::engine {
namespace {

constexpr int32_t kOps = 1'000'000;
constexpr int32_t kDevices = 8;

const Model& BigModel() {
  static const Model* model = [] {
    testutil::RandomGraphOptions options;
    options.num_ops = kOps;
    options.avg_out_degree = 3.0;
    options.layer_width = 1000;
    options.num_devices = kDevices;
    options.num_nodes = 2;
    options.seed = 2024;
    absl::StatusOr<Model> built = BuildModel(testutil::RandomLayeredRequest(options));
    if (!built.ok()) {
      std::fprintf(stderr, "BuildModel failed: %s\n", built.status().ToString().c_str());
      std::abort();
    }
    return new Model(*std::move(built));
  }();
  return *model;
}

// Each op on a uniformly random device: almost every edge crosses devices (the most transfers).
const Assignment& RandomAssignment() {
  static const Assignment* assignment = [] {
    const Model& model = BigModel();
    testutil::Rng rng(7);
    auto* a = new Assignment(model.num_ops());
    for (DeviceId& d : *a) d = static_cast<DeviceId>(rng.Uniform(0, kDevices - 1));
    return a;
  }();
  return *assignment;
}

// Contiguous blocks of the topological order: few edges cross (a pipeline-like placement).
const Assignment& BlockAssignment() {
  static const Assignment* assignment = [] {
    const Model& model = BigModel();
    auto* a = new Assignment(model.num_ops());
    const int64_t n = model.num_ops();
    for (int64_t i = 0; i < n; ++i) (*a)[model.topo_order[i]] = static_cast<DeviceId>(i * kDevices / n);
    return a;
  }();
  return *assignment;
}

// The parts of a graph a traversal reads.
struct Csr {
  std::vector<EdgeId> out_offset, in_offset;
  std::vector<OpId> out_dst;
  std::vector<int64_t> out_bytes, compute_ns;
};

Csr ModelCsr(const Model& model) {
  return Csr{model.out_offset, model.in_offset, model.out_dst, model.out_bytes, model.compute_ns};
}

// The same graph renumbered in topological order, so that neighbours are near each other in memory
// (the simulator renumbers by depth internally; this floor has the same advantage).
Csr TopologicallyOrderedCsr(const Model& model) {
  const int32_t n = model.num_ops();
  std::vector<OpId> rank(n);
  for (int32_t i = 0; i < n; ++i) rank[model.topo_order[i]] = i;
  Csr csr;
  csr.out_offset.assign(1, 0);
  csr.in_offset.assign(1, 0);
  for (const OpId u : model.topo_order) {
    for (EdgeId e = model.out_begin(u); e < model.out_end(u); ++e) {
      csr.out_dst.push_back(rank[model.out_dst[e]]);
      csr.out_bytes.push_back(model.out_bytes[e]);
    }
    csr.out_offset.push_back(static_cast<EdgeId>(csr.out_dst.size()));
    csr.in_offset.push_back(csr.in_offset.back() + (model.in_end(u) - model.in_begin(u)));
    csr.compute_ns.push_back(model.compute_ns[u]);
  }
  return csr;
}

// Kahn's algorithm over an out CSR; the checksum keeps the work from being optimised away.
int64_t TopologicalTraversal(const Csr& g, std::vector<int32_t>& indegree, std::vector<OpId>& queue) {
  const int32_t n = static_cast<int32_t>(g.compute_ns.size());
  indegree.resize(n);
  queue.clear();
  for (OpId v = 0; v < n; ++v) {
    indegree[v] = static_cast<int32_t>(g.in_offset[v + 1] - g.in_offset[v]);
    if (indegree[v] == 0) queue.push_back(v);
  }
  int64_t checksum = 0;
  for (size_t head = 0; head < queue.size(); ++head) {
    const OpId u = queue[head];
    checksum += g.compute_ns[u];
    for (EdgeId e = g.out_offset[u]; e < g.out_offset[u + 1]; ++e) {
      const OpId v = g.out_dst[e];
      checksum += g.out_bytes[e];
      if (--indegree[v] == 0) queue.push_back(v);
    }
  }
  return checksum;
}

double ThreadCpuSeconds() {
  timespec now;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

// Fastest of several traversals of the model's own CSR, measured once per process.
double TopologicalSeconds() {
  static const double seconds = [] {
    const Csr model = ModelCsr(BigModel());
    std::vector<int32_t> indegree;
    std::vector<OpId> queue;
    double best = 1e30;
    for (int i = 0; i < 7; ++i) {
      const double start = ThreadCpuSeconds();
      benchmark::DoNotOptimize(TopologicalTraversal(model, indegree, queue));
      best = std::min(best, ThreadCpuSeconds() - start);
    }
    return best;
  }();
  return seconds;
}

// Runs `body` per iteration, timing it, and reports the mean against the traversal floor.
template <typename Body>
void Measure(benchmark::State& state, Body body) {
  const double floor = TopologicalSeconds();
  double total = 0;
  int64_t iterations = 0;
  for (auto _ : state) {
    const double start = ThreadCpuSeconds();
    body();
    total += ThreadCpuSeconds() - start;
    ++iterations;
  }
  const Model& model = BigModel();
  state.counters["x_topo"] = total / iterations / floor;
  state.counters["topo_ms"] = floor * 1e3;
  state.counters["ops"] = model.num_ops();
  state.counters["edges"] = static_cast<double>(model.num_edges());
}

void BM_TopologicalTraversal(benchmark::State& state) {
  const Csr csr = ModelCsr(BigModel());
  std::vector<int32_t> indegree;
  std::vector<OpId> queue;
  Measure(state, [&] { benchmark::DoNotOptimize(TopologicalTraversal(csr, indegree, queue)); });
}

// A stricter floor: the same traversal on a topologically renumbered copy (x_topo < 1 here shows how
// much of the floor above is cache misses due to name-ordered ids).
void BM_TopologicalTraversal_TopoOrderedCopy(benchmark::State& state) {
  const Csr csr = TopologicallyOrderedCsr(BigModel());
  std::vector<int32_t> indegree;
  std::vector<OpId> queue;
  Measure(state, [&] { benchmark::DoNotOptimize(TopologicalTraversal(csr, indegree, queue)); });
}

void RunSimulator(benchmark::State& state, const Assignment& assignment, bool memory) {
  const Model& model = BigModel();
  Simulator sim(model);
  SimOptions options;
  options.compute_memory = memory;
  const SimResult* result = &sim.Run(assignment, options);  // sizes the scratch
  Measure(state, [&] { result = &sim.Run(assignment, options); });
  state.counters["makespan_ms"] = result->makespan_ns / 1e6;
  state.counters["transfers"] = static_cast<double>(result->transfer_count);
}

void BM_RunWithMemory_RandomPlacement(benchmark::State& state) {
  RunSimulator(state, RandomAssignment(), /*memory=*/true);
}
void BM_RunWithoutMemory_RandomPlacement(benchmark::State& state) {
  RunSimulator(state, RandomAssignment(), /*memory=*/false);
}
void BM_RunWithMemory_BlockPlacement(benchmark::State& state) {
  RunSimulator(state, BlockAssignment(), /*memory=*/true);
}
void BM_RunWithoutMemory_BlockPlacement(benchmark::State& state) {
  RunSimulator(state, BlockAssignment(), /*memory=*/false);
}

// Per-model setup (depth renumbering and the copy of the graph), paid once per Simulator.
void BM_ConstructSimulator(benchmark::State& state) {
  const Model& model = BigModel();
  Measure(state, [&] {
    Simulator sim(model);
    benchmark::DoNotOptimize(&sim);
  });
}

void BM_LowerBound(benchmark::State& state) {
  const Model& model = BigModel();
  Measure(state, [&] { benchmark::DoNotOptimize(LowerBoundNs(model)); });
}

// Seconds are the natural unit at this size; a few iterations suffice for stable means.
BENCHMARK(BM_TopologicalTraversal)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_TopologicalTraversal_TopoOrderedCopy)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_RunWithMemory_RandomPlacement)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_RunWithoutMemory_RandomPlacement)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_RunWithMemory_BlockPlacement)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_RunWithoutMemory_BlockPlacement)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_ConstructSimulator)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_LowerBound)->Unit(benchmark::kMillisecond)->MinTime(1.0);

}  // namespace
}  // namespace placement::engine
