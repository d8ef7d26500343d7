// Speed of the pardnn partitioner (and of `auto`, the portfolio around it, and m_etf for scale) on large
// graphs with K = 8 devices, against one simulation of the same graph (the `x_sim` counter: CPU time /
// one Simulator::Run CPU time, measured in the same process, so the ratio survives a noisy shared
// machine). Benchmark names: BM_<graph>/<ops> for pardnn, BM_Auto<graph>/<ops> for auto,
// BM_MEtf<graph>/<ops> for m_etf.
//
//   ninja -C <build> pardnn_benchmark && <build>/bench/pardnn/pardnn_benchmark
//
// Graphs:
//   Layered/N     synthetic: layered random DAG (tests/testutil/random_graph.h), N ops, ~3N edges;
//                 memory ample (1 PiB per device), so the time is stage 1 + refinement.
//   LayeredTight/N  the same with memory set to 1.25 x (persistent + half the outputs) / 8 per device,
//                 so stage 2 (memory repair) runs as well.
//   BertScaled/N  scaled from msr BERT-L12 training (layer 6 replicated, importers/scaled_graphs.h),
//                 needs ../shared/workloads (skipped otherwise); memory ample.
//   RnnScaled/N   synthetic structure, roofline costs: an unrolled 4-layer LSTM training step
//                 (importers/scaled_graphs.h); memory ample.
//
// BM_RepairRequest/S: the memory stage alone (RepairMemory, 8 rounds, from everything on the first
// device) on the request named by $PLACEMENT_REPAIR_REQUEST (skipped when unset), with its exact
// shortcuts off (S = 0) and on (S = 1): the cpu_s ratio of the two rows is the speed-up, and both rows
// must show the same moves, overflow and makespan. The tight-memory corpus writes such requests
// (bench/tight_memory/README.md, `placement_compare_bench --dump_dir`).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "service/importers/import_options.h"
#include "service/importers/msr_importer.h"
#include "service/importers/scaled_graphs.h"
#include "service/engine/io/message_io.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/pardnn/pardnn_partitioner.h"
#include "service/engine/partition/simple_partitioners.h"
#include "service/engine/repair/memory_repair.h"
#include "bench/pardnn/quality_cases.h"
#include "service/engine/sim/simulator.h"
#include "service/engine/solve/algorithm_registry.h"
#include "tests/testutil/random_graph.h"

