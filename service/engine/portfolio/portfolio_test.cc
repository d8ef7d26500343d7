#include "service/engine/portfolio/portfolio.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "service/engine/baselines/baselines_test_util.h"
#include "service/engine/baselines/heft.h"
#include "service/engine/baselines/m_etf.h"
#include "service/engine/baselines/m_topo.h"
#include "service/engine/baselines/metis.h"
#include "service/engine/baselines/pipeline.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/pardnn/pardnn_partitioner.h"
#include "service/engine/plans/plan_model.h"
#include "service/engine/sim/placement_score.h"
#include "service/engine/sim/simulator.h"
#include "tests/testutil/random_graph.h"

namespace placement::engine::portfolio {
using baselines::PlaceWith;
using baselines::ProblemBuilder;
namespace {

// Returns a fixed assignment (or an error), for checking how the portfolio chooses; counts its calls.
class FixedPartitioner final : public Partitioner {
 public:
  FixedPartitioner(std::string name, Assignment assignment, bool fail = false)
      : name_(std::move(name)), assignment_(std::move(assignment)), fail_(fail) {}
  std::string_view name() const override { return name_; }
  std::string_view version() const override { return "7"; }
  std::string_view description() const override { return "fixed"; }
  bool searches() const override { return searches_; }
  // Says it searches with its time (as pardnn and stages do).
  FixedPartitioner& Searching() {
    searches_ = true;
    return *this;
  }
  int calls() const { return calls_.load(); }
  absl::StatusOr<PartitionResult> Partition(const Model&, const SolveContext&) const override {
    ++calls_;
    if (fail_) return absl::InternalError("broken on purpose");
    PartitionResult result;
    result.assignment = assignment_;
    return result;
  }

 private:
  std::string name_;
  Assignment assignment_;
  bool fail_;
  bool searches_ = false;
  mutable std::atomic<int> calls_{0};
};

// a -> b, 1 ms of transfer between devices; each op's weights take 60% of a device.
Model TwoOps() {
  ProblemBuilder p;
  p.AddOp(100, 100, 600);
  p.AddOp(100, 0, 600);
  p.AddEdge(0, 1, 100);
  p.AddDevices(2, 1000);
  p.SetLink(100'000, 0);
  return p.Build();
}

TEST(PortfolioTest, PrefersFeasibleOverFast) {
  const Model model = TwoOps();
  FixedPartitioner fast_but_overflowing("together", {0, 0});  // 100 + 100 ns, 1200 bytes on dev0
  FixedPartitioner slow_but_fits("apart", {0, 1});             // 1 ms transfer
  auto portfolio = MakePortfolioPartitioner({&slow_but_fits, &fast_but_overflowing});
  absl::StatusOr<PartitionResult> result = portfolio->Partition(model, SolveContext());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->winner, "apart");
  EXPECT_EQ(result->assignment, (Assignment{0, 1}));
  EXPECT_TRUE(ScoreForPortfolio(model, result->assignment, 0).feasible);
}

TEST(PortfolioTest, RepairsAnOverflowingSeedAndNamesItsMember) {
  const Model model = TwoOps();
  FixedPartitioner overflowing("together", {0, 0});  // 1200 bytes on a 1000-byte device
  auto portfolio = MakePortfolioPartitioner({&overflowing});
  absl::StatusOr<PartitionResult> result = portfolio->Partition(model, SolveContext());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->winner, "together");  // the memory stage made it fit; it is still its answer
  EXPECT_TRUE(ScoreForPortfolio(model, result->assignment, 0).feasible);
}

TEST(PortfolioTest, BreaksTiesByMemberOrder) {
  const Model model = TwoOps();
  FixedPartitioner first("first", {0, 1});
  FixedPartitioner second("second", {0, 1});
  auto portfolio = MakePortfolioPartitioner({&first, &second});
  absl::StatusOr<PartitionResult> result = portfolio->Partition(model, SolveContext());
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->winner, "first");
}

