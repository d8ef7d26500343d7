// placement_corpus — builds the benchmark corpus: every shared workload converted to a PlaceRequest,
// and the large "scaled from X" graphs, generated on demand (never committed).
//
//   placement_corpus convert-all [--workloads=DIR] [--out_dir=DIR] [--ext=.json.gz]
//       every file under ../shared/workloads (msr, pipedream, onnx at batch 32, chakra, wfcommons) with
//       the default cluster (msr: the file's own); skips cleanly when the folder is absent.
//   placement_corpus bert --msr=bert_L-12_training.json --ops=1000000 --out=bert_1m.pb
//   placement_corpus gpt2 --ops=1000000 --out=gpt2_1m.pb
//   placement_corpus rnn --layers=4 --steps=25000 --out=rnn_1m.pb
//   placement_corpus generate [--workloads=DIR] [--out_dir=DIR]
//       bert_100k, bert_1m, gpt2_100k, gpt2_1m, rnn_100k, rnn_1m (binary .pb: see README.md for why)
//   placement_corpus timing [--workloads=DIR] [--out_dir=DIR] [--ops=1000000]
//       seconds to build the scaled BERT graph, write and read it back as .pb, .json and .json.gz
//
// Every request written is first checked with BuildModel (the service's own validation).
#include <sys/stat.h>

#include <chrono>
#include <ctime>
#include <cstdio>
#include <dirent.h>
#include <functional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "service/importers/import_util.h"
#include "service/importers/importers.h"
#include "service/importers/msr_importer.h"
#include "service/importers/scaled_graphs.h"
#include "service/engine/io/message_io.h"
#include "service/engine/model/model_builder.h"

ABSL_FLAG(std::string, workloads, "",
          "Shared workloads folder (default: $PLACEMENT_SOURCE_DIR/../shared/workloads, else "
          "../shared/workloads)");
ABSL_FLAG(std::string, out_dir, "build/corpus", "Where requests are written");
ABSL_FLAG(std::string, ext, ".json.gz", "Extension of converted requests: .json, .json.gz or .pb");
ABSL_FLAG(std::string, only, "", "convert-all: only the cases whose name contains this");
ABSL_FLAG(std::string, msr, "", "msr operator graph with layerId (bert): default the BERT-L12 training "
                                "graph in --workloads");
ABSL_FLAG(std::string, out, "", "Output request file (bert, rnn)");
ABSL_FLAG(int64_t, ops, 1'000'000, "Target op count (bert, timing)");
ABSL_FLAG(bool, json, false, "timing: also time .json and .json.gz (minutes at 1M ops)");
ABSL_FLAG(int32_t, layers, 4, "rnn: layers");
ABSL_FLAG(int32_t, steps, 1000, "rnn: time steps");
ABSL_FLAG(int64_t, batch, 64, "rnn: batch size");
ABSL_FLAG(int64_t, hidden, 1024, "rnn: hidden size");

