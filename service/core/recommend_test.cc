// Recommend without gRPC: which candidates a sizing question has and which devices each uses
// (sizing.h), what each objective recommends, and the core placing every candidate as an ordinary
// request (cached, single-flight, a job each) — a repeat answered from the cache.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/time_util.h"
#include "gtest/gtest.h"
#include "service/cache/lru_cache.h"
#include "service/core/placement_core.h"
#include "service/core/recommend_answer.h"
#include "service/core/sizing.h"
#include "service/status_payloads/status_payloads.h"
#include "tests/testutil/random_graph.h"

namespace placement::core {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Hosts "a" (devices a0..a3, speed 1) and "b" (b0..b3, speed 2 for b2, b3), in that cluster order.
v1::Cluster Pool() {
  v1::Cluster pool;
  for (const char* host : {"a", "b"}) {
    for (int i = 0; i < 4; ++i) {
      v1::Device* d = pool.add_devices();
      d->set_name(absl::StrCat(host, i));
      d->set_kind("gpu");
      d->set_node(host);
      d->set_memory_bytes(int64_t{16} << 30);
      if (std::string(host) == "b" && i >= 2) d->set_speed(2.0);
    }
  }
  pool.mutable_intra_node()->set_bandwidth_bytes_per_second(100'000'000'000);
  pool.mutable_inter_node()->set_bandwidth_bytes_per_second(10'000'000'000);
  return pool;
}

std::vector<std::string> Fields(const absl::Status& status) {
  std::vector<std::string> fields;
  if (std::optional<v1::BadRequest> bad = status_payloads::BadRequestOf(status)) {
    for (const v1::FieldViolation& v : bad->field_violations()) fields.push_back(v.field());
  }
  return fields;
}

TEST(SizingTest, EveryCountWithEverySplitOnTheFewestHosts) {
  v1::RecommendRequest request;
  *request.mutable_cluster() = Pool();
  absl::StatusOr<std::vector<SizingCandidate>> candidates = PlanSizingCandidates(request, 64);
  ASSERT_TRUE(candidates.ok()) << candidates.status();
  std::vector<std::pair<int, int>> shape;
  for (const SizingCandidate& c : *candidates) shape.emplace_back(c.devices, c.data_parallel);
  EXPECT_THAT(shape, ElementsAre(std::pair(1, 1), std::pair(2, 1), std::pair(2, 2), std::pair(3, 1),
                                 std::pair(3, 3), std::pair(4, 1), std::pair(4, 2), std::pair(4, 4),
                                 std::pair(5, 1), std::pair(5, 5), std::pair(6, 1), std::pair(6, 2),
                                 std::pair(6, 3), std::pair(6, 6), std::pair(7, 1), std::pair(7, 7),
                                 std::pair(8, 1), std::pair(8, 2), std::pair(8, 4), std::pair(8, 8)));
  const auto names = [&request](const SizingCandidate& c) {
    std::vector<std::string> out;
    for (int32_t i : c.pool_devices) out.push_back(request.cluster().devices(i).name());
    return out;
  };
  // One device: the fastest (host b's fast ones); four: host b alone (faster than a), fastest first.
  EXPECT_THAT(names((*candidates)[0]), ElementsAre("b2"));
  EXPECT_THAT(names((*candidates)[5]), ElementsAre("b2", "b3", "b0", "b1"));
  // Six: all of host b, then two of a.
  EXPECT_THAT(names((*candidates)[10]), ElementsAre("b2", "b3", "b0", "b1", "a0", "a1"));
  // A candidate's cluster: its devices in its order, the pool's links.
  const v1::Cluster cluster = CandidateCluster(request.cluster(), (*candidates)[10]);
  ASSERT_EQ(cluster.devices_size(), 6);
  EXPECT_EQ(cluster.devices(4).name(), "a0");
  EXPECT_EQ(cluster.inter_node().bandwidth_bytes_per_second(), 10'000'000'000);

  // A fixed data_parallel keeps only the counts it divides.
  request.mutable_options()->set_data_parallel(2);
  request.set_max_devices(6);
  candidates = PlanSizingCandidates(request, 64);
  ASSERT_TRUE(candidates.ok());
  shape.clear();
  for (const SizingCandidate& c : *candidates) shape.emplace_back(c.devices, c.data_parallel);
  EXPECT_THAT(shape, ElementsAre(std::pair(2, 2), std::pair(4, 2), std::pair(6, 2)));
}

TEST(SizingTest, BadSizingFieldsAreNamed) {
  v1::RecommendRequest request;
  *request.mutable_cluster() = Pool();
  request.set_max_devices(9);
  request.set_objective(v1::RECOMMEND_OBJECTIVE_FEWEST_DEVICES_WITHIN);
  absl::StatusOr<std::vector<SizingCandidate>> candidates = PlanSizingCandidates(request, 64);
  EXPECT_EQ(candidates.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Fields(candidates.status()), ElementsAre("max_devices", "within_percent"));

  request.set_max_devices(0);
  request.set_objective(v1::RECOMMEND_OBJECTIVE_FASTEST);
  request.set_within_percent(5);
  EXPECT_THAT(Fields(PlanSizingCandidates(request, 64).status()), ElementsAre("within_percent"));

  request.set_within_percent(0);
  candidates = PlanSizingCandidates(request, 19);  // 8 devices give 20 candidates
  EXPECT_THAT(Fields(candidates.status()), ElementsAre("max_devices"));
  EXPECT_THAT(std::string(candidates.status().message()), HasSubstr("20 candidates"));

  request.set_objective(static_cast<v1::RecommendObjective>(77));
  EXPECT_THAT(Fields(PlanSizingCandidates(request, 64).status()), ElementsAre("objective"));
}

v1::RecommendCandidate Row(int devices, int replicas, double throughput, bool feasible = true) {
  v1::RecommendCandidate row;
  row.set_devices(devices);
  row.set_data_parallel(replicas);
  row.set_microbatches_per_second(throughput);
  row.set_feasible(feasible);
  return row;
}

// A re-sizing question (a previous placement): each candidate lists as departed the devices the previous
// placement names outside its own cluster, with those the caller listed; its split is its own.
TEST(SizingTest, CandidateOptionsListTheDevicesOutsideTheCandidateAsDeparted) {
  v1::PlacementOptions options;
  options.set_data_parallel(0);
  (*options.mutable_previous_placement())["x"] = "a0";
  (*options.mutable_previous_placement())["y"] = "b1";
  (*options.mutable_previous_placement())["z"] = "gone";
  options.add_departed_devices("gone");
  v1::Cluster cluster;
  cluster.add_devices()->set_name("a0");
  cluster.add_devices()->set_name("a1");
  const v1::PlacementOptions own = CandidateOptions(options, cluster, 2);
  EXPECT_EQ(own.data_parallel(), 2);
  EXPECT_THAT(own.departed_devices(), ElementsAre("b1", "gone"));
  EXPECT_EQ(own.previous_placement().size(), 3);
  const v1::PlacementOptions single = CandidateOptions(options, cluster, 1);
  EXPECT_FALSE(single.has_data_parallel());
  v1::PlacementOptions fresh;
  EXPECT_TRUE(CandidateOptions(fresh, cluster, 1).departed_devices().empty());
}

TEST(SizingTest, EachObjectiveRecommendsAsDefined) {
  v1::RecommendResponse table;
  *table.add_candidates() = Row(1, 1, 10);
  *table.add_candidates() = Row(2, 1, 19);
  *table.add_candidates() = Row(2, 2, 18);
  *table.add_candidates() = Row(3, 1, 24);
  *table.add_candidates() = Row(4, 1, 30);
  *table.add_candidates() = Row(4, 2, 40, /*feasible=*/false);  // fastest, but does not fit
  v1::RecommendRequest request;

  v1::RecommendResponse fastest = table;
  CompleteRecommendation(request, &fastest);
  EXPECT_EQ(fastest.recommended(), 4);
  EXPECT_DOUBLE_EQ(fastest.candidates(4).speedup(), 3.0);
  EXPECT_DOUBLE_EQ(fastest.candidates(4).efficiency(), 0.75);
  EXPECT_THAT(fastest.reason(), HasSubstr("fastest: 4 devices"));

  request.set_objective(v1::RECOMMEND_OBJECTIVE_FEWEST_DEVICES_WITHIN);
  request.set_within_percent(25);  // at least 22.5 microbatches/s
  v1::RecommendResponse within = table;
  CompleteRecommendation(request, &within);
  EXPECT_EQ(within.recommended(), 3);

  request.set_objective(v1::RECOMMEND_OBJECTIVE_BEST_PER_DEVICE);
  request.set_within_percent(0);
  v1::RecommendResponse per_device = table;
  CompleteRecommendation(request, &per_device);
  EXPECT_EQ(per_device.recommended(), 0);  // 10 per device; 2 devices give 9.5

  v1::RecommendResponse none;
  *none.add_candidates() = Row(1, 1, 10, /*feasible=*/false);
  CompleteRecommendation(v1::RecommendRequest(), &none);
  EXPECT_EQ(none.recommended(), -1);
}

// A row solved under `limit_ms`, cut short by it or not.
v1::RecommendCandidate Solved(v1::RecommendCandidate row, int64_t limit_ms, bool cut_short) {
  row.set_time_limit_ns(limit_ms * 1'000'000);
  row.set_time_limited(cut_short);
  return row;
}

// The second round goes to the rows that could decide the objective and whose first solve a shorter
// limit cut short — at most max(2, workers) of them, the recommended row first.
TEST(SizingTest, TheRowsRefinedAreTheCutShortContendersOfTheObjective) {
  const absl::Duration first = absl::Milliseconds(200);  // the first round's share, each row's limit
  v1::RecommendResponse table;
  *table.add_candidates() = Solved(Row(1, 1, 10), 200, /*cut_short=*/false);
  *table.add_candidates() = Solved(Row(2, 1, 19), 200, true);
  *table.add_candidates() = Solved(Row(4, 1, 29.5), 200, true);    // within 10 % of the fastest
  *table.add_candidates() = Solved(Row(4, 2, 29.0), 200, false);   // within, solved to the end
  *table.add_candidates() = Solved(Row(6, 1, 30.0), 200, true);    // the fastest
  *table.add_candidates() = Solved(Row(8, 1, 29.6), 200, true);    // within
  *table.add_candidates() = Solved(Row(8, 2, 26.0), 200, true);    // more than 10 % behind
  *table.add_candidates() = Solved(Row(8, 4, 40.0, /*feasible=*/false), 200, true);
  v1::RecommendRequest request;
  v1::RecommendResponse fastest = table;
  CompleteRecommendation(request, &fastest);
  ASSERT_EQ(fastest.recommended(), 4);
  // max(2, workers) decide, best first: one worker as two; with four, the contender solved to the end
  // takes its slot and is not refined; with eight, the row more than 10 % behind is still left out.
  EXPECT_THAT(RowsToRefine(request, fastest, first, /*workers=*/2), ElementsAre(4, 5));
  EXPECT_THAT(RowsToRefine(request, fastest, first, 1), ElementsAre(4, 5));
  EXPECT_THAT(RowsToRefine(request, fastest, first, 4), ElementsAre(4, 5, 2));
  EXPECT_THAT(RowsToRefine(request, fastest, first, 8), ElementsAre(4, 5, 2));
  // A contender solved to the end takes its slot and is not refined.
  v1::RecommendResponse finished = fastest;
  finished.mutable_candidates(5)->set_time_limited(false);
  EXPECT_THAT(RowsToRefine(request, finished, first, 2), ElementsAre(4));
  // Once those are refined, the same call again refines nothing (the repeat's case) ...
  v1::RecommendResponse repeat = fastest;
  for (int i : {2, 4, 5}) repeat.mutable_candidates(i)->set_time_limit_ns(600'000'000);
  EXPECT_THAT(RowsToRefine(request, repeat, first, 4), ElementsAre());
  // ... even where a second solve came out slower than rows it had beaten, which now contend ...
  repeat.mutable_candidates(4)->set_microbatches_per_second(20.0);
  repeat.mutable_candidates(6)->set_microbatches_per_second(29.5);
  CompleteRecommendation(request, &repeat);
  EXPECT_THAT(RowsToRefine(request, repeat, first, 4), ElementsAre());
  // ... and with fewer workers than the first call had: one refined row is enough.
  v1::RecommendResponse one = fastest;
  one.mutable_candidates(5)->set_time_limit_ns(600'000'000);
  EXPECT_THAT(RowsToRefine(request, one, first, 2), ElementsAre());
  // ... whatever share the second round had left (SecondRoundShare), as long as it was longer.
  one.mutable_candidates(5)->set_time_limit_ns(200'000'001);
  EXPECT_THAT(RowsToRefine(request, one, first, 2), ElementsAre());
  one.mutable_candidates(5)->set_time_limit_ns(600'000'000);
  // A first round of 700 ms: a row solved with 600 ms is one of its rows, not a second round's.
  EXPECT_THAT(RowsToRefine(request, one, absl::Milliseconds(700), 4), ElementsAre(4, 5, 2));

  // The fewest devices within 40 % of 30 (at least 18): 2 devices are recommended and come first; then
  // the rows near the fastest, which set the bar (2 devices and fewer within 50 % count too).
  request.set_objective(v1::RECOMMEND_OBJECTIVE_FEWEST_DEVICES_WITHIN);
  request.set_within_percent(40);
  v1::RecommendResponse within = table;
  CompleteRecommendation(request, &within);
  ASSERT_EQ(within.recommended(), 1);
  EXPECT_THAT(RowsToRefine(request, within, first, 4), ElementsAre(1, 4, 5, 2));
  EXPECT_THAT(RowsToRefine(request, within, first, 2), ElementsAre(1, 4)) << "the choice and the bar";

  // Best per device: 1 device gives 10 (solved to the end), 2 give 9.5 each (within 10 %), 4 give 7.4
  // (more than 10 % behind).
  request.set_objective(v1::RECOMMEND_OBJECTIVE_BEST_PER_DEVICE);
  request.set_within_percent(0);
  v1::RecommendResponse per_device = table;
  CompleteRecommendation(request, &per_device);
  ASSERT_EQ(per_device.recommended(), 0);
  EXPECT_THAT(RowsToRefine(request, per_device, first, 3), ElementsAre(1));
  // A row solved at the longer share already (an earlier call's contender for the fastest) means a
  // second round ran for these candidates: nothing is refined for this objective either — the price
  // of repeats that are answered from the cache alone.
  per_device.mutable_candidates(5)->set_time_limit_ns(600'000'000);
  EXPECT_THAT(RowsToRefine(request, per_device, first, 3), ElementsAre());

  // Nothing recommended, nothing refined.
  v1::RecommendResponse none;
  *none.add_candidates() = Solved(Row(1, 1, 10, /*feasible=*/false), 200, true);
  CompleteRecommendation(v1::RecommendRequest(), &none);
  EXPECT_THAT(RowsToRefine(v1::RecommendRequest(), none, first, 2), ElementsAre());
}

TEST(SizingTest, TheFirstRoundTakesFourFifthsOfTheBudgetAndTheContendersMostOfTheRest) {
  EXPECT_EQ(FirstRoundShare(absl::Seconds(3), 2, 20), absl::Milliseconds(240));
  EXPECT_EQ(RefineShare(absl::Seconds(3), 2), absl::Milliseconds(450));
  EXPECT_EQ(RefineShare(absl::Seconds(3), 1), absl::Milliseconds(225));  // two contenders on one worker
  EXPECT_EQ(RefineShare(absl::Seconds(3), 4), absl::Milliseconds(450));  // four in parallel
  EXPECT_EQ(FirstRoundShare(absl::Seconds(3), 8, 2), absl::Seconds(3));  // never above the budget
  // Eight candidates on two workers: 80 % would be 600 ms, no shorter than a second solve's (450 ms):
  // all of it.
  EXPECT_EQ(FirstRoundShare(absl::Seconds(3), 2, 8), absl::Milliseconds(750));
  EXPECT_EQ(FirstRoundShare(absl::Milliseconds(10), 1, 200), absl::Milliseconds(1)) << "at least 1 ms";
}

// The second share as the first round left it (3 s on 2 workers: first shares of 240 ms; 300 ms kept).
TEST(SizingTest, TheSecondRoundGetsWhatTheFirstLeftLessTheReserveAndTheOverrunOrNothing) {
  const absl::Duration budget = absl::Seconds(3);
  const absl::Duration first = FirstRoundShare(budget, 2, 20);
  ASSERT_EQ(first, absl::Milliseconds(240));
  const auto share = [&](int64_t left_ms, int64_t overrun_ms, int32_t contenders, int32_t workers = 2) {
    return SecondRoundShare(budget, workers, first, absl::Milliseconds(left_ms), absl::Milliseconds(overrun_ms),
                            contenders);
  };
  EXPECT_EQ(share(2000, 100, 2), absl::Milliseconds(1600)) << "a first round that ended early: the rest";
  EXPECT_EQ(share(1000, 100, 2), absl::Milliseconds(600));
  EXPECT_EQ(share(1000, -50, 2), absl::Milliseconds(700)) << "solves that ended early add nothing";
  EXPECT_EQ(share(600, 50, 1), absl::Milliseconds(250));
  EXPECT_EQ(share(600, 100, 1), absl::ZeroDuration()) << "no longer than the first share: none";
  EXPECT_EQ(share(-100, 0, 2), absl::ZeroDuration()) << "the first round ended past the budget";
  // Two contenders on one worker run one after the other: each gets half, less its overrun.
  EXPECT_EQ(SecondRoundShare(budget, 1, FirstRoundShare(budget, 1, 20), absl::Milliseconds(1000),
                             absl::Milliseconds(100), 2),
            absl::Milliseconds(250));
  // The budget not tracked: the nominal share.
  EXPECT_EQ(SecondRoundShare(budget, 2, first, absl::InfiniteDuration(), absl::Milliseconds(100), 2),
            RefineShare(budget, 2));
}

class RecommendCoreTest : public ::testing::Test {
 protected:
  static PlacementCoreOptions CoreOptions() {
    PlacementCoreOptions options;
    options.default_time_limit = absl::Seconds(30);
    // The second round whenever the first leaves contenders, however long the first took (these tests
    // run under the sanitizers too); RecommendBudgetTest checks the default.
    options.recommend_second_round_within_budget = false;
    return options;
  }

  // A Recommend request for a random layered graph of `num_ops` ops on the whole Pool(), 4 microbatches.
  static v1::RecommendRequest RequestOnPool(int32_t num_ops, uint64_t seed, const std::string& algorithm) {
    testutil::RandomGraphOptions graph;
    graph.num_ops = num_ops;
    graph.num_devices = 1;
    graph.seed = seed;
    v1::RecommendRequest request;
    *request.mutable_graph() = testutil::RandomLayeredRequest(graph).graph();
    *request.mutable_cluster() = Pool();
    request.mutable_options()->set_algorithm(algorithm);
    request.mutable_options()->set_microbatches(4);
    return request;
  }

  // A 4-device pool on two hosts and a 160-op layered graph with 4 microbatches, placed by `pipeline`.
  static v1::RecommendRequest Request() {
    v1::RecommendRequest request = RequestOnPool(160, 3, "pipeline");
    v1::Cluster pool = Pool();
    pool.mutable_devices()->DeleteSubrange(2, 4);  // a0, a1, b2, b3
    *request.mutable_cluster() = pool;
    return request;
  }

  absl::StatusOr<v1::RecommendResponse> Recommend(const v1::RecommendRequest& request,
                                                  bool* answered_at_once = nullptr, PlacementCore* core = nullptr) {
    v1::RecommendResponse response;
    CallNotes notes;
    absl::StatusOr<std::shared_ptr<PendingAnswer>> pending =
        (core != nullptr ? *core : core_).Recommend(request, absl::InfiniteFuture(), "", &response, &notes);
    if (!pending.ok()) return pending.status();
    if (answered_at_once != nullptr) *answered_at_once = *pending == nullptr;
    if (*pending != nullptr) {
      absl::Notification done;
      (*pending)->OnDone([&done] { done.Notify(); });
      done.WaitForNotification();
      absl::Status finished = (*pending)->Finish();
      if (!finished.ok()) return finished;
    }
    return response;
  }

  // Recommends `request` again: answered at once (no job), `hits` of its candidates from the cache.
  v1::RecommendResponse RecommendFromCache(const v1::RecommendRequest& request, int32_t hits) {
    bool at_once = false;
    absl::StatusOr<v1::RecommendResponse> answer = Recommend(request, &at_once);
    EXPECT_TRUE(answer.ok()) << answer.status();
    if (!answer.ok()) return v1::RecommendResponse();  // recommended() -1: the callers' checks fail too
    EXPECT_TRUE(at_once);
    EXPECT_EQ(answer->cache_hits(), hits);
    return *std::move(answer);
  }

  // One candidate placed on its own, as a scheduler would fetch it.
  v1::PlaceResponse PlaceCandidate(const v1::RecommendRequest& request, const v1::RecommendCandidate& row) {
    v1::PlaceRequest place;
    *place.mutable_graph() = request.graph();
    for (const std::string& name : row.device_names()) {
      for (const v1::Device& d : request.cluster().devices()) {
        if (d.name() == name) *place.mutable_cluster()->add_devices() = d;
      }
    }
    *place.mutable_cluster()->mutable_intra_node() = request.cluster().intra_node();
    *place.mutable_cluster()->mutable_inter_node() = request.cluster().inter_node();
    *place.mutable_options() = request.options();
    if (row.data_parallel() > 1) place.mutable_options()->set_data_parallel(row.data_parallel());
    v1::PlaceResponse response;
    CallNotes notes;
    absl::StatusOr<std::shared_ptr<PendingAnswer>> pending =
        core_.Place(PlaceCall::Of(place), &response, &notes);
    EXPECT_TRUE(pending.ok()) << pending.status();
    if (pending.ok() && *pending != nullptr) {
      absl::Notification done;
      (*pending)->OnDone([&done] { done.Notify(); });
      done.WaitForNotification();
      EXPECT_TRUE((*pending)->Finish().ok());
    }
    return response;
  }

  engine::AlgorithmRegistry algorithms_;
  cache::LruResultCache cache_{{.max_bytes = 64 << 20}};
  jobs::JobManager jobs_{{.workers = 2}};
  jobs::OperationRegistry operations_{{}, &jobs_};
  PlacementCore core_{CoreOptions(), &algorithms_, &cache_, &jobs_, &operations_, nullptr};
};

TEST_F(RecommendCoreTest, EveryCandidateIsAnOrdinaryCachedPlacementAndTheRepeatIsAllHits) {
  const v1::RecommendRequest request = Request();
  bool at_once = true;
  absl::StatusOr<v1::RecommendResponse> first = Recommend(request, &at_once);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(at_once);
  ASSERT_EQ(first->candidates_size(), 8);  // 1; 2 (D 1, 2); 3 (D 1, 3); 4 (D 1, 2, 4)
  for (const v1::RecommendCandidate& row : first->candidates()) {
    EXPECT_FALSE(row.has_error()) << row.error().message();
    EXPECT_EQ(row.request_digest().size(), 64u);
    EXPECT_GT(row.step_ns(), 0);
    EXPECT_EQ(row.microbatches(), 4);
    EXPECT_EQ(row.device_names_size(), row.devices());
    // The same candidate placed on its own is the cached answer, with the same step.
    const v1::PlaceResponse alone = PlaceCandidate(request, row);
    EXPECT_EQ(alone.placement().provenance().request_digest(), row.request_digest());
    EXPECT_EQ(alone.placement().provenance().cache(), v1::HIT);
    EXPECT_EQ(alone.placement().metrics().makespan_ns(), row.step_ns());
    // The library's own way from a row to its request: the same digest.
    absl::StatusOr<v1::PlaceRequest> fetched = CandidatePlaceRequest(request, row);
    ASSERT_TRUE(fetched.ok()) << fetched.status();
    EXPECT_EQ(core_.Prepare(*fetched).value()->request_digest, row.request_digest());
  }
  v1::RecommendCandidate stranger = first->candidates(0);
  stranger.set_device_names(0, "nowhere");
  EXPECT_EQ(CandidatePlaceRequest(request, stranger).status().code(), absl::StatusCode::kNotFound);
  EXPECT_DOUBLE_EQ(first->candidates(0).speedup(), 1.0);
  // The recommendation is the fastest feasible row, found here by hand.
  int32_t best = -1;
  for (int32_t i = 0; i < first->candidates_size(); ++i) {
    const v1::RecommendCandidate& row = first->candidates(i);
    if (row.feasible() && (best < 0 || row.microbatches_per_second() >
                                           first->candidates(best).microbatches_per_second())) {
      best = i;
    }
  }
  EXPECT_EQ(first->recommended(), best);

  const v1::RecommendResponse again = RecommendFromCache(request, 8);
  EXPECT_EQ(again.recommended(), first->recommended());
  ASSERT_EQ(again.candidates_size(), 8);
  for (int32_t i = 0; i < 8; ++i) {
    EXPECT_EQ(again.candidates(i).cache(), v1::HIT);
    EXPECT_EQ(again.candidates(i).step_ns(), first->candidates(i).step_ns());
    EXPECT_FALSE(again.candidates(i).has_placement());
  }

  v1::RecommendRequest with_placements = request;
  with_placements.set_include_placements(true);
  absl::StatusOr<v1::RecommendResponse> full = Recommend(with_placements);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->candidates(3).placement().device_size(), request.graph().ops_size());
}

TEST_F(RecommendCoreTest, APinOutsideACandidateIsThatRowsErrorAndBadInputIsTheCallsError) {
  v1::RecommendRequest request = Request();
  request.mutable_graph()->mutable_ops(0)->set_pinned_device("a0");  // not among the fastest devices
  absl::StatusOr<v1::RecommendResponse> response = Recommend(request);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->candidates(0).error().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(response->candidates(0).error().message(), HasSubstr("pinned_device"));
  EXPECT_FALSE(response->candidates(5).has_error());  // all four devices, one replica: a0 is there
  // Four replicas: a0 is not in replica group 0 (b2), where pins must lie.
  EXPECT_THAT(response->candidates(7).error().message(), HasSubstr("replica group 0"));

  request.mutable_graph()->mutable_ops(0)->set_pinned_device("nowhere");
  EXPECT_THAT(Fields(Recommend(request).status()), ElementsAre("graph.ops[0].pinned_device"));
}

// "The job ran on a0, b1 and b2, and b1 is gone: how many devices now?" Every candidate re-places from the
// previous placement (its devices outside the candidate departed) and reports what it moves; a name that
// is neither in the pool nor listed as departed is the call's error, by field.
TEST_F(RecommendCoreTest, AResizingQuestionRePlacesEveryCandidateFromThePreviousPlacement) {
  v1::RecommendRequest request = Request();
  request.set_include_placements(true);
  auto& previous = *request.mutable_options()->mutable_previous_placement();
  for (int i = 0; i < request.graph().ops_size(); ++i) {
    previous[request.graph().ops(i).name()] = i % 3 == 0 ? "b1" : (i % 3 == 1 ? "a0" : "b2");
  }
  absl::StatusOr<v1::RecommendResponse> response = Recommend(request);
  ASSERT_TRUE(response.ok()) << response.status();
  for (const v1::RecommendCandidate& row : response->candidates()) {
    ASSERT_FALSE(row.has_error()) << row.error().message();
    ASSERT_TRUE(row.placement().metrics().has_ops_moved());
    // A third of the ops were on b1, which left: at least they move.
    EXPECT_GE(row.placement().metrics().ops_moved(), request.graph().ops_size() / 3);
  }
  absl::StatusOr<v1::PlaceRequest> fetched = CandidatePlaceRequest(request, response->candidates(0));
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_EQ(core_.Prepare(*fetched).value()->request_digest, response->candidates(0).request_digest());

  request.mutable_options()->add_departed_devices("b1");
  (*request.mutable_options()->mutable_previous_placement())[request.graph().ops(1).name()] = "a9";
  EXPECT_THAT(Fields(Recommend(request).status()),
              ElementsAre(absl::StrCat("options.previous_placement[\"", request.graph().ops(1).name(), "\"]")));
}

TEST_F(RecommendCoreTest, SubmitOnlyStartsOperationsAndALaterCallIsAnsweredFromTheCache) {
  v1::RecommendRequest request = Request();
  request.set_max_devices(2);
  request.set_submit_only(true);
  absl::StatusOr<v1::RecommendResponse> submitted = Recommend(request);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  ASSERT_EQ(submitted->candidates_size(), 3);
  EXPECT_EQ(submitted->recommended(), -1);
  for (const v1::RecommendCandidate& row : submitted->candidates()) {
    EXPECT_THAT(row.operation(), HasSubstr("operations/"));
    absl::StatusOr<OperationHandle> op = core_.FindOperation(row.operation(), "");
    ASSERT_TRUE(op.ok()) << op.status();
    auto done = std::make_shared<absl::Notification>();
    if (op->Subscribe([done](bool finished) {
          if (finished && !done->HasBeenNotified()) done->Notify();
        }) != 0) {
      done->WaitForNotification();
    }
  }
  request.set_submit_only(false);
  EXPECT_GE(RecommendFromCache(request, 3).recommended(), 0);
}

// The whole pool (20 candidates on 2 workers), `auto` on a graph it cannot finish in a few ms: the first
// round's solves are cut short by their 8 ms share, and the rows that could decide the fastest get a
// second solve of 15 ms (RowsToRefine). The repeat is answered from the cache alone — the refined
// answers are the ones stored — with the same rows and recommendation, and refines nothing.
TEST_F(RecommendCoreTest, ContendersCutShortGetASecondLongerSolveAndTheRepeatIsAllHits) {
  v1::RecommendRequest request = RequestOnPool(1500, 11, "auto");
  *request.mutable_options()->mutable_time_limit() = google::protobuf::util::TimeUtil::MillisecondsToDuration(100);
  const int64_t first_ns = absl::ToInt64Nanoseconds(FirstRoundShare(absl::Milliseconds(100), 2, 20));
  const int64_t refine_ns = absl::ToInt64Nanoseconds(RefineShare(absl::Milliseconds(100), 2));
  ASSERT_EQ(first_ns, 8'000'000);
  ASSERT_EQ(refine_ns, 15'000'000);

  absl::StatusOr<v1::RecommendResponse> first = Recommend(request);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->candidates_size(), 20);
  ASSERT_GE(first->recommended(), 0);
  EXPECT_GE(first->refined(), 1) << "no contender was cut short by 8 ms";
  EXPECT_LE(first->refined(), 2);
  int32_t refined_rows = 0;
  for (const v1::RecommendCandidate& row : first->candidates()) {
    ASSERT_FALSE(row.has_error()) << row.error().message();
    // A refined row's limit is the second share, at most the refine share (less when the first round
    // left less: SecondRoundShare).
    EXPECT_LE(row.time_limit_ns(), refine_ns);
    if (row.time_limit_ns() != first_ns) {
      EXPECT_GT(row.time_limit_ns(), first_ns);
    }
    refined_rows += row.time_limit_ns() > first_ns;
  }
  EXPECT_EQ(refined_rows, first->refined());
  // The recommendation is the fastest row as the rows finally stand.
  const v1::RecommendCandidate& chosen = first->candidates(first->recommended());
  for (const v1::RecommendCandidate& row : first->candidates()) {
    if (row.feasible()) {
      EXPECT_LE(row.microbatches_per_second(), chosen.microbatches_per_second());
    }
  }

  const v1::RecommendResponse again = RecommendFromCache(request, 20);
  EXPECT_EQ(again.refined(), 0);
  EXPECT_EQ(again.recommended(), first->recommended());
  ASSERT_EQ(again.candidates_size(), 20);
  for (int32_t i = 0; i < 20; ++i) {
    EXPECT_EQ(again.candidates(i).step_ns(), first->candidates(i).step_ns()) << i;
    EXPECT_EQ(again.candidates(i).time_limit_ns(), first->candidates(i).time_limit_ns()) << i;
  }
}

// With the default options the second round gets only what the budget has left: a 20-ms budget over 20
// candidates (1.6-ms first shares) is spent before the first round ends — every solve of a 1500-op step
// runs past so short a share (scoring and choosing the window of what it had) — so nothing is refined
// and the call ends instead of running a 3-ms second round past its budget. The same request on the
// fixture's core, whose second round ignores the budget, refines.
TEST_F(RecommendCoreTest, ASecondRoundTheBudgetHasNoRoomForIsSkipped) {
  v1::RecommendRequest request = RequestOnPool(1500, 11, "auto");
  *request.mutable_options()->mutable_time_limit() = google::protobuf::util::TimeUtil::MillisecondsToDuration(20);
  const int64_t first_ns = absl::ToInt64Nanoseconds(FirstRoundShare(absl::Milliseconds(20), 2, 20));
  ASSERT_EQ(first_ns, 1'600'000);

  PlacementCoreOptions options = CoreOptions();
  options.recommend_second_round_within_budget = true;
  cache::LruResultCache cache({.max_bytes = 64 << 20});
  PlacementCore within_budget(options, &algorithms_, &cache, &jobs_, &operations_, nullptr);
  absl::StatusOr<v1::RecommendResponse> kept = Recommend(request, nullptr, &within_budget);
  ASSERT_TRUE(kept.ok()) << kept.status();
  ASSERT_GE(kept->recommended(), 0);
  EXPECT_EQ(kept->refined(), 0);
  for (const v1::RecommendCandidate& row : kept->candidates()) EXPECT_EQ(row.time_limit_ns(), first_ns);

  absl::StatusOr<v1::RecommendResponse> ignored = Recommend(request);
  ASSERT_TRUE(ignored.ok()) << ignored.status();
  EXPECT_GE(ignored->refined(), 1);
}

// A candidate's answer for RecommendAnswer's own tests: done at once or never, its Release counted.
class FakeAnswer final : public PendingAnswer {
 public:
  explicit FakeAnswer(bool done) : done_(done) {}
  void OnDone(std::function<void()> on_done) override {
    if (done_) on_done();
  }
  absl::Status Finish() override { return absl::OkStatus(); }
  void Release() override { released_.store(true); }
  absl::Duration queue_time() const override { return absl::ZeroDuration(); }
  absl::Duration solve_time() const override { return absl::ZeroDuration(); }
  bool released() const { return released_.load(); }

 private:
  const bool done_;
  std::atomic<bool> released_{false};
};

// The second round starts on the worker that finished the first, and its cache lookups may wait on a
// stalled Redis: a caller that goes away meanwhile (Release, from a gRPC thread) must not wait for
// them, and what that round started is let go.
TEST(RecommendAnswerTest, AReleaseDuringASlowSecondRoundReturnsAtOnceAndLetsItsCandidatesGo) {
  v1::RecommendResponse response;
  response.add_candidates()->set_devices(1);
  std::vector<RecommendAnswer::Part> first;
  first.push_back(RecommendAnswer::Part{std::make_shared<FakeAnswer>(/*done=*/true),
                                        std::make_unique<v1::PlaceResponse>(), 0, false});
  auto second_answer = std::make_shared<FakeAnswer>(/*done=*/false);
  absl::Notification refining, proceed;
  RecommendAnswer::Refine refine = [&](v1::RecommendResponse* rows, absl::Duration) {
    EXPECT_EQ(rows->candidates_size(), 1);
    refining.Notify();
    proceed.WaitForNotificationWithTimeout(absl::Seconds(30));
    std::vector<RecommendAnswer::Part> parts;
    parts.push_back(RecommendAnswer::Part{second_answer, std::make_unique<v1::PlaceResponse>(), 0, true});
    return parts;
  };
  auto answer = std::make_shared<RecommendAnswer>(std::move(first), std::move(refine), v1::RecommendRequest(),
                                                  &response, absl::Now(), nullptr);
  std::atomic<bool> done{false};
  std::thread worker([&] { answer->OnDone([&] { done.store(true); }); });  // runs the second round
  ASSERT_TRUE(refining.WaitForNotificationWithTimeout(absl::Seconds(30)));
  absl::Notification released;
  std::thread caller([&] {
    answer->Release();
    released.Notify();
  });
  EXPECT_TRUE(released.WaitForNotificationWithTimeout(absl::Seconds(5)))
      << "Release waited for the second round's lookups";
  proceed.Notify();
  worker.join();
  caller.join();
  EXPECT_TRUE(second_answer->released());
  EXPECT_FALSE(done.load());
}

}  // namespace
}  // namespace placement::core