TEST(PortfolioTest, AmongInfeasibleAnswersTakesTheLeastOverflow) {
  ProblemBuilder p;
  p.AddOp(100, 0, 900);
  p.AddOp(100, 0, 900);
  p.AddOp(100, 0, 900);
  p.AddDevices(2, 1000);
  const Model model = p.Build();
  FixedPartitioner all_on_one("all", {0, 0, 0});    // 2700 on dev0: 1700 over
  FixedPartitioner two_and_one("split", {0, 1, 0});  // 1800 on dev0: 800 over
  auto portfolio = MakePortfolioPartitioner({&all_on_one, &two_and_one});
  absl::StatusOr<PartitionResult> result = portfolio->Partition(model, SolveContext());
  ASSERT_TRUE(result.ok());
  // 800 bytes over is the least any answer can do (2700 bytes on 2 x 1000); the memory stage may reach it
  // from "all" too, and then the earlier member wins the tie.
  EXPECT_EQ(ScoreForPortfolio(model, result->assignment, 0).overflow_bytes, 800);
}

TEST(PortfolioTest, SkipsFailingAndMalformedMembers) {
  const Model model = TwoOps();
  FixedPartitioner broken("broken", {}, /*fail=*/true);
  FixedPartitioner short_answer("short", {0});
  FixedPartitioner out_of_range("out_of_range", {0, 7});
  FixedPartitioner good("good", {1, 0});
  auto portfolio = MakePortfolioPartitioner({&broken, &short_answer, &out_of_range, &good});
  absl::StatusOr<PartitionResult> result = portfolio->Partition(model, SolveContext());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->winner, "good");

  auto hopeless = MakePortfolioPartitioner({&broken});
  EXPECT_FALSE(hopeless->Partition(model, SolveContext()).ok());
}

TEST(PortfolioTest, RunsOnlyTheFirstMemberAfterTheDeadline) {
  const Model model = TwoOps();
  FixedPartitioner first("first", {0, 0});
  FixedPartitioner second("second", {0, 1});
  auto portfolio = MakePortfolioPartitioner({&first, &second});
  SolveContext context;
  context.deadline = absl::InfinitePast();
  absl::StatusOr<PartitionResult> result = portfolio->Partition(model, context);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->winner, "first");  // infeasible, but the only one that ran
  EXPECT_TRUE(result->time_limited);
}

// a -> b -> c, 100 ns each, on two devices joined by a 1 ms link: the lower bound is the chain, 300 ns,
// and only an answer that keeps the chain on one device reaches it.
Model Chain() {
  ProblemBuilder p;
  for (int i = 0; i < 3; ++i) p.AddOp(100, 100);
  p.AddEdge(0, 1, 100);
  p.AddEdge(1, 2, 100);
  p.AddDevices(2, 1 << 20);
  p.SetLink(100'000, 1'000'000);
  return p.Build();
}

PortfolioOptions StopOnSmallSteps() {
  PortfolioOptions options;
  options.near_optimal_min_unrolled = 0;
  return options;
}

// An answer at the lower bound ends the portfolio: the member after it never runs.
TEST(PortfolioTest, StopsAtTheBound) {
  const Model model = Chain();
  ASSERT_EQ(ProvenLowerBoundNs(model), 300);
  FixedPartitioner together("together", {1, 1, 1});
  FixedPartitioner later("later", {0, 0, 0});
  absl::StatusOr<PartitionResult> result =
      MakePortfolioPartitioner({&together, &later})->Partition(model, SolveContext());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->winner, "together");
  EXPECT_EQ(result->winner_makespan_ns, 300);
  EXPECT_EQ(result->assignment, (Assignment{1, 1, 1}));
  EXPECT_EQ(later.calls(), 0);
  // Without the stop the later member runs, and loses the tie to the earlier one.
  PortfolioOptions no_stop;
  no_stop.stop_at_bound = false;
  result = MakePortfolioPartitioner({&together, &later}, no_stop)->Partition(model, SolveContext());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(later.calls(), 1);
  EXPECT_EQ(result->winner, "together");
}

