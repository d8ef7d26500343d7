// replace_bench — re-placement after the cluster changed (issue 25's targets), on a corpus of
// training steps at K accelerators:
//   * remove: `auto` places the step on K devices; device r leaves (--remove); `auto` re-places with
//     the previous answer (--move_weight) and, for reference, solves the K-1 cluster afresh.
//     Reported: bytes moved / the persistent bytes that were on device r (target <= 1.3), step / the
//     fresh step (target <= 1.03), re-placement solve time / the fresh solve's (target <= 0.25);
//   * add: `auto` places the step on the first K-1 devices; device K-1 joins; `auto` re-places on K
//     and is compared with the fresh K-device solve. Reported: bytes moved / all persistent bytes
//     (target <= 10 %), step and time ratios as above.
// Clusters: ResizeCluster (bench/common) makes K accelerators, four per host; a request without an
// inter-host link gets 25 GB/s and 10 us. Each ratio pairs two solves of the same run, through the
// engine's Solve as `placement_offline place` runs it.
//
//   replace_bench --corpus=build/plans_corpus --only=.batch --devices=8 --remove=used
//       --move_weight=1e-3 --time_limit_s=60 --out=table.md
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/common/corpus_files.h"
#include "placement/v1/placement.pb.h"
#include "service/engine/io/message_io.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/solve/solve.h"

ABSL_FLAG(std::string, corpus, "", "Folder of request files (recursively)");
ABSL_FLAG(std::string, only, "", "Only files whose path contains this (e.g. .batch)");
ABSL_FLAG(int32_t, devices, 8, "Accelerators K of the cluster before a device leaves");
ABSL_FLAG(
    std::string, remove, "used",
    "Devices that leave, one case each: indices < K, or \"used\" = the first, the middle and the "
    "last of the devices the fresh answer uses (a device it leaves idle is no test)");
ABSL_FLAG(bool, add, true, "Also the case where device K-1 joins K-1 others");
ABSL_FLAG(double, move_weight, 1e-4, "options.move_weight_ns_per_byte of the re-placements");
ABSL_FLAG(double, time_limit_s, 60, "Time limit of every solve");
ABSL_FLAG(std::string, out, "", "Also write the markdown table here");
ABSL_FLAG(std::string, dump_dir, "",
          "Also write each removal case here, to replay or inspect with placement_offline: "
          "NAME-gpuR.{before,after}.request.json (the K and K-1 clusters; `after` carries the "
          "previous placement) and NAME-gpuR.{before,fresh,replaced}.placement.json");

namespace placement::bench {
namespace {

struct Solved {
  v1::Placement placement;
  double seconds = 0;  // provenance.solve_ns
};

absl::StatusOr<Solved> SolveAuto(const v1::PlaceRequest& request) {
  absl::StatusOr<engine::Model> model = engine::BuildModel(request);
  if (!model.ok()) return model.status();
  engine::SolveContext context;
  context.deadline = absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_time_limit_s));
  v1::PlacementOptions options = request.options();
  options.set_algorithm("auto");
  absl::StatusOr<v1::Placement> placement = engine::Solve(*model, options, context);
  if (!placement.ok()) return placement.status();
  Solved solved;
  solved.seconds = static_cast<double>(placement->provenance().solve_ns()) * 1e-9;
  solved.placement = *std::move(placement);
  return solved;
}

// The request without device `r`; pins to it go to the next device that stays.
v1::PlaceRequest WithoutDevice(const v1::PlaceRequest& request, int32_t r) {
  v1::PlaceRequest out = request;
  const int32_t n = request.cluster().devices_size();
  const std::string gone = request.cluster().devices(r).name();
  const std::string heir = request.cluster().devices((r + 1) % n).name();
  out.mutable_cluster()->mutable_devices()->erase(
      out.mutable_cluster()->mutable_devices()->begin() + r);
  for (v1::Op& op : *out.mutable_graph()->mutable_ops()) {
    if (op.pinned_device() == gone) op.set_pinned_device(heir);
  }
  auto* links = out.mutable_cluster()->mutable_links();
  for (int i = links->size() - 1; i >= 0; --i) {
    if (links->Get(i).a() == gone || links->Get(i).b() == gone) links->erase(links->begin() + i);
  }
  return out;
}

