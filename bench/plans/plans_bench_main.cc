// placement_plans_bench — training plans (api.md §2.1) over a corpus of training steps: what each
// algorithm's plan delivers against one device at the same number of microbatches, against the lower
// bound, and whether memory still fits when it binds.
//
// For every plan request under --corpus (a request whose options.microbatches > 1, e.g. written by
// `python3 -m placement.torch_export --microbatches=M`), every K in --devices and every memory regime in
// --memory, every algorithm in --algorithms runs through the engine's Solve (the same path as
// `placement_offline place`) and the simulator scores it. A regime is `source` (the request's memory) or a
// fraction f of the one-device peak: every accelerator gets f × the peak memory of the whole one-batch step
// on one device, where the one-batch step is the sibling request NAME.batch.* of NAME.mbM.* when present
// (the same model exported at the full batch, one microbatch), else the plan itself run as one batch.
//
//   placement_plans_bench --corpus=build/plans_corpus --devices=4 --memory=source,0.45
//       --algorithms=auto,stages,pipeline,pardnn --out=bench/plans/results.md
//
// Per case: one device's step (every op of every microbatch on the fastest device: nothing moves, so it
// is the sum of the op times), and per algorithm the step, step / lower bound, microbatches per second,
// the speed-up over one device at the same M (D × one device's step / step), the plan (W, D), whether it
// fits, and which member won (auto). With a sibling one-batch request the case also says whether `auto`
// found a feasible one-batch placement at that memory (the plan must then be feasible too).
#include <sys/utsname.h>

#include <algorithm>
#include <chrono>
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
#include "placement/v1/placement.pb.h"
#include "service/engine/io/message_io.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/sim/simulator.h"
#include "service/engine/solve/solve.h"

ABSL_FLAG(std::string, corpus, "build/plans_corpus",
          "Folder of requests (*.json, *.json.gz, *.pb), searched recursively; plan requests are those "
          "with options.microbatches > 1");
ABSL_FLAG(std::string, devices, "4", "Accelerator counts K to resize every cluster to (0 = as given)");
ABSL_FLAG(std::string, memory, "source,0.45",
          "Memory regimes: `source`, or a fraction of the one-device peak of the one-batch step");
ABSL_FLAG(std::string, microbatches, "",
          "Comma-separated M to run every plan request with (default: the request's own)");
ABSL_FLAG(std::string, algorithms, "auto,pipeline,pardnn", "Comma-separated algorithms");
ABSL_FLAG(double, time_limit_s, 60, "Time limit per algorithm and case, in seconds");
ABSL_FLAG(std::string, only, "", "Only cases whose file path contains this");
ABSL_FLAG(std::string, out, "", "Markdown report to write (default: standard output)");

namespace placement::bench {
namespace {

struct Row {
  std::string algorithm;
  bool ok = false;
  std::string error;
  bool feasible = false;
  int64_t step_ns = 0;
  int32_t window = 0;
  int32_t replicas = 0;
  double per_second = 0;
  double speed_up = 0;
  double over_bound = 0;
  std::string winner;
  double solve_s = 0;
};

struct Case {
  std::string name;
  int32_t k = 0;
  int32_t microbatches = 0;
  std::string memory;
  int64_t ops = 0;
  int64_t lower_bound_ns = 0;
  int64_t one_device_ns = 0;
  std::optional<bool> one_batch_feasible;  // auto on the one-batch step at this memory
  std::vector<Row> rows;
  std::string error;
};

std::vector<std::string> SplitList(const std::string& list) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    out.emplace_back(part);
  }
  return out;
}

// The whole step on the fastest device: the sum of every instance's time (api.md §2: one device runs
// one op at a time and never idles while one is ready, and nothing is transferred).
int64_t OneDeviceStepNs(const engine::Model& model) {
  double fastest = 0;
  for (double speed : model.speed) fastest = std::max(fastest, speed);
  int64_t total = 0;
  for (engine::OpId v = 0; v < model.num_ops(); ++v) {
    total += engine::ScaledComputeNs(model.compute_ns[v], fastest) *
             (model.is_once(v) ? 1 : std::max(1, model.plan.microbatches));
  }
  return total;
}

// Peak memory of the whole step on device 0 of `request` (its plan as given).
int64_t OneDevicePeakBytes(const v1::PlaceRequest& request) {
  absl::StatusOr<engine::Model> model = engine::BuildModel(request);
  if (!model.ok()) return 0;
  engine::Simulator simulator(*model);
  return simulator.Run(engine::Assignment(model->num_ops(), 0)).peak_memory_bytes[0];
}