// Above the bound every member runs, and the one at the bound wins.
TEST(PortfolioTest, AnAnswerAboveTheBoundDoesNotStopIt) {
  const Model model = Chain();
  FixedPartitioner split("split", {0, 1, 1});  // 1 ms of transfer
  FixedPartitioner together("together", {0, 0, 0});
  absl::StatusOr<PartitionResult> result =
      MakePortfolioPartitioner({&split, &together}, StopOnSmallSteps())->Partition(model, SolveContext());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(together.calls(), 1);
  EXPECT_EQ(result->winner, "together");
  EXPECT_EQ(result->winner_makespan_ns, 300);
}

// Within the near-optimal gap (1 ppm) but above the bound: a stop on large steps only. Three 1 ms ops
// in a chain over a 1 ns link: split, the step is 3 ms + 1 ns, within 1 ppm (3 ns) of the bound.
TEST(PortfolioTest, TheGapStopsOnlyLargeSteps) {
  ProblemBuilder p;
  for (int i = 0; i < 3; ++i) p.AddOp(1'000'000, 1);
  p.AddEdge(0, 1, 1);
  p.AddEdge(1, 2, 1);
  p.AddDevices(2, 1 << 20);
  p.SetLink(1'000'000'000'000, 1);
  const Model model = p.Build();
  ASSERT_EQ(ProvenLowerBoundNs(model), 3'000'000);
  ASSERT_EQ(ScoreForPortfolio(model, {0, 1, 1}, 0).makespan_ns, 3'000'001);
  FixedPartitioner split("split", {0, 1, 1});
  FixedPartitioner together("together", {0, 0, 0});
  // Small (the default threshold: 100,000 ops + edges): every member runs, the exact answer wins.
  absl::StatusOr<PartitionResult> result =
      MakePortfolioPartitioner({&split, &together})->Partition(model, SolveContext());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(together.calls(), 1);
  EXPECT_EQ(result->winner_makespan_ns, 3'000'000);
  // Counted as large: the split answer ends it.
  result = MakePortfolioPartitioner({&split, &together}, StopOnSmallSteps())->Partition(model, SolveContext());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(together.calls(), 1);  // not run again
  EXPECT_EQ(result->winner, "split");
  EXPECT_EQ(result->winner_makespan_ns, 3'000'001);
}

// A plan whose window the solver chooses: stopped at the bound, the answer still gets the smallest
// window at that step. Two independent 100 ns ops, one per device, two microbatches: each device runs
// two copies, 200 ns, the bound (400 ns of work on two devices); W = 1 is as fast as W = 2.
TEST(PortfolioTest, StoppedAtTheBoundAPlanStillGetsItsWindow) {
  ProblemBuilder p;
  p.AddOp(100, 10);
  p.AddOp(100, 10);
  p.AddDevices(2, 1 << 20);
  p.request().mutable_options()->set_microbatches(2);
  p.request().mutable_options()->set_max_in_flight(0);  // the solver chooses
  const Model full = p.Build();
  const PlanModel plan(full, 1);  // working window W = 2 (one per device)
  const Model& model = plan.model();
  ASSERT_TRUE(model.solver_chooses_window);
  ASSERT_EQ(model.plan.max_in_flight, 2);
  ASSERT_EQ(ProvenLowerBoundNs(model), 200);
  FixedPartitioner apart("apart", {0, 1});
  FixedPartitioner later("later", {0, 0});
  absl::StatusOr<PartitionResult> result =
      MakePortfolioPartitioner({&apart, &later})->Partition(model, SolveContext());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(later.calls(), 0);
  EXPECT_EQ(result->winner, "apart");
  EXPECT_EQ(result->winner_makespan_ns, 200);
  EXPECT_EQ(result->max_in_flight, 1);
}

