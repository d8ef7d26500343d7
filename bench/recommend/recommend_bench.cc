// recommend_bench: issue 25's Recommend figures, on the core with its real job manager, cache and
// algorithms (what the gRPC server runs; the adapter adds about a millisecond).
//
//   build/bench/corpus/placement_corpus bert --ops=10000 --out=/tmp/bert_10k.pb
//   build/bench/recommend/recommend_bench --request=/tmp/bert_10k.pb --max_devices=8 --budget=3s
//
// Prints, for one sizing question (the request's cluster as the pool, counts 1..max_devices with every
// data-parallel split):
//   - cold: a Recommend on an empty cache (--workers workers), wall time;
//   - cached: the same Recommend again, median and worst of --repeats calls;
//   - exhaustive: every candidate placed alone with the full --full_time_limit and no cache, then the
//     objective applied by hand; whether it recommends the same candidate, and each candidate's
//     Recommend step against its full-effort step (--rows: each candidate's).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "google/protobuf/util/time_util.h"
#include "service/cache/lru_cache.h"
#include "service/core/placement_core.h"
#include "service/core/sizing.h"
#include "service/engine/io/message_io.h"

ABSL_FLAG(std::string, request, "", "PlaceRequest file: the graph, and its cluster as the pool.");
ABSL_FLAG(int32_t, max_devices, 8, "Counts 1..N (0 = the pool's size).");
ABSL_FLAG(absl::Duration, budget, absl::Seconds(3), "options.time_limit of the Recommend: its budget.");
ABSL_FLAG(absl::Duration, full_time_limit, absl::Seconds(60),
          "Time limit of each candidate in the exhaustive evaluation.");
ABSL_FLAG(int32_t, workers, 2, "Worker threads.");
ABSL_FLAG(int32_t, repeats, 20, "Cached Recommend calls timed.");
ABSL_FLAG(int32_t, microbatches, 0, "Training plan M (0 = the request's).");
ABSL_FLAG(bool, rows, false, "Print each candidate's cold and full-effort step.");
ABSL_FLAG(std::string, dump_dir, "",
          "Also write each candidate's PlaceRequest there (c<devices>_d<D>.pb) to study it alone.");