Row RunAlgorithm(const engine::Model& model, const v1::PlaceRequest& request, const std::string& algorithm,
                 int64_t one_device_ns) {
  Row row;
  row.algorithm = algorithm;
  v1::PlacementOptions options = request.options();
  options.set_algorithm(algorithm);
  engine::SolveContext context;
  context.deadline = absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_time_limit_s));
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<v1::Placement> placement = engine::Solve(model, options, context);
  row.solve_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!placement.ok()) {
    row.error = std::string(placement.status().message());
    return row;
  }
  row.ok = true;
  row.feasible = placement->outcome() == v1::FEASIBLE;
  row.step_ns = placement->metrics().makespan_ns();
  row.window = placement->plan().max_in_flight();
  row.replicas = placement->plan().data_parallel();
  row.per_second = placement->metrics().microbatches_per_second();
  if (row.step_ns > 0) {
    row.speed_up = static_cast<double>(one_device_ns) * std::max(1, row.replicas) / row.step_ns;
  }
  if (placement->metrics().lower_bound_ns() > 0) {
    row.over_bound = static_cast<double>(row.step_ns) / placement->metrics().lower_bound_ns();
  }
  row.winner = placement->provenance().winner();
  return row;
}

double Geomean(const std::vector<double>& values) {
  if (values.empty()) return 0;
  double log_sum = 0;
  for (double v : values) log_sum += std::log(v);
  return std::exp(log_sum / values.size());
}

std::string Report(const std::vector<Case>& cases, const std::vector<std::string>& algorithms) {
  std::string out = "# Training plans: what each algorithm's plan delivers\n\n";
  utsname host{};
  uname(&host);
  absl::StrAppend(&out, "Generated by `placement_plans_bench` on ", host.machine, ", ",
                  absl::FormatTime("%Y-%m-%d", absl::Now(), absl::UTCTimeZone()),
                  ". Speed-up = one device's step at the same M / the plan's step (× D); step/LB = step / "
                  "the lower bound of api.md §2.1. `x` = infeasible, `!` = error.\n\n");
  // Summary per algorithm and regime.
  std::map<std::string, std::vector<const Case*>> by_regime;
  for (const Case& c : cases) by_regime[absl::StrCat(c.memory, " M=", c.microbatches)].push_back(&c);
  absl::StrAppend(&out, "## Summary\n\n| regime | algorithm | feasible | geomean speed-up | geomean step/LB | "
                        "worst step/LB |\n|---|---|---|---|---|---|\n");
  for (const auto& [regime, list] : by_regime) {
    for (const std::string& algorithm : algorithms) {
      std::vector<double> speed_ups, over_bounds;
      int feasible = 0;
      double worst = 0;
      for (const Case* c : list) {
        for (const Row& row : c->rows) {
          if (row.algorithm != algorithm || !row.ok || !row.feasible) continue;
          ++feasible;
          speed_ups.push_back(row.speed_up);
          over_bounds.push_back(row.over_bound);
          worst = std::max(worst, row.over_bound);
        }
      }
      absl::StrAppendFormat(&out, "| %s | %s | %d / %d | %.2f | %.3f | %.3f |\n", regime, algorithm, feasible,
                            list.size(), Geomean(speed_ups), Geomean(over_bounds), worst);
    }
  }
  absl::StrAppend(&out, "\n## Cases\n\n| case | K | M | memory | ops | one device | LB |");
  for (const std::string& algorithm : algorithms) absl::StrAppend(&out, " ", algorithm, " |");
  absl::StrAppend(&out, " one batch fits |\n|---|---|---|---|---|---|---|");
  for (size_t i = 0; i < algorithms.size(); ++i) out += "---|";
  out += "---|\n";
  for (const Case& c : cases) {
    absl::StrAppendFormat(&out, "| %s | %d | %d | %s | %d | %.3f ms | %.3f ms |", c.name, c.k, c.microbatches,
                          c.memory, c.ops, c.one_device_ns / 1e6, c.lower_bound_ns / 1e6);
    for (const std::string& algorithm : algorithms) {
      const Row* found = nullptr;
      for (const Row& row : c.rows) {
        if (row.algorithm == algorithm) found = &row;
      }
      if (found == nullptr || !found->ok) {
        out += " ! |";
      } else if (!found->feasible) {
        absl::StrAppendFormat(&out, " x %.3f ms |", found->step_ns / 1e6);
      } else {
        absl::StrAppendFormat(&out, " %.2fx, %.3f LB, W %d%s%s (%.1f s) |", found->speed_up, found->over_bound,
                              found->window, found->replicas > 1 ? absl::StrCat(" D ", found->replicas) : "",
                              found->winner.empty() ? "" : absl::StrCat(", ", found->winner), found->solve_s);
      }
    }
    absl::StrAppend(&out, " ", !c.one_batch_feasible.has_value() ? "—" : (*c.one_batch_feasible ? "yes" : "no"),
                    " |\n");
  }
  return out;
}

