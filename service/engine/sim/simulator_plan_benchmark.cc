// Benchmarks of Simulator::Run under training plans (api.md §2.1): a 100,000-op layered random DAG over 8
// devices, placed in contiguous blocks of its topological order (a pipeline), simulated with M = 1, 16
// and 64 microbatches (no window, and W = 8), and with the last layers' ops marked once per step (an
// update, so gradients accumulate).
//
//   ninja -C <build> simulator_plan_benchmark && <build>/service/engine/sim/simulator_plan_benchmark
//
// Every benchmark reports `ns_per_unrolled_op` (mean CPU time / (M × ops)) and `x_per_op_vs_m1`: that
// figure divided by the same figure at M = 1, measured in the same process (the simulator's cost must grow
// linearly with M × (ops + edges): the ratio stays near 1). CPU time of the thread, not wall time.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <memory>

#include "benchmark/benchmark.h"
#include "service/engine/model/model.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/sim/simulator.h"
#include "tests/testutil/random_graph.h"

namespace placement::engine {
namespace {

constexpr int32_t kOps = 100'000;
constexpr int32_t kDevices = 8;

// The request, with the last ~2 % of its ops (in generation order: the deepest layers) once per step.
v1::PlaceRequest BaseRequest(bool once_ops) {
  testutil::RandomGraphOptions options;
  options.num_ops = kOps;
  options.avg_out_degree = 3.0;
  options.layer_width = 100;
  options.num_devices = kDevices;
  options.num_nodes = 2;
  options.scramble_names = false;
  options.device_memory_bytes = int64_t{1} << 48;
  options.seed = 2024;
  v1::PlaceRequest request = testutil::RandomLayeredRequest(options);
  if (once_ops) {
    for (int32_t i = kOps - kOps / 50; i < kOps; ++i) {
      request.mutable_graph()->mutable_ops(i)->set_once_per_step(true);
    }
  }
  return request;
}

const Model& PlanModel(int32_t microbatches, bool once_ops) {
  static auto* models = new std::map<std::pair<int32_t, bool>, std::unique_ptr<Model>>();
  std::unique_ptr<Model>& slot = (*models)[{microbatches, once_ops}];
  if (!slot) {
    v1::PlaceRequest request = BaseRequest(once_ops);
    request.mutable_options()->set_microbatches(microbatches);
    absl::StatusOr<Model> built = BuildModel(request);
    if (!built.ok()) {
      std::fprintf(stderr, "BuildModel failed: %s\n", built.status().ToString().c_str());
      std::abort();
    }
    slot = std::make_unique<Model>(*std::move(built));
  }
  return *slot;
}

Assignment BlockAssignment(const Model& model) {
  Assignment a(model.num_ops());
  const int64_t n = model.num_ops();
  for (int64_t i = 0; i < n; ++i) a[model.topo_order[i]] = static_cast<DeviceId>(i * kDevices / n);
  return a;
}

double ThreadCpuSeconds() {
  timespec now;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

// ns per unrolled op of one configuration: the mean over `state`'s iterations.
double MeasureNsPerUnrolledOp(benchmark::State* state, const Model& model, int32_t window) {
  Simulator sim(model);
  const Assignment assignment = BlockAssignment(model);
  SimOptions options;
  options.max_in_flight = window;
  sim.Run(assignment, options);  // sizes the scratch
  double total = 0;
  int64_t iterations = 0;
  if (state == nullptr) {
    for (int i = 0; i < 3; ++i) {
      const double start = ThreadCpuSeconds();
      sim.Run(assignment, options);
      total += ThreadCpuSeconds() - start;
      ++iterations;
    }
  } else {
    for (auto _ : *state) {
      const double start = ThreadCpuSeconds();
      benchmark::DoNotOptimize(sim.Run(assignment, options).makespan_ns);
      total += ThreadCpuSeconds() - start;
      ++iterations;
    }
  }
  return total / iterations * 1e9 / (static_cast<double>(model.plan.microbatches) * model.num_ops());
}

// The M = 1 figure, measured once per process.
double BaselineNsPerOp() {
  static const double ns = MeasureNsPerUnrolledOp(nullptr, PlanModel(1, false), 0);
  return ns;
}

void BM_Plan(benchmark::State& state) {
  const int32_t microbatches = static_cast<int32_t>(state.range(0));
  const int32_t window = static_cast<int32_t>(state.range(1));
  const bool once_ops = state.range(2) != 0;
  const Model& model = PlanModel(microbatches, once_ops);
  const double baseline = BaselineNsPerOp();
  const double ns = MeasureNsPerUnrolledOp(&state, model, window);
  state.counters["ns_per_unrolled_op"] = ns;
  state.counters["x_per_op_vs_m1"] = ns / baseline;
  state.counters["unrolled_ops"] = static_cast<double>(microbatches) * model.num_ops();
}

// Arguments: microbatches, window (0 = none), once ops.
BENCHMARK(BM_Plan)
    ->Args({1, 0, 0})
    ->Args({16, 0, 0})
    ->Args({16, 8, 0})
    ->Args({16, 0, 1})
    ->Args({64, 0, 0})
    ->Args({64, 8, 1})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0);

}  // namespace
}  // namespace placement::engine