namespace placement::corpus {
namespace {

using importers::ImportOptions;

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// CPU time of this process: the machines are shared, so wall time alone overstates the cost.
double CpuSeconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

bool IsDir(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

void MakeDirs(const std::string& path) {
  std::string partial;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      if (!partial.empty()) mkdir(partial.c_str(), 0755);
    }
    if (i < path.size()) partial.push_back(path[i]);
  }
}

// Files under `dir` (recursively) whose names end in `suffix`, sorted.
std::vector<std::string> FindFiles(const std::string& dir, const std::string& suffix) {
  std::vector<std::string> out;
  std::function<void(const std::string&)> walk = [&](const std::string& d) {
    DIR* handle = opendir(d.c_str());
    if (handle == nullptr) return;
    while (dirent* entry = readdir(handle)) {
      const std::string name = entry->d_name;
      if (name == "." || name == "..") continue;
      const std::string path = d + "/" + name;
      if (IsDir(path)) {
        walk(path);
      } else if (absl::EndsWith(name, suffix)) {
        out.push_back(path);
      }
    }
    closedir(handle);
  };
  walk(dir);
  std::sort(out.begin(), out.end());
  return out;
}

std::string WorkloadsDir() {
  std::string dir = absl::GetFlag(FLAGS_workloads);
  if (!dir.empty()) return dir;
  if (const char* source = std::getenv("PLACEMENT_SOURCE_DIR"); source != nullptr && *source) {
    return absl::StrCat(source, "/../shared/workloads");
  }
  return "../shared/workloads";
}

std::string BaseName(const std::string& path) { return path.substr(path.rfind('/') + 1); }

// Validates and writes; prints one table row.
bool Emit(const std::string& name, const v1::PlaceRequest& request, const std::string& path,
          double import_seconds) {
  absl::StatusOr<engine::Model> model = engine::BuildModel(request);
  if (!model.ok()) {
    std::printf("%-58s INVALID: %s\n", name.c_str(), std::string(model.status().message()).c_str());
    return false;
  }
  absl::Status written = engine::WriteMessageFile(request, path);
  if (!written.ok()) {
    std::printf("%-58s WRITE FAILED: %s\n", name.c_str(), std::string(written.message()).c_str());
    return false;
  }
  std::printf("%-58s %9d ops %9d edges %4d devices %8.3f s\n", name.c_str(), request.graph().ops_size(),
              request.graph().edges_size(), request.cluster().devices_size(), import_seconds);
  return true;
}

int ConvertAll() {
  const std::string workloads = WorkloadsDir();
  if (!IsDir(workloads)) {
    std::printf("SKIPPED: no shared workloads at %s\n", workloads.c_str());
    return 0;
  }
  const std::string out_dir = absl::GetFlag(FLAGS_out_dir);
  const std::string ext = absl::GetFlag(FLAGS_ext);
  MakeDirs(out_dir);
  struct Job {
    std::string name, format, path;
    ImportOptions options;
  };
  std::vector<Job> jobs;
  for (const std::string& path : FindFiles(workloads + "/msr_dnn_partitioning", ".json")) {
    if (absl::StrContains(path, "human-experts")) continue;  // placements, not graphs
    std::string name = path.substr(workloads.size() + 1 + std::string("msr_dnn_partitioning/").size());
    std::replace(name.begin(), name.end(), '/', '-');
    jobs.push_back({"msr-" + std::string(absl::StripSuffix(name, ".json")), "msr", path, {}});
  }
  for (const std::string& path : FindFiles(workloads + "/pipedream_profiles", "graph.txt")) {
    const std::string model = BaseName(path.substr(0, path.rfind('/')));
    jobs.push_back({"pipedream-" + model, "pipedream", path, {}});
  }
  for (const std::string& path : FindFiles(workloads + "/onnx_light_models", ".onnx")) {
    ImportOptions options;
    options.onnx_batch_size = 32;
    std::string model(absl::StripSuffix(absl::StripPrefix(BaseName(path), "light_"), ".onnx"));
    jobs.push_back({"onnx-" + model + "-b32", "onnx", path, options});
  }
  const std::string traces = workloads + "/pytorch_execution_traces_param";
  if (IsDir(traces)) {
    ImportOptions with_kineto;
    with_kineto.kineto_path = traces + "/resnet_kineto_pid23442.json.gz";
    jobs.push_back({"chakra-resnet18-kineto", "chakra", traces + "/resnet_et_2023_pid23442.json.gz",
                    with_kineto});
    jobs.push_back({"chakra-resnet50-ddp", "chakra", traces + "/resnet_et_2024_chakra.json.gz", {}});
    jobs.push_back({"chakra-gpt2", "chakra", traces + "/hf_GPT2_et.json.tar.gz", {}});
  }
  for (const std::string& path : FindFiles(workloads + "/wfcommons", ".json.gz")) {
    jobs.push_back({"wfcommons-" + std::string(absl::StripSuffix(BaseName(path), ".json.gz")),
                    "wfcommons", path, {}});
  }
  int failures = 0;
  const std::string only = absl::GetFlag(FLAGS_only);
  for (const Job& job : jobs) {
    if (!only.empty() && !absl::StrContains(job.name, only)) continue;
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<v1::PlaceRequest> request =
        importers::Import(job.format, job.path, job.options);
    const double seconds = Seconds(start);
    if (!request.ok()) {
      std::printf("%-58s FAILED: %s\n", job.name.c_str(),
                  std::string(request.status().message()).c_str());
      ++failures;
      continue;
    }
    if (!Emit(job.name, *request, out_dir + "/" + job.name + ext, seconds)) ++failures;
  }
  std::printf("%d failed\n", failures);
  return failures == 0 ? 0 : 1;
}

// Devices for a scaled graph: 16 for the ~100K-op cases, 64 for the ~1M-op ones (memory sized by
// ClusterForGraph).
int32_t DevicesFor(int64_t ops) { return ops < 500'000 ? 16 : 64; }

absl::StatusOr<v1::PlaceRequest> ScaledBert(int64_t target_ops) {
  std::string path = absl::GetFlag(FLAGS_msr);
  if (path.empty()) {
    path = WorkloadsDir() + "/msr_dnn_partitioning/throughput-inputs/OperatorGraphs/bert_L-12_training.json";
  }
  absl::StatusOr<std::string> text = importers::ReadInputFile(path);
  if (!text.ok()) return text.status();
  std::vector<int64_t> layer_of_op;
  absl::StatusOr<v1::PlaceRequest> bert =
      importers::ImportMsrText(path, *text, ImportOptions(), &layer_of_op);
  if (!bert.ok()) return bert.status();
  importers::StackSpec spec;
  spec.target_ops = target_ops;
  absl::StatusOr<v1::Graph> graph = importers::StackLayers(bert->graph(), layer_of_op, spec);
  if (!graph.ok()) return graph.status();
  v1::PlaceRequest request;
  *request.mutable_cluster() = importers::ClusterForGraph(
      *graph, DevicesFor(graph->ops_size()), bert->cluster().devices(0).memory_bytes());
  *request.mutable_graph() = std::move(*graph);
  return request;
}

// GPT-2 (36 blocks) from the param execution trace, with the middle block copied.
absl::StatusOr<v1::PlaceRequest> ScaledGpt2(int64_t target_ops) {
  const std::string path = WorkloadsDir() + "/pytorch_execution_traces_param/hf_GPT2_et.json.tar.gz";
  absl::StatusOr<v1::PlaceRequest> gpt2 = importers::Import("chakra", path, ImportOptions());
  if (!gpt2.ok()) return gpt2.status();
  int64_t blocks = 0;
  absl::StatusOr<std::vector<int64_t>> layer_of_op =
      importers::LabelTransformerBlocks(gpt2->graph(), &blocks);
  if (!layer_of_op.ok()) return layer_of_op.status();
  importers::StackSpec spec;
  spec.first_layer = 1;
  spec.last_layer = blocks;
  spec.template_layer = blocks / 2;
  spec.target_ops = target_ops;
  absl::StatusOr<v1::Graph> graph = importers::StackLayers(gpt2->graph(), *layer_of_op, spec);
  if (!graph.ok()) return graph.status();
  v1::PlaceRequest request;
  *request.mutable_cluster() = importers::ClusterForGraph(
      *graph, DevicesFor(graph->ops_size()), int64_t{16} << 30);
  *request.mutable_graph() = std::move(*graph);
  return request;
}

v1::PlaceRequest Rnn(int32_t layers, int32_t steps) {
  importers::RnnSpec spec;
  spec.layers = layers;
  spec.steps = steps;
  spec.batch = absl::GetFlag(FLAGS_batch);
  spec.hidden = absl::GetFlag(FLAGS_hidden);
  v1::PlaceRequest request;
  *request.mutable_graph() = importers::UnrolledRnn(spec);
  *request.mutable_cluster() = importers::ClusterForGraph(
      request.graph(), DevicesFor(request.graph().ops_size()), int64_t{16} << 30);
  return request;
}

int Bert() {
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) {
    std::fprintf(stderr, "bert: --out is required\n");
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<v1::PlaceRequest> request = ScaledBert(absl::GetFlag(FLAGS_ops));
  if (!request.ok()) {
    std::fprintf(stderr, "%s\n", std::string(request.status().message()).c_str());
    return 1;
  }
  return Emit("bert (scaled from msr BERT-L12 training)", *request, out, Seconds(start)) ? 0 : 1;
}

int Gpt2Command() {
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) {
    std::fprintf(stderr, "gpt2: --out is required\n");
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<v1::PlaceRequest> request = ScaledGpt2(absl::GetFlag(FLAGS_ops));
  if (!request.ok()) {
    std::fprintf(stderr, "%s\n", std::string(request.status().message()).c_str());
    return 1;
  }
  return Emit("gpt2 (scaled from the param GPT-2 execution trace)", *request, out, Seconds(start)) ? 0
                                                                                                   : 1;
}

int RnnCommand() {
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) {
    std::fprintf(stderr, "rnn: --out is required\n");
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  v1::PlaceRequest request = Rnn(absl::GetFlag(FLAGS_layers), absl::GetFlag(FLAGS_steps));
  return Emit("rnn (synthetic unrolled LSTM)", request, out, Seconds(start)) ? 0 : 1;
}

int Generate() {
  const std::string out_dir = absl::GetFlag(FLAGS_out_dir);
  MakeDirs(out_dir);
  int failures = 0;
  for (int64_t ops : {int64_t{100'000}, int64_t{1'000'000}}) {
    const std::string label = ops == 100'000 ? "100k" : "1m";
    auto start = std::chrono::steady_clock::now();
    absl::StatusOr<v1::PlaceRequest> bert = ScaledBert(ops);
    if (!bert.ok()) {
      std::printf("bert_%s FAILED: %s\n", label.c_str(), std::string(bert.status().message()).c_str());
      ++failures;
    } else if (!Emit("bert_" + label, *bert, out_dir + "/bert_" + label + ".pb", Seconds(start))) {
      ++failures;
    }
    start = std::chrono::steady_clock::now();
    absl::StatusOr<v1::PlaceRequest> gpt2 = ScaledGpt2(ops);
    if (!gpt2.ok()) {
      std::printf("gpt2_%s FAILED: %s\n", label.c_str(), std::string(gpt2.status().message()).c_str());
      ++failures;
    } else if (!Emit("gpt2_" + label, *gpt2, out_dir + "/gpt2_" + label + ".pb", Seconds(start))) {
      ++failures;
    }
    start = std::chrono::steady_clock::now();
    // 4 layers: 10 ops per step (8 cells, loss and its backward).
    v1::PlaceRequest rnn = Rnn(4, static_cast<int32_t>(ops / 10));
    if (!Emit("rnn_" + label, rnn, out_dir + "/rnn_" + label + ".pb", Seconds(start))) ++failures;
  }
  return failures == 0 ? 0 : 1;
}

int Timing() {
  const std::string out_dir = absl::GetFlag(FLAGS_out_dir);
  MakeDirs(out_dir);
  auto start = std::chrono::steady_clock::now();
  double cpu = CpuSeconds();
  absl::StatusOr<v1::PlaceRequest> request = ScaledBert(absl::GetFlag(FLAGS_ops));
  if (!request.ok()) {
    std::fprintf(stderr, "%s\n", std::string(request.status().message()).c_str());
    return 1;
  }
  std::printf("build scaled BERT (%d ops, %d edges): %.2f s wall, %.2f s CPU\n",
              request->graph().ops_size(), request->graph().edges_size(), Seconds(start),
              CpuSeconds() - cpu);
  start = std::chrono::steady_clock::now();
  cpu = CpuSeconds();
  absl::StatusOr<engine::Model> model = engine::BuildModel(*request);
  std::printf("BuildModel (validate + compact model): %.2f s wall, %.2f s CPU%s\n", Seconds(start),
              CpuSeconds() - cpu, model.ok() ? "" : " (INVALID)");
  std::vector<const char*> extensions = {".pb", ".pb.gz"};
  if (absl::GetFlag(FLAGS_json)) {
    extensions.push_back(".json");
    extensions.push_back(".json.gz");
  }
  for (const char* ext : extensions) {
    const std::string path = absl::StrCat(out_dir, "/timing_bert", ext);
    start = std::chrono::steady_clock::now();
    cpu = CpuSeconds();
    absl::Status written = engine::WriteMessageFile(*request, path);
    const double write_s = Seconds(start), write_cpu = CpuSeconds() - cpu;
    struct stat info {};
    stat(path.c_str(), &info);
    start = std::chrono::steady_clock::now();
    cpu = CpuSeconds();
    v1::PlaceRequest back;
    absl::Status read = engine::ReadMessageFile(path, back);
    const double read_s = Seconds(start), read_cpu = CpuSeconds() - cpu;
    std::printf("%-9s write %6.2f s (%6.2f CPU)  read %6.2f s (%6.2f CPU)  %8.1f MiB  %s\n", ext,
                write_s, write_cpu, read_s, read_cpu, static_cast<double>(info.st_size) / (1 << 20),
                written.ok() && read.ok() && back.graph().ops_size() == request->graph().ops_size()
                    ? "ok"
                    : "FAILED");
    std::remove(path.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace placement::corpus

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "placement_corpus convert-all|bert|gpt2|rnn|generate|timing [flags]; see bench/corpus/README.md");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() < 2) {
    std::fprintf(stderr, "usage: placement_corpus convert-all|bert|gpt2|rnn|generate|timing [flags]\n");
    return 2;
  }
  const std::string verb = args[1];
  if (verb == "convert-all") return placement::corpus::ConvertAll();
  if (verb == "bert") return placement::corpus::Bert();
  if (verb == "rnn") return placement::corpus::RnnCommand();
  if (verb == "gpt2") return placement::corpus::Gpt2Command();
  if (verb == "generate") return placement::corpus::Generate();
  if (verb == "timing") return placement::corpus::Timing();
  std::fprintf(stderr, "unknown verb '%s'\n", verb.c_str());
  return 2;
}