int Main() {
  const std::string corpus = absl::GetFlag(FLAGS_corpus);
  std::vector<std::string> paths;
  FindRequests(corpus, paths);
  std::sort(paths.begin(), paths.end());
  const std::vector<std::string> algorithms = SplitList(absl::GetFlag(FLAGS_algorithms));
  std::vector<int32_t> ks;
  for (const std::string& k : SplitList(absl::GetFlag(FLAGS_devices))) ks.push_back(std::stoi(k));
  std::vector<int32_t> microbatch_counts;
  for (const std::string& m : SplitList(absl::GetFlag(FLAGS_microbatches))) {
    microbatch_counts.push_back(std::stoi(m));
  }
  // The one-batch sibling of every plan request: NAME.batch.* beside NAME.mb<M>.*.
  std::map<std::string, std::string> one_batch_of;
  for (const std::string& path : paths) {
    const std::string name = CaseName(corpus, path);
    if (absl::EndsWith(name, ".batch")) one_batch_of[name.substr(0, name.size() - 6)] = path;
  }
  std::vector<Case> cases;
  for (const std::string& path : paths) {
    if (!absl::GetFlag(FLAGS_only).empty() && !absl::StrContains(path, absl::GetFlag(FLAGS_only))) continue;
    absl::StatusOr<v1::PlaceRequest> request = engine::ReadMessageFile<v1::PlaceRequest>(path);
    if (!request.ok()) {
      std::fprintf(stderr, "%s: %s\n", path.c_str(), std::string(request.status().message()).c_str());
      continue;
    }
    if (request->options().microbatches() <= 1 && microbatch_counts.empty()) continue;
    if (absl::EndsWith(CaseName(corpus, path), ".batch")) continue;
    const std::string name = CaseName(corpus, path);
    const std::string stem = name.substr(0, name.rfind('.'));
    std::optional<v1::PlaceRequest> one_batch;
    if (auto it = one_batch_of.find(stem); it != one_batch_of.end()) {
      absl::StatusOr<v1::PlaceRequest> read = engine::ReadMessageFile<v1::PlaceRequest>(it->second);
      if (read.ok()) one_batch = *std::move(read);
    }
    std::vector<int32_t> counts = microbatch_counts;
    if (counts.empty()) counts.push_back(request->options().microbatches());
    for (const int32_t k : ks) {
      for (const int32_t microbatches : counts) {
        for (const std::string& memory : SplitList(absl::GetFlag(FLAGS_memory))) {
          Case c;
          c.name = name;
          c.microbatches = microbatches;
          c.memory = memory;
          v1::PlaceRequest sized = k > 0 ? ResizeCluster(*request, k, 0) : *request;
          sized.mutable_options()->set_microbatches(microbatches);
          c.k = sized.cluster().devices_size();
          std::optional<v1::PlaceRequest> batch_sized;
          if (one_batch) batch_sized = k > 0 ? ResizeCluster(*one_batch, k, 0) : *one_batch;
          if (memory != "source") {
            double fraction = 0;
            if (!absl::SimpleAtod(memory, &fraction) || fraction <= 0) {
              std::fprintf(stderr, "--memory: %s is neither source nor a fraction\n", memory.c_str());
              return 2;
            }
            v1::PlaceRequest reference = batch_sized ? *batch_sized : sized;
            if (!batch_sized) reference.mutable_options()->set_microbatches(1);
            const int64_t capacity =
                static_cast<int64_t>(std::ceil(fraction * OneDevicePeakBytes(reference)));
            for (v1::Device& device : *sized.mutable_cluster()->mutable_devices()) {
              device.set_memory_bytes(capacity);
            }
            if (batch_sized) {
              for (v1::Device& device : *batch_sized->mutable_cluster()->mutable_devices()) {
                device.set_memory_bytes(capacity);
              }
            }
          }
          absl::StatusOr<engine::Model> model = engine::BuildModel(sized);
          if (!model.ok()) {
            c.error = std::string(model.status().message());
            cases.push_back(std::move(c));
            continue;
          }
          c.ops = model->num_ops();
          c.lower_bound_ns = engine::LowerBoundNs(*model);
          c.one_device_ns = OneDeviceStepNs(*model);
          for (const std::string& algorithm : algorithms) {
            c.rows.push_back(RunAlgorithm(*model, sized, algorithm, c.one_device_ns));
            const Row& row = c.rows.back();
            std::fprintf(stderr, "%s K=%d M=%d %s %s: %s %.2fx %.3f LB W=%d (%.1f s)\n", name.c_str(), c.k,
                         microbatches, memory.c_str(), algorithm.c_str(),
                         !row.ok ? "error" : (row.feasible ? "feasible" : "INFEASIBLE"), row.speed_up,
                         row.over_bound, row.window, row.solve_s);
          }
          if (batch_sized) {
            absl::StatusOr<engine::Model> batch_model = engine::BuildModel(*batch_sized);
            if (batch_model.ok()) {
              c.one_batch_feasible = RunAlgorithm(*batch_model, *batch_sized, "auto", 1).feasible;
            }
          }
          cases.push_back(std::move(c));
        }
      }
    }
  }
  const std::string report = Report(cases, algorithms);
  if (absl::GetFlag(FLAGS_out).empty()) {
    std::fputs(report.c_str(), stdout);
  } else {
    std::ofstream(absl::GetFlag(FLAGS_out)) << report;
  }
  return 0;
}

}  // namespace
}  // namespace placement::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "placement_plans_bench --corpus=DIR [--devices=4] [--memory=source,0.45] [--algorithms=a,b] "
      "[--out=FILE]: training plans over a corpus of training steps (see the header of "
      "bench/plans/plans_bench_main.cc)");
  absl::ParseCommandLine(argc, argv);
  return placement::bench::Main();
}
