// stages_bench — training plans on the NeurIPS'20 operator and layer graphs (training), in our
// simulator: the published DP's split, PipeDream's planner's split and the human experts' splits
// (answers of msr-fiddle/dnn-partitioning, read from files; run.py makes them) against `stages`,
// `pipeline`, `pardnn` and `auto`, at K accelerators and M microbatches.
//
//   stages_bench --msr_dir=.../throughput-inputs --splits_dir=WORK/splits --experts_dir=.../human-experts
//       --devices=2,4,8 --microbatches=16,64 --out=table.md   (one command)
//
// Every case is the msr importer's request (placement_offline convert --from=msr: one node per op,
// fpgaLatency ms, size as persistent bytes, 2 GiB/s links) with its accelerators resized to K (same
// memory, maxSizePerFPGA), `microbatches` M, the window left open and one replica (a pipeline over the
// K devices, as the splits are). A split file (`<folder>-<input>_k<K>_dp.json`, `..._pipedream.json`; the
// published output format, node ids per accelerator) is scored by Evaluate, which picks its fastest
// window that fits (plans/window_search.h); algorithms run through Solve (window search included) with
// --time_limit_s each. A split that puts nodes on the CPU cannot run on the accelerator-only cluster and
// is reported as such. The table: step per case in ms, the lower bound, and auto's ratio to each
// split, with `auto`'s winning member; geometric means at the end.
#include <dirent.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/common/corpus_files.h"
#include "bench/stages/msr_stage_problem.h"
#include "placement/v1/placement.pb.h"
#include "service/importers/msr_importer.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/solve/solve.h"

ABSL_FLAG(std::string, msr_dir, "../shared/workloads/msr_dnn_partitioning/throughput-inputs",
          "The msr throughput inputs (LayerGraphs/, OperatorGraphs/)");
ABSL_FLAG(std::string, splits_dir, "", "Published DP and PipeDream splits (<stem>_k<K>_{dp,pipedream}.json)");
ABSL_FLAG(std::string, experts_dir, "../shared/workloads/msr_dnn_partitioning/human-experts",
          "The human experts' splits (<name>_training_expert.json)");
ABSL_FLAG(std::string, devices, "2,4,8", "Accelerator counts K");
ABSL_FLAG(std::string, microbatches, "16,64", "Microbatch counts M");
ABSL_FLAG(std::string, algorithms, "stages,pipeline,pardnn,auto", "Algorithms to run");
ABSL_FLAG(double, time_limit_s, 30, "Time limit per algorithm and case");
ABSL_FLAG(std::string, only, "", "Only inputs whose path contains this");
ABSL_FLAG(bool, expert_rows, true, "Add rows at the experts' K for the inputs that have an expert split");
ABSL_FLAG(std::string, out, "", "Also write the markdown table here");