// An answer that overflows is no stop, however short: the member after it runs and its fitting answer
// wins.
TEST(PortfolioTest, AnOverflowingAnswerAtTheBoundDoesNotStopIt) {
  const Model model = TwoOps();  // 1200 bytes of weights on a 1000-byte device when together
  ASSERT_EQ(ProvenLowerBoundNs(model), 200);
  PortfolioOptions options;
  options.search = false;
  FixedPartitioner together("together", {0, 0});
  FixedPartitioner apart("apart", {0, 1});
  absl::StatusOr<PartitionResult> result =
      MakePortfolioPartitioner({&together, &apart}, options)->Partition(model, SolveContext());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(apart.calls(), 1);
  EXPECT_TRUE(ScoreForPortfolio(model, result->assignment, 0).feasible);
}

// One device has one placement: the portfolio answers it without running a member (this one would fail)
// and names single_device when it is a member, else the first.
TEST(PortfolioTest, OneDeviceIsAnsweredWithoutRunningTheMembers) {
  ProblemBuilder p;
  p.AddOp(100, 10);
  p.AddOp(200, 10);
  p.AddEdge(0, 1, 10);
  p.AddDevices(1, 1000);
  const Model model = p.Build();
  const FixedPartitioner broken("broken", Assignment{0, 0}, /*fail=*/true);
  absl::StatusOr<PartitionResult> result = MakePortfolioPartitioner({&broken})->Partition(model, SolveContext());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->assignment, (Assignment{0, 0}));
  EXPECT_EQ(result->winner, "broken");
  EXPECT_EQ(result->winner_makespan_ns, 300);
}

// The version names the members and the re-placement's quick members (by default every member but the
// first), so a cached answer never outlives a change of either.
TEST(PortfolioTest, VersionNamesItsMembersAndTheReplacementMembers) {
  FixedPartitioner a("a", {}), b("b", {}), c("c", {});
  auto portfolio = MakePortfolioPartitioner({&a, &b});
  EXPECT_EQ(portfolio->name(), "auto");
  EXPECT_EQ(portfolio->version(), "7:a@7,b@7;replace@4:b@7");
  auto other = MakePortfolioPartitioner({&a, &b}, PortfolioOptions(), {&b, &c});
  EXPECT_EQ(other->version(), "7:a@7,b@7;replace@4:b@7,c@7");
}

