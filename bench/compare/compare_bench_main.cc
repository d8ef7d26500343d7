// placement_compare_bench — runs `compare` over a whole corpus and writes bench/results.md.
//
// For every request under --corpus (*.json, *.json.gz, *.pb, recursively, in path order) and every K in
// --devices, the request's cluster is resized to K accelerators (ResizeCluster below), and every algorithm
// runs through the engine's Solve facade — the same code path as `placement_offline compare` — and is
// scored by the simulator. The report has one row per case: the winner, ParDNN's rank, its gap to the best
// and to the lower bound, every algorithm's makespan relative to the best, and summary lines (geometric
// means, how often ParDNN is best or within 2 % of the best baseline, feasibility).
//
//   placement_compare_bench --corpus=build/corpus --devices=2,4,8 --out=bench/results.md
//   placement_compare_bench --corpus=build/corpus --only=bert --memory=tight --jsonl=/tmp/rows.jsonl
//
// Memory regimes (--memory, comma-separated): `source` keeps the accelerators' memory of the request;
// `tight` gives each of the K accelerators 1.25 x (peak memory of the whole step on one device) / K, but
// never less than the largest colocation unit's persistent bytes, so that spreading is forced and memory
// decides feasibility (ParDNN's reason to exist); `peak:F` gives each accelerator F x that one-device
// peak (same floor), whatever K (the tight-memory corpus runs F = 0.35, 0.45, 0.6).
//
// Baselines followed by the memory stage (--repaired_baselines, on by default): when a baseline's answer
// overflows, the memory stage `auto` runs on its seeds (repair/repair_each.h, same options) repairs it
// and the result is one more column, `NAME+mem`. It counts as a baseline: ParDNN is measured against
// the baselines as `auto` would seed them, not only against their raw answers.
#include <sys/stat.h>
#include <sys/utsname.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <dirent.h>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/common/corpus_files.h"
#include "placement/v1/placement.pb.h"
#include "service/report/compare_table.h"
#include "service/engine/io/message_io.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/repair/repair_each.h"
#include "service/engine/sim/placement_score.h"
#include "service/engine/sim/simulator.h"
#include "service/engine/solve/algorithm_registry.h"
#include "service/engine/solve/solve.h"
#include "service/report/human_units.h"

ABSL_FLAG(std::string, corpus, "build/corpus", "Folder of requests (*.json, *.json.gz, *.pb), searched recursively");
ABSL_FLAG(std::string, devices, "2,4,8", "Accelerator counts K to resize every cluster to");
ABSL_FLAG(std::string, memory, "source,tight",
          "Memory regimes: source, tight and/or peak:F (F x the one-device peak per device; see --help)");
ABSL_FLAG(bool, repaired_baselines, true,
          "Also score every overflowing baseline answer after the memory stage, as `auto` seeds it "
          "(columns NAME+mem)");
ABSL_FLAG(std::string, algorithms, "",
          "Comma-separated algorithms (default: every registered one, auto included); pardnn must be one");
ABSL_FLAG(double, time_limit_s, 60, "Time limit per algorithm and case, in seconds");
ABSL_FLAG(std::string, out, "bench/results.md", "Markdown report to write");
ABSL_FLAG(std::string, jsonl, "", "Also write one JSON line per case with every row (for scripts)");
ABSL_FLAG(std::string, only, "", "Only cases whose file path contains this");
ABSL_FLAG(std::string, dump_dir, "",
          "Also write every case's request (cluster resized) there as NAME.K.MEMORY.pb, so that "
          "`placement_offline compare --request=...` reproduces one case");
ABSL_FLAG(int64_t, max_ops, 2'000'000, "Skip requests with more ops");
ABSL_FLAG(int64_t, source_max_ops, 50'000,
          "Run the `source` memory regime only for requests up to this many ops: the scaled graphs' own "
          "clusters are sized for hundreds of devices, so at K <= 8 their memory fits nothing");
ABSL_FLAG(std::string, command_line, "",
          "How the run was started, for the report header (run.sh passes its own command line)");