namespace {

namespace v1 = placement::v1;
namespace core = placement::core;


void Await(const std::shared_ptr<core::PendingAnswer>& pending) {
  absl::Notification done;
  pending->OnDone([&done] { done.Notify(); });
  done.WaitForNotification();
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  v1::PlaceRequest place;
  if (absl::Status read = placement::engine::ReadMessageFile(absl::GetFlag(FLAGS_request), place); !read.ok()) {
    std::fprintf(stderr, "%s\n", std::string(read.message()).c_str());
    return 66;
  }
  v1::RecommendRequest request;
  *request.mutable_graph() = place.graph();
  *request.mutable_cluster() = place.cluster();
  *request.mutable_options() = place.options();
  if (absl::GetFlag(FLAGS_microbatches) > 0) request.mutable_options()->set_microbatches(absl::GetFlag(FLAGS_microbatches));
  *request.mutable_options()->mutable_time_limit() = google::protobuf::util::TimeUtil::NanosecondsToDuration(
      absl::ToInt64Nanoseconds(absl::GetFlag(FLAGS_budget)));
  request.set_max_devices(absl::GetFlag(FLAGS_max_devices));

  core::PlacementCoreOptions options;
  options.max_time_limit = std::max(absl::Minutes(10), absl::GetFlag(FLAGS_full_time_limit));
  placement::engine::AlgorithmRegistry algorithms;
  placement::cache::LruResultCache cache({.max_bytes = int64_t{1} << 30});
  placement::jobs::JobManager jobs({.workers = absl::GetFlag(FLAGS_workers), .max_queued_jobs = 1024});
  placement::jobs::OperationRegistry operations({}, &jobs);
  core::PlacementCore placement_core(options, &algorithms, &cache, &jobs, &operations, nullptr);

  const auto recommend = [&](v1::RecommendResponse* response) -> absl::Duration {
    core::CallNotes notes;
    const absl::Time start = absl::Now();
    absl::StatusOr<std::shared_ptr<core::PendingAnswer>> pending =
        placement_core.Recommend(request, absl::InfiniteFuture(), "", response, &notes);
    if (!pending.ok()) {
      std::fprintf(stderr, "Recommend: %s\n", pending.status().ToString().c_str());
      std::exit(1);
    }
    if (*pending != nullptr) {
      Await(*pending);
      if (absl::Status finished = (*pending)->Finish(); !finished.ok()) {
        std::fprintf(stderr, "Recommend: %s\n", finished.ToString().c_str());
        std::exit(1);
      }
    }
    return absl::Now() - start;
  };

  v1::RecommendResponse cold;
  const absl::Duration cold_time = recommend(&cold);
  std::vector<double> cached_ms;
  v1::RecommendResponse cached;
  for (int i = 0; i < absl::GetFlag(FLAGS_repeats); ++i) {
    cached.Clear();
    cached_ms.push_back(absl::ToDoubleMilliseconds(recommend(&cached)));
  }
  std::sort(cached_ms.begin(), cached_ms.end());
  std::printf("graph: %d ops, %d edges; pool %d devices; %d candidates; budget %s; %d workers\n",
              request.graph().ops_size(), request.graph().edges_size(), request.cluster().devices_size(),
              cold.candidates_size(), absl::FormatDuration(absl::GetFlag(FLAGS_budget)).c_str(),
              absl::GetFlag(FLAGS_workers));
  std::printf("cold Recommend: %.3f s, %d contenders refined (recommended %d: %s)\n",
              absl::ToDoubleSeconds(cold_time), cold.refined(), cold.recommended(), cold.reason().c_str());
  if (!cached_ms.empty()) {
    std::printf("cached Recommend: median %.1f ms, worst %.1f ms over %zu calls (%d of %d candidates hits)\n",
                cached_ms[cached_ms.size() / 2], cached_ms.back(), cached_ms.size(), cached.cache_hits(),
                cached.candidates_size());
  }

  // Exhaustive: each candidate alone, full effort, no cache; the objective applied to those answers.
  v1::RecommendResponse exhaustive;
  const absl::Time full_start = absl::Now();
  std::vector<double> ratios;
  for (const v1::RecommendCandidate& row : cold.candidates()) {
    v1::RecommendCandidate* full_row = exhaustive.add_candidates();
    full_row->set_devices(row.devices());
    full_row->set_data_parallel(row.data_parallel());
    absl::StatusOr<v1::PlaceRequest> candidate = core::CandidatePlaceRequest(request, row);
    if (!candidate.ok()) {
      std::fprintf(stderr, "%s\n", candidate.status().ToString().c_str());
      return 1;
    }
    v1::PlaceRequest& alone = *candidate;
    if (const std::string dir = absl::GetFlag(FLAGS_dump_dir); !dir.empty()) {
      const std::string path = absl::StrFormat("%s/c%d_d%d.pb", dir, row.devices(), row.data_parallel());
      if (absl::Status written = placement::engine::WriteMessageFile(alone, path); !written.ok()) {
        std::fprintf(stderr, "%s\n", written.ToString().c_str());
        return 1;
      }
    }
    *alone.mutable_options()->mutable_time_limit() = google::protobuf::util::TimeUtil::NanosecondsToDuration(
        absl::ToInt64Nanoseconds(absl::GetFlag(FLAGS_full_time_limit)));
    alone.mutable_options()->set_skip_cache(true);
    v1::PlaceResponse answer;
    core::CallNotes notes;
    absl::StatusOr<std::shared_ptr<core::PendingAnswer>> pending =
        placement_core.Place(core::PlaceCall::Of(alone), &answer, &notes);
    if (!pending.ok()) {
      *full_row->mutable_error() = v1::Status();
      full_row->mutable_error()->set_message(std::string(pending.status().message()));
      continue;
    }
    if (*pending != nullptr) {
      Await(*pending);
      if (!(*pending)->Finish().ok()) continue;
    }
    core::FillRowFromPlacement(answer.placement(), full_row);
    if (!row.has_error() && full_row->step_ns() > 0) {
      ratios.push_back(static_cast<double>(row.step_ns()) / static_cast<double>(full_row->step_ns()));
      if (absl::GetFlag(FLAGS_rows)) {
        std::printf("  %d devices, D %d: step %.3f ms (W %d, %s%s) / full effort %.3f ms (W %d, %s) = %.4f\n",
                    row.devices(), row.data_parallel(), row.step_ns() / 1e6, row.max_in_flight(),
                    row.feasible() ? "fits" : "overflows", row.time_limited() ? ", cut short" : "",
                    full_row->step_ns() / 1e6, full_row->max_in_flight(),
                    full_row->feasible() ? "fits" : "overflows", ratios.back());
      }
    }
  }
  core::CompleteRecommendation(request, &exhaustive);
  double log_sum = 0;
  for (double r : ratios) log_sum += std::log(r);
  const auto shape = [](const v1::RecommendResponse& r) {
    if (r.recommended() < 0) return std::string("none");
    const v1::RecommendCandidate& c = r.candidates(r.recommended());
    return absl::StrFormat("%d devices, D %d, %.4g microbatches/s", c.devices(), c.data_parallel(),
                           c.microbatches_per_second());
  };
  std::printf("exhaustive (each candidate alone, %s, no cache): %.1f s; recommends %s; Recommend: %s -> %s\n",
              absl::FormatDuration(absl::GetFlag(FLAGS_full_time_limit)).c_str(),
              absl::ToDoubleSeconds(absl::Now() - full_start), shape(exhaustive).c_str(), shape(cold).c_str(),
              exhaustive.recommended() == cold.recommended() ? "the same candidate" : "a different candidate");
  if (!ratios.empty()) {
    std::printf("Recommend's step / full-effort step: geomean %.4f, worst %.4f over %zu candidates\n",
                std::exp(log_sum / ratios.size()), *std::max_element(ratios.begin(), ratios.end()),
                ratios.size());
  }
  return 0;
}
