#include "service/engine/baselines/portfolio.h"

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
#include "tests/testutil/random_graph.h"

namespace placement::engine::baselines {
namespace {

// Returns a fixed assignment (or an error), for checking how the portfolio chooses.
class FixedPartitioner final : public Partitioner {
 public:
  FixedPartitioner(std::string name, Assignment assignment, bool fail = false)
      : name_(std::move(name)), assignment_(std::move(assignment)), fail_(fail) {}
  std::string_view name() const override { return name_; }
  std::string_view version() const override { return "7"; }
  std::string_view description() const override { return "fixed"; }
  absl::StatusOr<PartitionResult> Partition(const Model&, const SolveContext&) const override {
    if (fail_) return absl::InternalError("broken on purpose");
    PartitionResult result;
    result.assignment = assignment_;
    return result;
  }

 private:
  std::string name_;
  Assignment assignment_;
  bool fail_;
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
  auto portfolio = MakePortfolioPartitioner({&fast_but_overflowing, &slow_but_fits});
  absl::StatusOr<PartitionResult> result = portfolio->Partition(model, SolveContext());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->winner, "apart");
  EXPECT_EQ(result->assignment, (Assignment{0, 1}));
}

TEST(PortfolioTest, BreaksTiesByMemberOrderNotByFinishingOrder) {
  const Model model = TwoOps();
  FixedPartitioner first("first", {0, 1});
  FixedPartitioner second("second", {0, 1});
  for (int32_t threads : {1, 2, 4}) {
    auto portfolio = MakePortfolioPartitioner({&first, &second}, PortfolioOptions{threads});
    absl::StatusOr<PartitionResult> result = portfolio->Partition(model, SolveContext());
    ASSERT_TRUE(result.ok());
    EXPECT_EQ(result->winner, "first");
  }
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
  EXPECT_EQ(result->winner, "split");
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

TEST(PortfolioTest, VersionNamesItsMembers) {
  FixedPartitioner a("a", {}), b("b", {});
  auto portfolio = MakePortfolioPartitioner({&a, &b});
  EXPECT_EQ(portfolio->name(), "auto");
  EXPECT_EQ(portfolio->version(), "1:a@7,b@7");
}

// `auto` over the real baselines is never worse than its best member, on random graphs with tight memory.
TEST(PortfolioTest, NeverWorseThanItsBestMember) {
  const std::vector<std::unique_ptr<Partitioner>> owned = [] {
    std::vector<std::unique_ptr<Partitioner>> v;
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
  for (uint64_t seed : {1, 2, 3, 4}) {
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
    absl::StatusOr<PartitionResult> best = portfolio->Partition(*model, SolveContext());
    ASSERT_TRUE(best.ok());
    const PortfolioScore chosen = ScoreForPortfolio(*model, best->assignment, 0);
    for (size_t i = 0; i < members.size(); ++i) {
      const PortfolioScore score = ScoreForPortfolio(*model, PlaceWith(*members[i], *model), 0);
      EXPECT_FALSE(BetterScore(score, chosen))
          << "seed " << seed << ": " << members[i]->name() << " beats the portfolio's pick "
          << best->winner;
    }
  }
}

}  // namespace
}  // namespace placement::engine::baselines