namespace placement::bench {
namespace {

using report::CompareReport;
using report::CompareRow;

// ---- Corpus ----------------------------------------------------------------------------------------

// Finding the requests and resizing their clusters: bench/common/corpus_files.h.

// `fraction` x the single-device peak, at least the largest unit's persistent bytes (so it can fit at
// all). The `tight` regime is fraction = 1.25 / K.
int64_t PeakFractionMemory(const engine::Model& model, double fraction) {
  engine::Simulator simulator(model);
  const engine::Assignment everything_on_one(model.num_ops(), 0);
  const engine::SimResult& result = simulator.Run(everything_on_one);
  int64_t largest_unit = 0;
  std::vector<int64_t> group_bytes(model.num_groups(), 0);
  for (engine::OpId v = 0; v < model.num_ops(); ++v) {
    const int64_t own = model.persistent_bytes[v] + model.output_bytes[v] + model.temp_bytes[v];
    if (model.colocation_group[v] == engine::kNone) {
      largest_unit = std::max(largest_unit, own);
    } else {
      group_bytes[model.colocation_group[v]] += model.persistent_bytes[v];
    }
  }
  for (int64_t bytes : group_bytes) largest_unit = std::max(largest_unit, bytes);
  const double share = fraction * static_cast<double>(result.peak_memory_bytes[0]);
  return std::max<int64_t>(largest_unit, static_cast<int64_t>(std::ceil(share)));
}

// The fraction of the one-device peak a `peak:F` regime names (0 when `regime` is not one).
double PeakRegimeFraction(const std::string& regime) {
  double fraction = 0.0;
  if (!absl::StartsWith(regime, "peak:") || !absl::SimpleAtod(regime.substr(5), &fraction) ||
      !(fraction > 0.0)) {
    return 0.0;
  }
  return fraction;
}

// ---- One case ------------------------------------------------------------------------------------

struct Case {
  std::string name;  // file name without extension
  int32_t k = 0;
  std::string memory;  // "source" or "tight"
  int64_t ops = 0;
  int64_t edges = 0;
  int64_t lower_bound_ns = 0;
  int64_t device_memory_bytes = 0;
  std::string error;    // could not be built
  std::string skipped;  // infeasible by arithmetic: not run
  std::vector<CompareRow> rows;
};

std::string JsonEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

bool IsBaseline(const std::string& algorithm) { return algorithm != "pardnn" && algorithm != "auto"; }

void PrintRow(const CompareRow& row) {
  std::fprintf(stderr, "  %-18s %s %s  %s\n", row.algorithm.c_str(),
               row.error.empty() ? (row.feasible ? "feasible  " : "INFEASIBLE") : "ERROR     ",
               report::FormatDurationNs(row.makespan_ns).c_str(),
               report::FormatDurationNs(row.solve_ns).c_str());
}

// A baseline's overflowing answer after the memory stage, as `auto` runs it on its seeds
// (portfolio.cc: RepairEachOverflowing with its default options, only answers that break no
// constraint). The row is named NAME+mem; its solve time is the baseline's plus the repair's.
std::optional<CompareRow> RepairedRow(const engine::Model& model, const std::string& algorithm,
                                      const v1::Placement& placement, absl::Duration limit) {
  if (placement.device_size() != model.num_ops()) return std::nullopt;
  engine::Assignment assignment(model.num_ops());
  for (int32_t i = 0; i < placement.device_size(); ++i) {
    assignment[model.op_of_request_index[i]] = placement.device(i);
  }
  std::vector<v1::ConstraintViolation> problems;
  engine::ScoreAssignment(model, assignment, &problems);
  if (!problems.empty()) return std::nullopt;
  engine::Simulator simulator(model);
  const engine::PlacementScore score = engine::ScoreSimulation(model, simulator.Run(assignment));
  engine::SolveContext context;
  context.deadline = absl::Now() + limit;
  engine::RepairEachOptions each;
  each.repair.progress_from = each.repair.progress_to = -1.0;
  const absl::Time started = absl::Now();
  engine::RepairEachResult repaired =
      engine::RepairEachOverflowing(model, context, each, {{&assignment, score}});
  const int64_t repair_ns = absl::ToInt64Nanoseconds(absl::Now() - started);
  if (repaired.candidates.empty()) return std::nullopt;
  CompareRow row = report::CompareRowFromPlacement(
      algorithm + "+mem", engine::ScoreAssignment(model, repaired.candidates[0].assignment));
  row.solve_ns = placement.provenance().solve_ns() + repair_ns;
  row.time_limited = placement.provenance().time_limited() || repaired.time_limited;
  return row;
}

void RunCase(const v1::PlaceRequest& request, const std::vector<std::string>& algorithms,
             absl::Duration limit, Case& result) {
  absl::StatusOr<engine::Model> model = engine::BuildModel(request);
  if (!model.ok()) {
    result.error = std::string(model.status().message());
    return;
  }
  result.ops = model->num_ops();
  result.edges = model->num_edges();
  result.lower_bound_ns = engine::LowerBoundNs(*model);
  result.device_memory_bytes = model->memory_bytes.empty() ? 0 : model->memory_bytes[0];
  // Weights alone exceeding every device's capacity together: no algorithm can fit, so running them
  // would only measure how fast each gives up (the scaled graphs' own clusters have 130-1024 devices).
  double persistent = 0.0, capacity = 0.0;
  for (int64_t bytes : model->persistent_bytes) persistent += static_cast<double>(bytes);
  for (int64_t bytes : model->capacity_bytes) capacity += static_cast<double>(bytes);
  if (persistent > capacity) {
    result.skipped = absl::StrFormat("weights need %.1f GiB, the %d devices hold %.1f GiB",
                                     persistent / (1 << 30), model->num_devices(), capacity / (1 << 30));
    std::fprintf(stderr, "  skipped: %s\n", result.skipped.c_str());
    return;
  }
  v1::PlacementOptions options = request.options();
  for (const std::string& algorithm : algorithms) {
    options.set_algorithm(algorithm);
    engine::SolveContext context;
    context.deadline = absl::Now() + limit;
    context.seed = options.seed();
    absl::StatusOr<v1::Placement> placement = engine::Solve(*model, options, context);
    result.rows.push_back(placement.ok()
                              ? report::CompareRowFromPlacement(algorithm, *placement)
                              : report::CompareRowFromError(algorithm, placement.status().ToString()));
    PrintRow(result.rows.back());
    if (absl::GetFlag(FLAGS_repaired_baselines) && placement.ok() && IsBaseline(algorithm) &&
        !result.rows.back().feasible) {
      std::optional<CompareRow> repaired = RepairedRow(*model, algorithm, *placement, limit);
      if (repaired) {
        result.rows.push_back(std::move(*repaired));
        PrintRow(result.rows.back());
      }
    }
  }
}

// ---- Report --------------------------------------------------------------------------------------

const CompareRow* FindRow(const Case& c, const std::string& algorithm) {
  for (const CompareRow& row : c.rows) {
    if (row.algorithm == algorithm) return &row;
  }
  return nullptr;
}

bool Usable(const CompareRow* row) { return row != nullptr && row->error.empty() && row->feasible; }

// Index of the best feasible row (smallest makespan, then list order), optionally leaving one out.
// The best feasible row among distinct methods: `auto` is never a candidate (it starts from the
// others' answers, so "best" would be true by construction), nor is `excluded`.
int BestRow(const Case& c, const std::string& excluded = "") {
  int best = -1;
  for (size_t i = 0; i < c.rows.size(); ++i) {
    if (!Usable(&c.rows[i]) || c.rows[i].algorithm == excluded || c.rows[i].algorithm == "auto") continue;
    if (best == -1 || c.rows[i].makespan_ns < c.rows[best].makespan_ns) best = static_cast<int>(i);
  }
  return best;
}

std::string Ratio(double value) { return absl::StrFormat("%.3f", value); }
std::string Percent(double fraction) { return absl::StrFormat("%+.1f%%", 100.0 * fraction); }

struct GeoMean {
  double log_sum = 0.0;
  int count = 0;
  void Add(double value) {
    if (value > 0) {
      log_sum += std::log(value);
      ++count;
    }
  }
  std::string Text() const { return count == 0 ? "-" : Ratio(std::exp(log_sum / count)); }
};

std::string MachineLine() {
  std::string cpu = "unknown CPU";
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (absl::StartsWith(line, "model name")) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  }
  struct utsname uts {};
  uname(&uts);
  return absl::StrCat(cpu, ", ", std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)), " logical CPUs, ", uts.sysname,
                      " ", uts.release);
}