// Where no placement can fit (three ops of 800 persistent bytes, two devices of 1000), `auto` answers
// from the members that take no time of their own — pardnn and stages are not run — choosing the least
// persistent bytes above capacity, counted (all on one device: 1400; 2 + 1: 600, the first of the
// two such answers); on a training plan whose window is open, with W = 1, the window that holds least.
TEST(PortfolioTest, WhereNothingCanFitTheQuickMembersAnswerAtOnce) {
  ProblemBuilder p;
  for (int i = 0; i < 3; ++i) p.AddOp(100, 10, 800);
  p.AddEdge(0, 1, 10);
  p.AddEdge(1, 2, 10);
  p.AddDevices(2, 1000);
  const Model model = p.Build();
  ASSERT_TRUE(MemoryCannotFit(model));
  FixedPartitioner pardnn("pardnn", {0, 1, 0});
  pardnn.Searching();
  FixedPartitioner stages("a_search", {0, 1, 0});  // skipped for what it does, not for its name
  stages.Searching();
  FixedPartitioner together("together", {0, 0, 0});
  FixedPartitioner two_and_one("two_and_one", {0, 0, 1});
  FixedPartitioner one_and_two("one_and_two", {0, 1, 1});
  auto portfolio = MakePortfolioPartitioner({&pardnn, &together, &stages, &two_and_one, &one_and_two});
  absl::StatusOr<PartitionResult> result = portfolio->Partition(model, SolveContext());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->winner, "two_and_one");
  EXPECT_EQ(result->assignment, (Assignment{0, 0, 1}));
  EXPECT_FALSE(result->time_limited);
  EXPECT_EQ(pardnn.calls(), 0);
  EXPECT_EQ(stages.calls(), 0);
  EXPECT_EQ(together.calls(), 1);
  // With nothing but searching members, the portfolio runs as ever.
  auto searching_only = MakePortfolioPartitioner({&pardnn});
  ASSERT_TRUE(searching_only->Partition(model, SolveContext()).ok());
  EXPECT_EQ(pardnn.calls(), 1);

  // A training plan, the window open, real quick members: W = 1.
  testutil::RandomGraphOptions options;
  options.num_ops = 200;
  options.num_devices = 4;
  options.persistent_fraction = 1.0;
  options.min_persistent_bytes = 8 << 20;
  options.max_persistent_bytes = 16 << 20;
  options.device_memory_bytes = int64_t{64} << 20;
  options.seed = 5;
  v1::PlaceRequest request = testutil::RandomLayeredRequest(options);
  request.mutable_options()->set_microbatches(4);
  absl::StatusOr<Model> full = BuildModel(request);
  ASSERT_TRUE(full.ok()) << full.status();
  const PlanModel plan(*full, 1);
  ASSERT_TRUE(MemoryCannotFit(plan.model()));
  ASSERT_TRUE(plan.model().solver_chooses_window);
  const std::unique_ptr<Partitioner> m_topo = MakeMTopoPartitioner();
  const std::unique_ptr<Partitioner> metis = MakeMetisPartitioner();
  auto real = MakePortfolioPartitioner({&pardnn, m_topo.get(), metis.get()});
  result = real->Partition(plan.model(), SolveContext());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->max_in_flight, 1);
  EXPECT_NE(result->winner, "pardnn");
  EXPECT_EQ(pardnn.calls(), 1) << "pardnn ran";
}

// `auto` over pardnn and the real baselines is never worse than any member, on random graphs with tight
// memory; the winner's own makespan is never below the final one (the search only improves). One test
// per graph, so that CTest runs them side by side (each takes minutes under the sanitizers).
class NeverWorseThanAnyMember : public ::testing::TestWithParam<uint64_t> {};