namespace placement::engine {
namespace {

constexpr int32_t kDevices = 8;
constexpr int64_t kAmpleMemory = int64_t{1} << 50;  // 1 PiB, the model's limit

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

v1::Cluster EightDevices(int64_t memory_bytes) {
  v1::Cluster cluster = importers::DefaultCluster();
  const v1::Device prototype = cluster.devices(0);
  cluster.clear_devices();
  for (int d = 0; d < kDevices; ++d) {
    v1::Device* device = cluster.add_devices();
    *device = prototype;
    device->set_name(absl::StrCat("gpu", d));
    device->set_node(d < kDevices / 2 ? "node0" : "node1");
    device->set_memory_bytes(memory_bytes);
  }
  return cluster;
}

std::unique_ptr<Model> Build(const v1::PlaceRequest& request) {
  absl::StatusOr<Model> model = BuildModel(request);
  if (!model.ok()) {
    std::fprintf(stderr, "BuildModel: %s\n", model.status().ToString().c_str());
    std::abort();
  }
  return std::make_unique<Model>(*std::move(model));
}

void SetTightMemory(v1::PlaceRequest* request) {
  int64_t persistent = 0, outputs = 0;
  for (const v1::Op& op : request->graph().ops()) {
    persistent += op.persistent_bytes();
    outputs += op.output_bytes();
  }
  const int64_t memory = static_cast<int64_t>(1.25 * (persistent + outputs / 2.0) / kDevices);
  for (v1::Device& d : *request->mutable_cluster()->mutable_devices()) d.set_memory_bytes(memory);
}

// Graphs are built once per (kind, size) and kept for the process.
const Model* GetModel(const std::string& kind, int64_t ops) {
  static auto* cache = new std::map<std::string, std::unique_ptr<Model>>();
  const std::string key = absl::StrCat(kind, "/", ops);
  auto it = cache->find(key);
  if (it != cache->end()) return it->second.get();
  v1::PlaceRequest request;
  if (kind == "Layered" || kind == "LayeredTight") {
    testutil::RandomGraphOptions options;
    options.num_ops = static_cast<int32_t>(ops);
    options.avg_out_degree = 3.0;
    options.layer_width = 1000;
    options.num_devices = kDevices;
    options.num_nodes = 2;
    options.device_memory_bytes = kAmpleMemory;
    options.seed = 2024;
    request = testutil::RandomLayeredRequest(options);
    if (kind == "LayeredTight") SetTightMemory(&request);
  } else if (kind == "BertScaled") {
    const std::string shared = pardnn::FindSharedDir();
    if (shared.empty()) return nullptr;
    const std::string path =
        shared + "/workloads/msr_dnn_partitioning/throughput-inputs/OperatorGraphs/"
                 "bert_L-12_training.json";
    absl::StatusOr<std::string> text = ReadFileBytes(path);
    if (!text.ok()) return nullptr;
    std::vector<int64_t> layer_of_op;
    absl::StatusOr<v1::PlaceRequest> bert =
        importers::ImportMsrText(path, *text, importers::ImportOptions(), &layer_of_op);
    if (!bert.ok()) return nullptr;
    importers::StackSpec spec;
    spec.target_ops = ops;
    absl::StatusOr<v1::Graph> graph = importers::StackLayers(bert->graph(), layer_of_op, spec);
    if (!graph.ok()) return nullptr;
    *request.mutable_graph() = *std::move(graph);
    *request.mutable_cluster() = EightDevices(kAmpleMemory);
  } else if (kind == "RnnScaled") {
    importers::RnnSpec spec;
    spec.layers = 4;
    // ops = layers * steps * 2 + steps * 2 + layers
    spec.steps = static_cast<int32_t>((ops - spec.layers) / (2 * spec.layers + 2));
    *request.mutable_graph() = importers::UnrolledRnn(spec);
    *request.mutable_cluster() = EightDevices(kAmpleMemory);
  }
  std::unique_ptr<Model> model = Build(request);
  const Model* raw = model.get();
  (*cache)[key] = std::move(model);
  return raw;
}

void RunAlgorithm(benchmark::State& state, const std::string& kind, const std::string& algorithm) {
  const Model* model = GetModel(kind, state.range(0));
  if (model == nullptr) {
    state.SkipWithError("../shared/workloads not found");
    return;
  }
  // The reference simulation runs the algorithm's own answer (a realistic mix of local and crossing
  // edges).
  const Partitioner* partitioner = AlgorithmRegistry::Default().Find(algorithm).value();
  Simulator sim(*model);
  double cpu = 0.0, wall = 0.0;
  Assignment answer;
  for (auto _ : state) {
    const double cpu0 = ThreadCpuSeconds();
    const auto wall0 = std::chrono::steady_clock::now();
    absl::StatusOr<PartitionResult> result = partitioner->Partition(*model, SolveContext());
    cpu += ThreadCpuSeconds() - cpu0;
    wall += std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    if (!result.ok()) {
      state.SkipWithError(std::string(result.status().message()).c_str());
      return;
    }
    answer = std::move(result->assignment);
  }
  const double iterations = static_cast<double>(state.iterations());
  double sim_cpu = 1e300;
  for (int i = 0; i < 3; ++i) {
    const double cpu0 = ThreadCpuSeconds();
    benchmark::DoNotOptimize(sim.Run(answer).makespan_ns);
    sim_cpu = std::min(sim_cpu, ThreadCpuSeconds() - cpu0);
  }
  const SimResult& r = sim.Run(answer);
  state.counters["ops"] = model->num_ops();
  state.counters["edges"] = static_cast<double>(model->num_edges());
  state.counters["cpu_s"] = cpu / iterations;
  state.counters["wall_s"] = wall / iterations;
  state.counters["sim_cpu_s"] = sim_cpu;
  state.counters["x_sim"] = cpu / iterations / sim_cpu;
  state.counters["feasible"] = r.MemoryFits(*model) ? 1 : 0;
  state.counters["ratio_to_lb"] =
      static_cast<double>(r.makespan_ns) / static_cast<double>(LowerBoundNs(*model));
}

void BM_RepairRequest(benchmark::State& state) {
  const char* path = std::getenv("PLACEMENT_REPAIR_REQUEST");
  if (path == nullptr || *path == '\0') {
    state.SkipWithError("PLACEMENT_REPAIR_REQUEST is not set");
    return;
  }
  absl::StatusOr<v1::PlaceRequest> request = ReadMessageFile<v1::PlaceRequest>(path);
  if (!request.ok()) {
    state.SkipWithError(std::string(request.status().message()).c_str());
    return;
  }
  const std::unique_ptr<Model> model = Build(*request);
  RepairOptions options;
  options.max_rounds = 8;
  options.max_stalled_rounds = options.max_rounds;
  options.reuse_move_estimates = state.range(0) != 0;
  options.bound_room_checks = state.range(0) != 0;
  double cpu = 0;
  RepairOutcome outcome;
  for (auto _ : state) {
    Assignment assignment = SingleDeviceAssignment(*model);
    const double cpu0 = ThreadCpuSeconds();
    outcome = RepairMemory(*model, SolveContext(), options, assignment);
    cpu += ThreadCpuSeconds() - cpu0;
  }
  state.counters["ops"] = model->num_ops();
  state.counters["cpu_s"] = cpu / static_cast<double>(state.iterations());
  state.counters["rounds"] = outcome.rounds;
  state.counters["moves"] = outcome.moves;
  state.counters["overflow_MB"] = static_cast<double>(outcome.overflow_bytes) / 1e6;
  state.counters["makespan_ms"] = static_cast<double>(outcome.makespan_ns) / 1e6;
  state.counters["estimates"] = static_cast<double>(outcome.move_estimates);
  state.counters["room_checks"] = static_cast<double>(outcome.room_checks);
}

void BM_Layered(benchmark::State& state) { RunAlgorithm(state, "Layered", "pardnn"); }
void BM_LayeredTight(benchmark::State& state) { RunAlgorithm(state, "LayeredTight", "pardnn"); }
void BM_BertScaled(benchmark::State& state) { RunAlgorithm(state, "BertScaled", "pardnn"); }
void BM_RnnScaled(benchmark::State& state) { RunAlgorithm(state, "RnnScaled", "pardnn"); }
void BM_AutoLayered(benchmark::State& state) { RunAlgorithm(state, "Layered", "auto"); }
void BM_AutoBertScaled(benchmark::State& state) { RunAlgorithm(state, "BertScaled", "auto"); }
void BM_AutoRnnScaled(benchmark::State& state) { RunAlgorithm(state, "RnnScaled", "auto"); }
void BM_MEtfBertScaled(benchmark::State& state) { RunAlgorithm(state, "BertScaled", "m_etf"); }
void BM_MEtfRnnScaled(benchmark::State& state) { RunAlgorithm(state, "RnnScaled", "m_etf"); }
void BM_MEtfLayered(benchmark::State& state) { RunAlgorithm(state, "Layered", "m_etf"); }

BENCHMARK(BM_Layered)->Arg(100'000)->Arg(1'000'000)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
BENCHMARK(BM_LayeredTight)->Arg(100'000)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
BENCHMARK(BM_BertScaled)->Arg(100'000)->Arg(1'000'000)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
BENCHMARK(BM_RnnScaled)->Arg(100'000)->Arg(1'000'000)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
BENCHMARK(BM_AutoLayered)->Arg(100'000)->Arg(1'000'000)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
BENCHMARK(BM_AutoBertScaled)->Arg(100'000)->Arg(1'000'000)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
BENCHMARK(BM_AutoRnnScaled)->Arg(100'000)->Arg(1'000'000)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
BENCHMARK(BM_MEtfBertScaled)->Arg(100'000)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
BENCHMARK(BM_RepairRequest)->Arg(0)->Arg(1)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
BENCHMARK(BM_MEtfRnnScaled)->Arg(100'000)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
// auto's second member alone on the layered DAG (where its answer ends auto's run at the bound).
BENCHMARK(BM_MEtfLayered)->Arg(1'000'000)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

}  // namespace
}  // namespace placement::engine