namespace placement::bench {
namespace {

struct Row {
  std::string input;
  int32_t k = 0, m = 0;
  int64_t lower_bound = 0;
  std::map<std::string, int64_t> step;   // per split / algorithm; absent = not available
  std::map<std::string, std::string> note;
  std::string winner;  // auto's winning member
};

std::vector<int32_t> ParseList(const std::string& text) {
  std::vector<int32_t> values;
  for (absl::string_view piece : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int32_t v = 0;
    if (absl::SimpleAtoi(piece, &v) && v > 0) values.push_back(v);
  }
  return values;
}

std::vector<std::string> TrainingInputs(const std::string& dir) {
  std::vector<std::string> files;
  for (const char* sub : {"LayerGraphs", "OperatorGraphs"}) {
    const std::string folder = absl::StrCat(dir, "/", sub);
    DIR* d = opendir(folder.c_str());
    if (d == nullptr) continue;
    while (dirent* entry = readdir(d)) {
      const std::string name = entry->d_name;
      if (absl::StrContains(name, "training") && absl::EndsWith(name, ".json")) {
        files.push_back(absl::StrCat(folder, "/", name));
      }
    }
    closedir(d);
  }
  std::sort(files.begin(), files.end());
  return files;
}

// "LayerGraphs-resnet50_training": both folders have a resnet50_training.
std::string Stem(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const size_t parent = path.find_last_of('/', slash - 1);
  const std::string name = path.substr(slash + 1, path.size() - slash - 1 - 5);  // without ".json"
  return absl::StrCat(path.substr(parent + 1, slash - parent - 1), "-", name);
}

bool Exists(const std::string& path) { return std::ifstream(path).good(); }

// The request at K accelerators (bench/common's resizing, accelerators first), M microbatches, one
// replica, the window open.
v1::PlaceRequest Resize(const v1::PlaceRequest& imported, int32_t k, int32_t m) {
  v1::PlaceRequest request = ResizeCluster(imported, k, /*memory_bytes=*/0);
  v1::PlacementOptions* options = request.mutable_options();
  options->set_microbatches(m);
  options->set_max_in_flight(0);
  options->set_data_parallel(1);
  return request;
}

// The step of a split file on `request` (Evaluate: its best window), or a note why not.
std::optional<int64_t> EvaluateSplit(const MsrInput& input, const v1::PlaceRequest& request,
                                     const std::string& path, int32_t k, std::string* note) {
  absl::StatusOr<std::vector<int32_t>> device_of_node = ReadMsrSplit(input, path);
  if (!device_of_node.ok()) {
    *note = std::string(device_of_node.status().message());
    return std::nullopt;
  }
  v1::EvaluateRequest evaluate;
  *evaluate.mutable_graph() = request.graph();
  *evaluate.mutable_cluster() = request.cluster();
  *evaluate.mutable_options() = request.options();
  for (const int32_t d : *device_of_node) {
    if (d <= 0 || d > k) {
      *note = d == 0 ? "uses the CPU" : "incomplete or too many devices";
      return std::nullopt;
    }
    evaluate.add_device(d - 1);
  }
  absl::StatusOr<v1::EvaluateResponse> response = engine::Evaluate(evaluate);
  if (!response.ok()) {
    *note = std::string(response.status().message());
    return std::nullopt;
  }
  if (response->placement().outcome() != v1::FEASIBLE) *note = "infeasible";
  return response->placement().metrics().makespan_ns();
}

std::string Ms(std::optional<int64_t> ns) {
  return ns ? absl::StrFormat("%.2f", static_cast<double>(*ns) / 1e6) : std::string("—");
}

struct Geomean {
  double log_sum = 0;
  int32_t count = 0;
  void Add(double ratio) {
    log_sum += std::log(ratio);
    ++count;
  }
  std::string Text() const {
    return count == 0 ? "—" : absl::StrFormat("%.3f (%d cases)", std::exp(log_sum / count), count);
  }
};

int Run() {
  const std::vector<int32_t> ks = ParseList(absl::GetFlag(FLAGS_devices));
  const std::vector<int32_t> ms = ParseList(absl::GetFlag(FLAGS_microbatches));
  const std::vector<std::string> algorithms =
      absl::StrSplit(absl::GetFlag(FLAGS_algorithms), ',', absl::SkipEmpty());
  const std::string splits_dir = absl::GetFlag(FLAGS_splits_dir);
  std::vector<Row> rows;
  for (const std::string& path : TrainingInputs(absl::GetFlag(FLAGS_msr_dir))) {
    if (!absl::StrContains(path, absl::GetFlag(FLAGS_only))) continue;
    absl::StatusOr<MsrInput> input = ReadMsrInput(path);
    absl::StatusOr<v1::PlaceRequest> imported = importers::ImportMsr(path, importers::ImportOptions());
    if (!input.ok() || !imported.ok()) {
      std::fprintf(stderr, "%s: cannot read\n", path.c_str());
      return 1;
    }
    const std::string stem = Stem(path);
    // The experts' split, and the K it is for.
    const std::string name = stem.substr(stem.find('-') + 1, stem.find("_training") - stem.find('-') - 1);
    const std::string expert = absl::StrCat(absl::GetFlag(FLAGS_experts_dir), "/", name, "_training_expert.json");
    int32_t expert_k = 0;
    if (Exists(expert)) {
      absl::StatusOr<std::vector<int32_t>> split = ReadMsrSplit(*input, expert);
      if (split.ok()) expert_k = *std::max_element(split->begin(), split->end());
    }
    std::vector<int32_t> case_ks = ks;
    if (absl::GetFlag(FLAGS_expert_rows) && expert_k > 0 &&
        std::find(case_ks.begin(), case_ks.end(), expert_k) == case_ks.end()) {
      case_ks.push_back(expert_k);
    }
    for (const int32_t k : case_ks) {
      for (const int32_t m : ms) {
        Row row;
        row.input = stem;
        row.k = k;
        row.m = m;
        const v1::PlaceRequest request = Resize(*imported, k, m);
        absl::StatusOr<engine::Model> model = engine::BuildModel(request);
        if (!model.ok()) {
          std::fprintf(stderr, "%s: %s\n", stem.c_str(), std::string(model.status().message()).c_str());
          return 1;
        }
        auto split = [&](const std::string& label, const std::string& file) {
          if (!Exists(file)) return;
          std::string note;
          std::optional<int64_t> step = EvaluateSplit(*input, request, file, k, &note);
          if (step) row.step[label] = *step;
          if (!note.empty()) row.note[label] = note;
        };
        if (!splits_dir.empty()) {
          split("dp", absl::StrCat(splits_dir, "/", stem, "_k", k, "_dp.json"));
          split("pipedream", absl::StrCat(splits_dir, "/", stem, "_k", k, "_pipedream.json"));
        }
        if (k == expert_k) split("experts", expert);
        for (const std::string& algorithm : algorithms) {
          v1::PlacementOptions options = request.options();
          options.set_algorithm(algorithm);
          engine::SolveContext context;
          context.deadline = absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_time_limit_s));
          absl::StatusOr<v1::Placement> placement = engine::Solve(*model, options, context);
          if (!placement.ok()) {
            row.note[algorithm] = std::string(placement.status().message());
            continue;
          }
          row.step[algorithm] = placement->metrics().makespan_ns();
          row.lower_bound = placement->metrics().lower_bound_ns();
          if (placement->outcome() != v1::FEASIBLE) row.note[algorithm] = "infeasible";
          if (algorithm == "auto") row.winner = placement->provenance().winner();
        }
        std::fprintf(stderr, "%s K=%d M=%d done\n", stem.c_str(), k, m);
        rows.push_back(std::move(row));
      }
    }
  }