void SetPrevious(const v1::PlaceRequest& previous_request, const v1::Placement& answer,
                 v1::PlaceRequest* request) {
  auto& previous = *request->mutable_options()->mutable_previous_placement();
  previous.clear();
  for (int i = 0; i < previous_request.graph().ops_size(); ++i) {
    previous[previous_request.graph().ops(i).name()] =
        previous_request.cluster().devices(answer.device(i)).name();
  }
  request->mutable_options()->set_move_weight_ns_per_byte(absl::GetFlag(FLAGS_move_weight));
}

struct Row {
  std::string name;
  std::string change;      // "-gpu4" or "+gpu7"
  double moved_ratio = 0;  // remove: / bytes on the removed device; add: / all persistent bytes
  double step_ratio = 0;
  double time_ratio = 0;
  double fresh_s = 0, replace_s = 0;
  bool feasible = false;
  int64_t ops_moved = 0;
  std::string fresh_winner;    // auto's winning member on the fresh solve it is compared with
  std::string replace_winner;  // where the re-placement started from
  bool no_state = false;       // remove: the device that left held no persistent bytes
};

double Geomean(const std::vector<double>& values) {
  if (values.empty()) return 0;
  double log_sum = 0;
  for (const double v : values) log_sum += std::log(std::max(v, 1e-12));
  return std::exp(log_sum / static_cast<double>(values.size()));
}