TEST_P(NeverWorseThanAnyMember, OnATightRandomGraph) {
  const uint64_t seed = GetParam();
  const std::vector<std::unique_ptr<Partitioner>> owned = [] {
    std::vector<std::unique_ptr<Partitioner>> v;
    v.push_back(MakePardnnPartitioner());
    v.push_back(MakeMEtfPartitioner());
    v.push_back(MakeHeftPartitioner());
    v.push_back(MakeMTopoPartitioner());
    v.push_back(MakeMetisPartitioner());
    v.push_back(MakePipelinePartitioner());
    return v;
  }();
  std::vector<const Partitioner*> members;
  for (const auto& member : owned) members.push_back(member.get());
  auto portfolio = MakePortfolioPartitioner(members);
  testutil::RandomGraphOptions options;
  options.num_ops = 300;
  options.num_devices = 4;
  options.heterogeneous_speeds = seed % 2 == 0;
  options.colocation_fraction = 0.1;
  // Tight: roughly what the weights and a few activations need when spread evenly.
  options.device_memory_bytes = int64_t{600} << 20;
  options.seed = seed;
  absl::StatusOr<Model> model = BuildModel(testutil::RandomLayeredRequest(options));
  ASSERT_TRUE(model.ok()) << model.status();
  // Where nothing can fit, the portfolio answers from its quick members alone (as documented).
  ASSERT_FALSE(MemoryCannotFit(*model));
  SolveContext context;
  context.seed = seed;
  absl::StatusOr<PartitionResult> best = portfolio->Partition(*model, context);
  ASSERT_TRUE(best.ok());
  ASSERT_FALSE(best->winner.empty());
  const PortfolioScore chosen = ScoreForPortfolio(*model, best->assignment, 0);
  if (chosen.feasible) {
    EXPECT_LE(chosen.makespan_ns, best->winner_makespan_ns);
  }
  for (const Partitioner* member : members) {
    const PortfolioScore score = ScoreForPortfolio(*model, PlaceWith(*member, *model, seed), 0);
    EXPECT_FALSE(BetterScore(score, chosen))
        << member->name() << " beats the portfolio (winner " << best->winner << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, NeverWorseThanAnyMember, ::testing::Values(1, 2, 3, 4));

// Deterministic, and the search never makes the seeds' best worse (so more time never hurts: the steps
// are the same and the deadline only cuts them short). With the search from the winner alone, the
// winner is the seeds' best; the search from a runner-up as well (memory binds on this graph) never
// ends worse than that, and here it ends better from m_topo's answer, which provenance then names.
TEST(PortfolioTest, DeterministicAndTheSearchOnlyImproves) {
  const std::unique_ptr<Partitioner> pardnn = MakePardnnPartitioner();
  const std::unique_ptr<Partitioner> m_topo = MakeMTopoPartitioner();
  PortfolioOptions without_search;
  without_search.search = false;
  PortfolioOptions winner_only;
  winner_only.runner_up_searches = 0;
  auto full = MakePortfolioPartitioner({pardnn.get(), m_topo.get()});
  auto seeds_only = MakePortfolioPartitioner({pardnn.get(), m_topo.get()}, without_search);
  auto single_search = MakePortfolioPartitioner({pardnn.get(), m_topo.get()}, winner_only);
  testutil::RandomGraphOptions options;
  options.num_ops = 400;
  options.num_devices = 4;
  options.seed = 11;
  absl::StatusOr<Model> model = BuildModel(testutil::RandomLayeredRequest(options));
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE(MemoryCanBind(*model));
  absl::StatusOr<PartitionResult> a = full->Partition(*model, SolveContext());
  absl::StatusOr<PartitionResult> b = full->Partition(*model, SolveContext());
  absl::StatusOr<PartitionResult> c = seeds_only->Partition(*model, SolveContext());
  absl::StatusOr<PartitionResult> d = single_search->Partition(*model, SolveContext());
  ASSERT_TRUE(a.ok() && b.ok() && c.ok() && d.ok());
  EXPECT_EQ(a->assignment, b->assignment);
  EXPECT_EQ(d->winner, c->winner);
  const PortfolioScore searched = ScoreForPortfolio(*model, a->assignment, 0);
  const PortfolioScore searched_once = ScoreForPortfolio(*model, d->assignment, 0);
  const PortfolioScore unsearched = ScoreForPortfolio(*model, c->assignment, 0);
  EXPECT_FALSE(BetterScore(unsearched, searched_once));
  EXPECT_FALSE(BetterScore(searched_once, searched));
  EXPECT_EQ(c->winner_makespan_ns, unsearched.makespan_ns);
  EXPECT_EQ(d->winner_makespan_ns, unsearched.makespan_ns);
  // The runner-up's search won here: a shorter step than the winner's search, from m_topo's answer.
  EXPECT_TRUE(BetterScore(searched, searched_once));
  EXPECT_EQ(c->winner, "pardnn");
  EXPECT_EQ(a->winner, "m_topo");
  EXPECT_EQ(a->winner_makespan_ns, ScoreForPortfolio(*model, PlaceWith(*m_topo, *model, 0), 0).makespan_ns);
}

// The polish (PortfolioOptions::polish) starts from the search's end: never worse than without it, with
// the same winner, and on some of these graphs shorter (8 devices on two hosts joined by a slow link,
// colocated ops: where the search's candidates leave path units the polish moves).
TEST(PortfolioTest, ThePolishOnlyImproves) {
  const std::unique_ptr<Partitioner> pardnn = MakePardnnPartitioner();
  const std::unique_ptr<Partitioner> m_etf = MakeMEtfPartitioner();
  PortfolioOptions unpolished_options;
  unpolished_options.polish = false;
  auto polished = MakePortfolioPartitioner({pardnn.get(), m_etf.get()});
  auto unpolished = MakePortfolioPartitioner({pardnn.get(), m_etf.get()}, unpolished_options);
  int shorter = 0;
  for (uint64_t seed : {2, 4, 6}) {
    testutil::RandomGraphOptions options;
    options.num_ops = 160;
    options.num_devices = 8;
    options.num_nodes = 2;
    options.colocation_fraction = 0.3;
    options.intra_node = {100'000'000'000, 2'000};
    options.inter_node = {12'500'000'000, 10'000};
    options.seed = seed;
    absl::StatusOr<Model> model = BuildModel(testutil::RandomLayeredRequest(options));
    ASSERT_TRUE(model.ok()) << model.status();
    SolveContext context;
    context.seed = seed;
    absl::StatusOr<PartitionResult> a = polished->Partition(*model, context);
    absl::StatusOr<PartitionResult> b = unpolished->Partition(*model, context);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->winner, b->winner) << "seed " << seed;
    const PortfolioScore with = ScoreForPortfolio(*model, a->assignment, 0);
    const PortfolioScore without = ScoreForPortfolio(*model, b->assignment, 0);
    EXPECT_FALSE(BetterScore(without, with)) << "seed " << seed;
    shorter += BetterScore(with, without);
  }
  EXPECT_GT(shorter, 0);
}