  const std::vector<std::string> splits = {"dp", "pipedream", "experts"};
  std::string table = "| input | K | M | lower bound | DP split | PipeDream split | experts |";
  for (const std::string& a : algorithms) absl::StrAppend(&table, " ", a, " |");
  absl::StrAppend(&table, " auto won with | auto / DP | auto / PipeDream | auto / experts |\n|---|---:|---:|---:|---:|---:|---:|");
  for (size_t i = 0; i < algorithms.size(); ++i) absl::StrAppend(&table, "---:|");
  absl::StrAppend(&table, "---|---:|---:|---:|\n");
  std::map<std::string, Geomean> geomean;
  std::map<std::string, int32_t> wins;
  std::vector<std::string> notes;
  for (const Row& row : rows) {
    auto get = [&](const std::string& key) -> std::optional<int64_t> {
      const auto it = row.step.find(key);
      return it == row.step.end() ? std::nullopt : std::optional<int64_t>(it->second);
    };
    absl::StrAppend(&table, "| ", row.input, " | ", row.k, " | ", row.m, " | ", Ms(row.lower_bound));
    for (const std::string& s : splits) absl::StrAppend(&table, " | ", Ms(get(s)));
    for (const std::string& a : algorithms) absl::StrAppend(&table, " | ", Ms(get(a)));
    absl::StrAppend(&table, " | ", row.winner.empty() ? "—" : row.winner);
    for (const std::string& s : splits) {
      const std::optional<int64_t> base = get(s), ours = get("auto");
      if (base && ours && *base > 0) {
        const double ratio = static_cast<double>(*ours) / static_cast<double>(*base);
        geomean[s].Add(ratio);
        absl::StrAppend(&table, " | ", absl::StrFormat("%.3f", ratio));
      } else {
        absl::StrAppend(&table, " | —");
      }
    }
    absl::StrAppend(&table, " |\n");
    if (!row.winner.empty()) ++wins[row.winner];
    for (const auto& [what, note] : row.note) {
      notes.push_back(absl::StrCat(row.input, " K=", row.k, " M=", row.m, " ", what, ": ", note));
    }
  }
  absl::StrAppend(&table, "\nGeometric means: auto / DP split ", geomean["dp"].Text(), "; auto / PipeDream split ",
                  geomean["pipedream"].Text(), "; auto / experts ", geomean["experts"].Text(), ".\n");
  std::vector<std::string> won;
  for (const auto& [member, count] : wins) won.push_back(absl::StrCat(member, " ", count));
  absl::StrAppend(&table, "auto's winning member: ", absl::StrJoin(won, ", "), ".\n");
  if (!notes.empty()) absl::StrAppend(&table, "\nNotes:\n- ", absl::StrJoin(notes, "\n- "), "\n");
  std::fputs(table.c_str(), stdout);
  if (!absl::GetFlag(FLAGS_out).empty()) std::ofstream(absl::GetFlag(FLAGS_out)) << table;
  return 0;
}

}  // namespace
}  // namespace placement::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "stages_bench --splits_dir=DIR [--devices=2,4,8] [--microbatches=16,64] [--out=table.md]");
  absl::ParseCommandLine(argc, argv);
  return placement::bench::Run();
}