int Run() {
  const std::string corpus = absl::GetFlag(FLAGS_corpus);
  if (corpus.empty()) {
    std::fprintf(stderr, "--corpus=DIR is required\n");
    return 2;
  }
  std::vector<std::string> paths;
  FindRequests(corpus, paths);
  std::sort(paths.begin(), paths.end());
  const int32_t k = absl::GetFlag(FLAGS_devices);
  const bool remove_used = absl::GetFlag(FLAGS_remove) == "used";
  std::vector<int32_t> fixed_removals;
  for (absl::string_view piece :
       absl::StrSplit(absl::GetFlag(FLAGS_remove), ',', absl::SkipEmpty())) {
    int32_t r = 0;
    if (absl::SimpleAtoi(piece, &r) && r >= 0 && r < k) fixed_removals.push_back(r);
  }
  std::vector<Row> rows;
  for (const std::string& path : paths) {
    if (!absl::StrContains(path, absl::GetFlag(FLAGS_only))) continue;
    absl::StatusOr<v1::PlaceRequest> read = engine::ReadMessageFile<v1::PlaceRequest>(path);
    if (!read.ok()) {
      std::fprintf(stderr, "%s: %s\n", path.c_str(), std::string(read.status().message()).c_str());
      continue;
    }
    const std::string name = CaseName(corpus, path);
    v1::PlaceRequest full = ResizeCluster(*read, k, 0);
    full.mutable_options()->clear_time_limit();
    // K = 8 spans two hosts (ResizeCluster): exports of one host name no inter-host link; a
    // 25 GB/s, 10 us network then joins them.
    if (full.cluster().inter_node().bandwidth_bytes_per_second() <= 0) {
      full.mutable_cluster()->mutable_inter_node()->set_bandwidth_bytes_per_second(25'000'000'000);
      full.mutable_cluster()->mutable_inter_node()->set_latency_ns(10'000);
    }
    if (full.cluster().devices_size() != k)
      continue;  // other kinds besides the accelerators: skipped
    int64_t all_bytes = 0;
    for (const v1::Op& op : full.graph().ops()) all_bytes += op.persistent_bytes();
    absl::StatusOr<Solved> fresh_full = SolveAuto(full);
    if (!fresh_full.ok()) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(),
                   std::string(fresh_full.status().message()).c_str());
      continue;
    }
    auto report = [&](Row row) {
      std::fprintf(
          stderr, "%-24s %-8s moved %.3f step %.4f time %.3f (%.2f s / %.2f s, fresh: %s)%s\n",
          row.name.c_str(), row.change.c_str(), row.moved_ratio, row.step_ratio, row.time_ratio,
          row.replace_s, row.fresh_s, row.fresh_winner.c_str(), row.feasible ? "" : " INFEASIBLE");
      rows.push_back(std::move(row));
    };
    std::vector<int32_t> removals = fixed_removals;
    if (remove_used) {
      std::vector<int32_t> used;
      for (int32_t d = 0; d < k; ++d) {
        if (std::find(fresh_full->placement.device().begin(), fresh_full->placement.device().end(),
                      d) != fresh_full->placement.device().end()) {
          used.push_back(d);
        }
      }
      removals.clear();
      if (used.size() >= 2) {  // one device holding everything cannot leave
        for (const size_t i : {size_t{0}, used.size() / 2, used.size() - 1}) {
          if (std::find(removals.begin(), removals.end(), used[i]) == removals.end()) {
            removals.push_back(used[i]);
          }
        }
      }
    }
    for (const int32_t r : removals) {
      const v1::PlaceRequest shrunk = WithoutDevice(full, r);
      int64_t lost_bytes = 0;
      for (int i = 0; i < full.graph().ops_size(); ++i) {
        if (fresh_full->placement.device(i) == r)
          lost_bytes += full.graph().ops(i).persistent_bytes();
      }
      v1::PlaceRequest replace = shrunk;
      SetPrevious(full, fresh_full->placement, &replace);
      absl::StatusOr<Solved> fresh = SolveAuto(shrunk);
      absl::StatusOr<Solved> replaced = SolveAuto(replace);
      if (!fresh.ok() || !replaced.ok()) continue;
      if (const std::string dump = absl::GetFlag(FLAGS_dump_dir); !dump.empty()) {
        const std::string stem =
            absl::StrCat(dump, "/", name, "-", full.cluster().devices(r).name());
        for (const auto& [suffix, message] :
             std::vector<std::pair<std::string, const google::protobuf::Message*>>{
                 {".before.request.json", &full},
                 {".after.request.json", &replace},
                 {".before.placement.json", &fresh_full->placement},
                 {".fresh.placement.json", &fresh->placement},
                 {".replaced.placement.json", &replaced->placement}}) {
          if (absl::Status written = engine::WriteMessageFile(*message, stem + suffix); !written.ok()) {
            std::fprintf(stderr, "%s\n", written.ToString().c_str());
          }
        }
      }
      Row row;
      row.name = name;
      row.change = absl::StrCat("-", full.cluster().devices(r).name());
      const int64_t moved = replaced->placement.metrics().bytes_moved();
      // A device without state: nothing had to move; the ratio is then taken as 1 when nothing did,
      // else what moved over all persistent bytes is shown instead (and counted as a miss).
      row.no_state = lost_bytes == 0;
      row.moved_ratio = !row.no_state ? static_cast<double>(moved) / static_cast<double>(lost_bytes)
                        : moved == 0  ? 1.0
                                      : static_cast<double>(moved) /
                                           static_cast<double>(std::max<int64_t>(all_bytes, 1));
      row.step_ratio = static_cast<double>(replaced->placement.metrics().makespan_ns()) /
                       static_cast<double>(fresh->placement.metrics().makespan_ns());
      row.time_ratio = replaced->seconds / std::max(fresh->seconds, 1e-9);
      row.fresh_s = fresh->seconds;
      row.replace_s = replaced->seconds;
      row.feasible = replaced->placement.outcome() == v1::FEASIBLE;
      row.ops_moved = replaced->placement.metrics().ops_moved();
      row.fresh_winner = fresh->placement.provenance().winner();
      row.replace_winner = replaced->placement.provenance().winner();
      report(row);
    }
    if (absl::GetFlag(FLAGS_add)) {
      const v1::PlaceRequest smaller = WithoutDevice(full, k - 1);
      absl::StatusOr<Solved> before = SolveAuto(smaller);
      if (!before.ok()) continue;
      v1::PlaceRequest replace = full;
      SetPrevious(smaller, before->placement, &replace);
      absl::StatusOr<Solved> replaced = SolveAuto(replace);
      if (!replaced.ok()) continue;
      Row row;
      row.name = name;
      row.change = absl::StrCat("+", full.cluster().devices(k - 1).name());
      row.moved_ratio = all_bytes > 0
                            ? static_cast<double>(replaced->placement.metrics().bytes_moved()) /
                                  static_cast<double>(all_bytes)
                            : 0.0;
      row.step_ratio = static_cast<double>(replaced->placement.metrics().makespan_ns()) /
                       static_cast<double>(fresh_full->placement.metrics().makespan_ns());
      row.time_ratio = replaced->seconds / std::max(fresh_full->seconds, 1e-9);
      row.fresh_s = fresh_full->seconds;
      row.replace_s = replaced->seconds;
      row.feasible = replaced->placement.outcome() == v1::FEASIBLE;
      row.ops_moved = replaced->placement.metrics().ops_moved();
      row.fresh_winner = fresh_full->placement.provenance().winner();
      row.replace_winner = replaced->placement.provenance().winner();
      report(row);
    }
  }

  std::string table = absl::StrFormat(
      "K = %d, move weight %g ns/byte, time limit %g s\n\n"
      "| case | change | bytes moved / removed device's (add: / all) | step / fresh | solve time / "
      "fresh | "
      "fresh s | re-place s | ops moved | fits | fresh winner | re-placed from |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n",
      k, absl::GetFlag(FLAGS_move_weight), absl::GetFlag(FLAGS_time_limit_s));
  std::vector<double> remove_moved, remove_step, remove_time, add_moved, add_step, add_time;
  int32_t remove_hits[3] = {0, 0, 0}, add_hits[3] = {0, 0, 0};
  for (const Row& row : rows) {
    const bool add = row.change[0] == '+';
    const std::string moved =
        add            ? absl::StrFormat("%.1f %%", 100 * row.moved_ratio)
        : row.no_state ? (row.moved_ratio == 1.0
                              ? std::string("(no state) 0")
                              : absl::StrFormat("(no state) %.1f %% of all", 100 * row.moved_ratio))
                       : absl::StrFormat("%.3f", row.moved_ratio);
    absl::StrAppend(
        &table,
        absl::StrFormat("| %s | %s | %s | %.4f | %.3f | %.2f | %.2f | %d | %s | %s | %s |\n",
                        row.name, row.change, moved, row.step_ratio, row.time_ratio, row.fresh_s,
                        row.replace_s, row.ops_moved, row.feasible ? "yes" : "NO", row.fresh_winner,
                        row.replace_winner));

    if (add || !row.no_state) (add ? add_moved : remove_moved).push_back(row.moved_ratio);
    (add ? add_step : remove_step).push_back(row.step_ratio);
    (add ? add_time : remove_time).push_back(row.time_ratio);
    int32_t* hits = add ? add_hits : remove_hits;
    hits[0] += add            ? row.moved_ratio <= 0.10
               : row.no_state ? row.moved_ratio == 1.0
                              : row.moved_ratio <= 1.3;
    hits[1] += row.step_ratio <= 1.03;
    hits[2] += row.time_ratio <= 0.25;
  }
  auto max_of = [](const std::vector<double>& v) {
    return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
  };
  absl::StrAppend(
      &table,
      absl::StrFormat(
          "\nremove (%d cases): bytes moved ratio geomean %.3f, max %.3f (devices with state), "
          "<= 1.3 in %d; step "
          "ratio geomean %.4f, max %.4f, <= 1.03 in %d; time ratio geomean %.3f, max %.3f, "
          "<= 0.25 in %d\n",
          static_cast<int>(remove_step.size()), Geomean(remove_moved), max_of(remove_moved),
          remove_hits[0], Geomean(remove_step), max_of(remove_step), remove_hits[1],
          Geomean(remove_time), max_of(remove_time), remove_hits[2]),
      absl::StrFormat(
          "add (%d cases): bytes moved / all max %.1f %%, <= 10 %% in %d; step ratio geomean "
          "%.4f, max %.4f, <= 1.03 in %d; time ratio geomean %.3f, max %.3f, <= 0.25 in %d\n",
          static_cast<int>(add_step.size()), 100 * max_of(add_moved), add_hits[0],
          Geomean(add_step), max_of(add_step), add_hits[1], Geomean(add_time), max_of(add_time),
          add_hits[2]));
  std::fputs(table.c_str(), stdout);
  if (!absl::GetFlag(FLAGS_out).empty()) std::ofstream(absl::GetFlag(FLAGS_out)) << table;
  return 0;
}

}  // namespace
}  // namespace placement::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "replace_bench --corpus=DIR [--only=.batch] [--devices=8] [--remove=0,4,7]");
  absl::ParseCommandLine(argc, argv);
  return placement::bench::Run();
}