// Where memory cannot bind, answers whose own lower bound is above the best fitting step are not
// simulated; the answer, its window and its provenance are the same as with every answer scored. The
// members include one whose answer (everything on device 0) is certain to be skipped.
TEST(PortfolioTest, SkippingAnswersThatCannotWinChangesNothing) {
  const std::unique_ptr<Partitioner> pardnn = MakePardnnPartitioner();
  const std::unique_ptr<Partitioner> pipeline = MakePipelinePartitioner();
  const std::unique_ptr<Partitioner> m_topo = MakeMTopoPartitioner();
  for (uint64_t seed : {1, 2, 3}) {
    testutil::RandomGraphOptions options;
    options.num_ops = 200 + 50 * static_cast<int32_t>(seed);
    options.num_devices = 4;
    options.device_memory_bytes = int64_t{1} << 50;  // memory cannot bind
    options.seed = seed;
    v1::PlaceRequest request = testutil::RandomLayeredRequest(options);
    request.mutable_options()->set_microbatches(static_cast<int32_t>(2 * seed));
    absl::StatusOr<Model> model = BuildModel(request);
    ASSERT_TRUE(model.ok()) << model.status();
    ASSERT_FALSE(MemoryCanBind(*model));
    const FixedPartitioner serial("serial", Assignment(model->num_ops(), 0));
    const std::vector<const Partitioner*> members = {pardnn.get(), &serial, pipeline.get(), m_topo.get()};
    PortfolioOptions no_skip;
    no_skip.skip_by_bound = false;
    absl::StatusOr<PartitionResult> a = MakePortfolioPartitioner(members)->Partition(*model, SolveContext());
    absl::StatusOr<PartitionResult> b =
        MakePortfolioPartitioner(members, no_skip)->Partition(*model, SolveContext());
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->assignment, b->assignment) << "seed " << seed;
    EXPECT_EQ(a->winner, b->winner) << "seed " << seed;
    EXPECT_EQ(a->winner_makespan_ns, b->winner_makespan_ns) << "seed " << seed;
    EXPECT_EQ(a->max_in_flight, b->max_in_flight) << "seed " << seed;
    // The serial answer's bound (all the work) is above the answer: it was skipped.
    EXPECT_GT(AssignedLowerBoundNs(*model, Assignment(model->num_ops(), 0)), a->winner_makespan_ns);
  }
}

}  // namespace
}  // namespace placement::engine::portfolio