std::string Report(const std::vector<Case>& cases, const std::vector<std::string>& algorithms,
                   absl::Duration limit, double wall_seconds) {
  std::string out = "# Placement quality: ParDNN against the baselines\n\n";
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y-%m-%d", std::gmtime(&now));
  const std::string command = absl::GetFlag(FLAGS_command_line);
  absl::StrAppend(&out, "Generated ", date, " by `", command.empty() ? "placement_compare_bench" : command,
                  "` (bench/compare/README.md) on ", MachineLine(), "; ", absl::FormatDuration(limit),
                  " per algorithm and case; ", cases.size(), " cases in ",
                  absl::StrFormat("%.0f", wall_seconds), " s. Every number is the simulator's (docs/api.md "
                  "§2). Machines are shared and noisy: solve times are indicative, makespans are exact.\n\n");

  // ---- Summary over cases where ParDNN and at least one baseline produced an answer.
  int total = 0, pardnn_feasible = 0, any_feasible = 0, pardnn_misses = 0, within_2 = 0, compared = 0;
  int pardnn_wins = 0;
  GeoMean gap_best, gap_baseline, over_lb;
  std::map<std::string, GeoMean> algorithm_over_best, algorithm_over_lb;
  std::map<std::string, int> algorithm_feasible, algorithm_wins;
  std::vector<std::string> losses;
  std::vector<std::string> skipped;
  // auto against its members: never worse (by construction; a miss is a bug), and what its search adds.
  int auto_cases = 0, auto_never_worse = 0;
  GeoMean auto_over_best_member, auto_over_lb;
  std::map<std::string, int> auto_winners;
  for (const Case& c : cases) {
    if (!c.skipped.empty()) {
      skipped.push_back(absl::StrCat("`", c.name, "` K=", c.k, " ", c.memory, ": ", c.skipped));
      continue;
    }
    if (!c.error.empty()) continue;
    ++total;
    const int best = BestRow(c);
    const int best_baseline = BestRow(c, "pardnn");
    const CompareRow* pardnn = FindRow(c, "pardnn");
    if (best >= 0) {
      ++any_feasible;
      ++algorithm_wins[c.rows[best].algorithm];
    }
    for (const CompareRow& row : c.rows) {
      if (!Usable(&row)) continue;
      ++algorithm_feasible[row.algorithm];
      algorithm_over_best[row.algorithm].Add(static_cast<double>(row.makespan_ns) / c.rows[best].makespan_ns);
      if (c.lower_bound_ns > 0) {
        algorithm_over_lb[row.algorithm].Add(static_cast<double>(row.makespan_ns) / c.lower_bound_ns);
      }
    }
    if (Usable(pardnn)) {
      ++pardnn_feasible;
      gap_best.Add(static_cast<double>(pardnn->makespan_ns) / c.rows[best].makespan_ns);
      if (c.lower_bound_ns > 0) over_lb.Add(static_cast<double>(pardnn->makespan_ns) / c.lower_bound_ns);
      if (c.rows[best].algorithm == "pardnn") ++pardnn_wins;
    } else if (best_baseline >= 0) {
      ++pardnn_misses;
    }
    if (const CompareRow* automatic = FindRow(c, "auto"); Usable(automatic) && best >= 0) {
      ++auto_cases;
      auto_never_worse += automatic->makespan_ns <= c.rows[best].makespan_ns;
      auto_over_best_member.Add(static_cast<double>(automatic->makespan_ns) / c.rows[best].makespan_ns);
      if (c.lower_bound_ns > 0) auto_over_lb.Add(static_cast<double>(automatic->makespan_ns) / c.lower_bound_ns);
      ++auto_winners[automatic->winner.empty() ? "?" : automatic->winner];
    }
    if (best_baseline >= 0) {
      ++compared;
      const double baseline = static_cast<double>(c.rows[best_baseline].makespan_ns);
      if (Usable(pardnn)) {
        gap_baseline.Add(pardnn->makespan_ns / baseline);
        if (pardnn->makespan_ns <= 1.02 * baseline) {
          ++within_2;
        } else {
          losses.push_back(absl::StrCat("`", c.name, "` K=", c.k, " ", c.memory, ": pardnn ",
                                        Percent(pardnn->makespan_ns / baseline - 1.0), " against ",
                                        c.rows[best_baseline].algorithm));
        }
      } else {
        losses.push_back(absl::StrCat("`", c.name, "` K=", c.k, " ", c.memory, ": pardnn infeasible, ",
                                      c.rows[best_baseline].algorithm, " feasible"));
      }
    } else if (Usable(pardnn)) {
      ++compared;
      ++within_2;  // the only feasible answer
    }
  }
  absl::StrAppend(&out, "## Summary\n\n");
  absl::StrAppend(
      &out, "- **ParDNN best or within 2 % of the best feasible baseline: ", within_2, " of ", compared,
      " cases (", compared ? absl::StrFormat("%.0f", 100.0 * within_2 / compared) : "-",
      " %)**; best outright (ties included) in ", pardnn_wins, ".\n",
      "- ParDNN feasible in ", pardnn_feasible, " of ", total, " cases; some algorithm feasible in ",
      any_feasible, "; a baseline feasible where ParDNN is not: ", pardnn_misses, ".\n",
      "- Geometric means over the cases where ParDNN is feasible: ParDNN / best = ", gap_best.Text(),
      ", ParDNN / best baseline = ", gap_baseline.Text(), ", ParDNN / lower bound = ", over_lb.Text(),
      ".\n\n");
  if (auto_cases > 0) {
    std::string winners;
    for (const auto& [name, count] : auto_winners) {
      absl::StrAppend(&winners, winners.empty() ? "" : ", ", name, " ", count);
    }
    absl::StrAppend(
        &out, "- `auto` (the portfolio: every other column's answer is one of its seeds, so it is not a "
              "distinct method and never counts as \"best\"): at or below the best distinct method in ",
        auto_never_worse, " of ", auto_cases, " cases where both are feasible (by construction when its members run to the end; a "
        "miss means the time limit, which auto's members share, cut a member short inside it); its search beyond the best seed: geomean auto / best distinct method = ",
        auto_over_best_member.Text(), "; auto / lower bound = ", auto_over_lb.Text(),
        "; the seed it grew from: ", winners, ".\n\n");
  }
  absl::StrAppend(&out, "| algorithm | feasible | best | geomean makespan / best | geomean makespan / LB |\n",
                  "|---|---:|---:|---:|---:|\n");
  for (const std::string& algorithm : algorithms) {
    absl::StrAppend(&out, "| ", algorithm, " | ", algorithm_feasible[algorithm], " | ",
                    algorithm_wins[algorithm], " | ", algorithm_over_best[algorithm].Text(), " | ",
                    algorithm_over_lb[algorithm].Text(), " |\n");
  }
  absl::StrAppend(&out, "\n\"geomean makespan / best\" is over the cases where that algorithm is feasible; "
                        "\"best\" counts the cases it wins (ties go to the earlier column).\n\n");
  if (!skipped.empty()) {
    absl::StrAppend(&out, "Cases not run because no placement can fit (the weights alone exceed the "
                          "devices' total memory):\n\n");
    for (const std::string& line : skipped) absl::StrAppend(&out, "- ", line, "\n");
    absl::StrAppend(&out, "\n");
  }
  if (!losses.empty()) {
    absl::StrAppend(&out, "Cases where ParDNN is more than 2 % behind the best baseline or infeasible:\n\n");
    for (const std::string& loss : losses) absl::StrAppend(&out, "- ", loss, "\n");
    absl::StrAppend(&out, "\n");
  }

  // ---- One row per case.
  absl::StrAppend(&out, "## Cases\n\n", "Makespans relative to the best feasible distinct method (1.000 = "
                        "best; `x` = infeasible, `!` = error, `-` = not run: a `+mem` column where the baseline fit; `auto` below 1.000 = what its search gained, "
                        "with the seed it grew from); gap = ParDNN / best - 1.\n\n",
                  "| case | K | memory | ops | lower bound | best | winner | pardnn rank | gap to best | "
                  "pardnn / LB |");
  for (const std::string& algorithm : algorithms) absl::StrAppend(&out, " ", algorithm, " |");
  absl::StrAppend(&out, "\n|---|---:|---|---:|---:|---:|---|---:|---:|---:|");
  for (size_t i = 0; i < algorithms.size(); ++i) absl::StrAppend(&out, "---:|");
  absl::StrAppend(&out, "\n");
  for (const Case& c : cases) {
    if (!c.skipped.empty()) continue;
    absl::StrAppend(&out, "| ", c.name, " | ", c.k, " | ", c.memory, " | ");
    if (!c.error.empty()) {
      absl::StrAppend(&out, "error: ", c.error.substr(0, 120), " |\n");
      continue;
    }
    const int best = BestRow(c);
    const CompareRow* pardnn = FindRow(c, "pardnn");
    std::string rank = "x";
    std::string gap = "-";
    std::string lb = "-";
    if (Usable(pardnn)) {
      int better = 0;
      for (const CompareRow& row : c.rows) better += Usable(&row) && row.makespan_ns < pardnn->makespan_ns;
      rank = absl::StrCat(better + 1);
      gap = Percent(static_cast<double>(pardnn->makespan_ns) / c.rows[best].makespan_ns - 1.0);
      if (c.lower_bound_ns > 0) lb = Ratio(static_cast<double>(pardnn->makespan_ns) / c.lower_bound_ns);
    }
    absl::StrAppend(&out, c.ops, " | ", report::FormatDurationNs(c.lower_bound_ns), " | ",
                    best >= 0 ? report::FormatDurationNs(c.rows[best].makespan_ns) : "-", " | ",
                    best >= 0 ? c.rows[best].algorithm : "none feasible", " | ", rank, " | ", gap, " | ", lb,
                    " |");
    for (const std::string& algorithm : algorithms) {
      const CompareRow* row = FindRow(c, algorithm);
      std::string cell = row == nullptr ? "-" : "!";  // - = not run (a repaired column: nothing to repair)
      if (row != nullptr && row->error.empty()) {
        cell = row->feasible && best >= 0
                   ? Ratio(static_cast<double>(row->makespan_ns) / c.rows[best].makespan_ns)
                   : "x";
        if (!row->winner.empty()) absl::StrAppend(&cell, " (", row->winner, ")");
      }
      absl::StrAppend(&out, " ", cell, " |");
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

std::string JsonLine(const Case& c) {
  std::string line = absl::StrCat("{\"case\": \"", JsonEscape(c.name), "\", \"k\": ", c.k, ", \"memory\": \"",
                                  c.memory, "\", \"ops\": ", c.ops, ", \"edges\": ", c.edges,
                                  ", \"lower_bound_ns\": ", c.lower_bound_ns, ", \"device_memory_bytes\": ",
                                  c.device_memory_bytes, ", \"error\": \"", JsonEscape(c.error), "\", \"skipped\": \"",
                                  JsonEscape(c.skipped), "\", \"rows\": [");
  for (size_t i = 0; i < c.rows.size(); ++i) {
    const CompareRow& row = c.rows[i];
    // How far an infeasible answer is: the bytes above capacity at the peaks, summed over devices.
    const int64_t overflow_bytes = engine::BytesAboveCapacity(row.peak_memory_bytes, row.capacity_bytes);
    absl::StrAppend(&line, i ? ", " : "", "{\"algorithm\": \"", row.algorithm, "\", \"winner\": \"", row.winner,
                    "\", \"error\": \"", JsonEscape(row.error), "\", \"feasible\": ",
                    row.feasible ? "true" : "false", ", \"overflow_bytes\": ", overflow_bytes,
                    ", \"makespan_ns\": ", row.makespan_ns,
                    ", \"transfer_bytes\": ", row.transfer_bytes, ", \"solve_ns\": ", row.solve_ns,
                    ", \"time_limited\": ", row.time_limited ? "true" : "false", "}");
  }
  absl::StrAppend(&line, "]}\n");
  return line;
}

int Main() {
  const std::string corpus = absl::GetFlag(FLAGS_corpus);
  std::vector<std::string> files;
  FindRequests(corpus, files);
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "no requests under %s (build the corpus first: bench/compare/run.sh does)\n",
                 corpus.c_str());
    return 1;
  }
  std::vector<int32_t> ks;
  for (absl::string_view part : absl::StrSplit(absl::GetFlag(FLAGS_devices), ',', absl::SkipEmpty())) {
    int32_t k;
    if (!absl::SimpleAtoi(part, &k) || k < 1) {
      std::fprintf(stderr, "--devices: bad count \"%s\"\n", std::string(part).c_str());
      return 2;
    }
    ks.push_back(k);
  }
  std::vector<std::string> regimes = absl::StrSplit(absl::GetFlag(FLAGS_memory), ',', absl::SkipEmpty());
  for (const std::string& regime : regimes) {
    if (regime != "source" && regime != "tight" && PeakRegimeFraction(regime) == 0.0) {
      std::fprintf(stderr, "--memory: unknown regime \"%s\" (source, tight, peak:F)\n", regime.c_str());
      return 2;
    }
  }
  std::vector<std::string> algorithms =
      absl::StrSplit(absl::GetFlag(FLAGS_algorithms), ',', absl::SkipEmpty());
  if (algorithms.empty()) {
    for (const engine::Partitioner* algorithm : engine::AlgorithmRegistry::Default().All()) {
      algorithms.emplace_back(algorithm->name());
    }
  }
  for (const std::string& algorithm : algorithms) {
    if (absl::Status known =
            engine::AlgorithmRegistry::Default().Find(algorithm, "--algorithms").status();
        !known.ok()) {
      std::fprintf(stderr, "%s\n", std::string(known.message()).c_str());
      return 2;
    }
  }
  const absl::Duration limit = absl::Seconds(absl::GetFlag(FLAGS_time_limit_s));
  std::FILE* jsonl = nullptr;
  if (!absl::GetFlag(FLAGS_jsonl).empty()) jsonl = std::fopen(absl::GetFlag(FLAGS_jsonl).c_str(), "w");

  const auto started = std::chrono::steady_clock::now();
  std::vector<Case> cases;
  for (const std::string& path : files) {
    if (!absl::StrContains(path, absl::GetFlag(FLAGS_only))) continue;
    absl::StatusOr<v1::PlaceRequest> request = engine::ReadMessageFile<v1::PlaceRequest>(path);
    if (!request.ok()) {
      std::fprintf(stderr, "%s: %s\n", path.c_str(), request.status().ToString().c_str());
      continue;
    }
    if (request->graph().ops_size() > absl::GetFlag(FLAGS_max_ops)) continue;
    for (const std::string& regime : regimes) {
      if (regime == "source" && request->graph().ops_size() > absl::GetFlag(FLAGS_source_max_ops)) continue;
      for (int32_t k : ks) {
        Case c;
        c.name = CaseName(corpus, path);
        c.k = k;
        c.memory = regime;
        v1::PlaceRequest resized = ResizeCluster(*request, k, 0);
        if (regime != "source") {
          const double fraction = regime == "tight" ? 1.25 / k : PeakRegimeFraction(regime);
          absl::StatusOr<engine::Model> model = engine::BuildModel(resized);
          if (model.ok()) resized = ResizeCluster(*request, k, PeakFractionMemory(*model, fraction));
        }
        std::fprintf(stderr, "%s K=%d %s (%d ops)\n", c.name.c_str(), k, regime.c_str(),
                     resized.graph().ops_size());
        if (!absl::GetFlag(FLAGS_dump_dir).empty()) {
          std::string file = c.name;
          std::replace(file.begin(), file.end(), '/', '-');
          const absl::Status written = engine::WriteMessageFile(
              resized, absl::StrCat(absl::GetFlag(FLAGS_dump_dir), "/", file, ".", k, ".",
                                    absl::StrReplaceAll(regime, {{":", ""}}), ".pb"));
          if (!written.ok()) std::fprintf(stderr, "  %s\n", written.ToString().c_str());
        }
        RunCase(resized, algorithms, limit, c);
        if (jsonl != nullptr) {
          std::fputs(JsonLine(c).c_str(), jsonl);
          std::fflush(jsonl);
        }
        cases.push_back(std::move(c));
      }
    }
  }
  if (jsonl != nullptr) std::fclose(jsonl);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  // Columns: every algorithm in order, each baseline's repaired column (when some case has one) right
  // after it.
  std::vector<std::string> columns;
  for (const std::string& algorithm : algorithms) {
    columns.push_back(algorithm);
    const std::string repaired = algorithm + "+mem";
    bool any = false;
    for (const Case& c : cases) any |= FindRow(c, repaired) != nullptr;
    if (any) columns.push_back(repaired);
  }
  const std::string report = Report(cases, columns, limit, wall);
  std::ofstream out(absl::GetFlag(FLAGS_out));
  out << report;
  if (!out) {
    std::fprintf(stderr, "cannot write %s\n", absl::GetFlag(FLAGS_out).c_str());
    return 1;
  }
  std::fprintf(stderr, "wrote %s (%zu cases)\n", absl::GetFlag(FLAGS_out).c_str(), cases.size());
  return 0;
}

}  // namespace
}  // namespace placement::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Runs every algorithm on every corpus request for K = 2, 4, 8 devices and writes bench/results.md.\n"
      "  placement_compare_bench --corpus=build/corpus --out=bench/results.md");
  absl::ParseCommandLine(argc, argv);
  return placement::bench::Main();
}
