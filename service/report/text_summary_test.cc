#include "service/report/text_summary.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/engine/io/message_io.h"
#include "service/engine/solve/solve.h"
#include "tests/testutil/random_graph.h"

namespace placement::report {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The simulator's makespan of every op on device `d`.
int64_t SimulatedOnOneDevice(const v1::PlaceRequest& request, int d) {
  v1::EvaluateRequest evaluate;
  *evaluate.mutable_graph() = request.graph();
  *evaluate.mutable_cluster() = request.cluster();
  evaluate.mutable_device()->Resize(request.graph().ops_size(), d);
  absl::StatusOr<v1::EvaluateResponse> response = engine::Evaluate(evaluate);
  EXPECT_TRUE(response.ok()) << response.status();
  return response.ok() ? response->placement().metrics().makespan_ns() : -1;
}

int Fastest(const v1::Cluster& cluster) {
  int fastest = 0;
  for (int d = 1; d < cluster.devices_size(); ++d) {
    auto speed = [&cluster](int i) {
      return cluster.devices(i).has_speed() ? cluster.devices(i).speed() : 1.0;
    };
    if (speed(d) > speed(fastest)) fastest = d;
  }
  return fastest;
}

TEST(SingleDeviceMakespanTest, IsWhatTheSimulatorGivesForEverythingOnTheFastestDevice) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    testutil::RandomGraphOptions options;
    options.num_ops = 300;
    options.num_devices = 4;
    options.heterogeneous_speeds = true;
    options.seed = seed;
    const v1::PlaceRequest request = testutil::RandomLayeredRequest(options);
    std::optional<int64_t> serial = SingleDeviceMakespanNs(request.graph(), request.cluster());
    ASSERT_TRUE(serial.has_value());
    EXPECT_EQ(*serial, SimulatedOnOneDevice(request, Fastest(request.cluster()))) << "seed " << seed;
  }
}

TEST(SingleDeviceMakespanTest, MatchesTheSimulatorOnTheBertFixture) {
  absl::StatusOr<v1::PlaceRequest> request =
      engine::ReadMessageFile<v1::PlaceRequest>("tests/data/requests/bert_l3_training.json.gz");
  ASSERT_TRUE(request.ok()) << request.status();
  std::optional<int64_t> serial = SingleDeviceMakespanNs(request->graph(), request->cluster());
  ASSERT_TRUE(serial.has_value());
  EXPECT_EQ(*serial, SimulatedOnOneDevice(*request, Fastest(request->cluster())));
}

TEST(SingleDeviceMakespanTest, NoDevicesNoAnswer) {
  EXPECT_FALSE(SingleDeviceMakespanNs(v1::Graph(), v1::Cluster()).has_value());
}

TEST(ResolveOutputFormatTest, JsonUnlessATerminalOrAsked) {
  EXPECT_EQ(*ResolveOutputFormat("auto", false), OutputFormat::kJson);
  EXPECT_EQ(*ResolveOutputFormat("", false), OutputFormat::kJson);
  EXPECT_EQ(*ResolveOutputFormat("auto", true), OutputFormat::kSummary);
  EXPECT_EQ(*ResolveOutputFormat("json", true), OutputFormat::kJson);
  EXPECT_EQ(*ResolveOutputFormat("summary", false), OutputFormat::kSummary);
  absl::StatusOr<OutputFormat> bad = ResolveOutputFormat("yaml", true);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("auto, json or summary"));
}

// A placement of a random request on `devices` devices with long names, scored by the engine.
struct Scored {
  v1::PlaceRequest request;
  v1::Placement placement;
};
Scored ScoredRequest(int devices, int64_t memory_bytes) {
  testutil::RandomGraphOptions options;
  options.num_ops = 200;
  options.num_devices = devices;
  options.device_memory_bytes = memory_bytes;
  options.seed = 7;
  Scored scored;
  scored.request = testutil::RandomLayeredRequest(options);
  for (int d = 0; d < devices; ++d) {
    scored.request.mutable_cluster()->mutable_devices(d)->set_name(
        absl::StrCat("/job:worker/replica:0/task:", d, "/device:GPU:", d));
  }
  v1::EvaluateRequest evaluate;
  *evaluate.mutable_graph() = scored.request.graph();
  *evaluate.mutable_cluster() = scored.request.cluster();
  for (int v = 0; v < scored.request.graph().ops_size(); ++v) evaluate.add_device(v % devices);
  absl::StatusOr<v1::EvaluateResponse> response = engine::Evaluate(evaluate);
  EXPECT_TRUE(response.ok()) << response.status();
  if (response.ok()) scored.placement = response->placement();
  return scored;
}

void ExpectFits(const std::string& summary) {
  for (absl::string_view line : absl::StrSplit(summary, '\n')) {
    EXPECT_LE(line.size(), static_cast<size_t>(kSummaryWidth)) << line;
  }
}

TEST(FormatSummaryTest, SixteenDevicesFitAHundredColumns) {
  Scored scored = ScoredRequest(16, int64_t{16} << 30);
  v1::Provenance* provenance = scored.placement.mutable_provenance();
  provenance->set_algorithm("auto");
  provenance->set_requested_algorithm("auto");
  provenance->set_algorithm_version("auto-2+pardnn-5+m_etf-1+heft-1+metis-1+pipeline-1");
  provenance->set_winner("pardnn");
  provenance->set_winner_makespan_ns(scored.placement.metrics().makespan_ns() * 5 / 4);
  provenance->set_cache(v1::MISS);
  provenance->set_queue_ns(120'000);
  provenance->set_solve_ns(1'234'000'000);
  provenance->set_time_limited(true);
  const std::string summary = FormatSummary(
      scored.placement, {&scored.request.graph(), &scored.request.cluster(), nullptr, ""});
  ExpectFits(summary);
  EXPECT_THAT(summary, HasSubstr("FEASIBLE"));
  EXPECT_THAT(summary, HasSubstr("auto (winner: pardnn, search gained 20.0 %)"));
  EXPECT_THAT(summary, HasSubstr("speed-up "));
  EXPECT_THAT(summary, HasSubstr("MISS"));
  EXPECT_THAT(summary, HasSubstr("1.234 s"));
  EXPECT_THAT(summary, HasSubstr("120.0 us"));
  // One row per device; the prefix every name shares is shown once, in the header.
  EXPECT_THAT(summary, HasSubstr("\n/job:worker/replica:0/task:* "));
  EXPECT_THAT(summary, HasSubstr("\n15/device:GPU:15 "));
  EXPECT_THAT(summary, HasSubstr("cut short by the time limit"));
  // Six lines, a blank one, the table's header and one row per device: a screen.
  EXPECT_EQ(std::count(summary.begin(), summary.end(), '\n'), 6 + 1 + 1 + 16);
}

TEST(FormatSummaryTest, InfeasibleShowsTheReasonAndTheFullDevice) {
  Scored scored = ScoredRequest(4, 1 << 20);  // far too small
  ASSERT_EQ(scored.placement.outcome(), v1::INFEASIBLE);
  const std::string summary = FormatSummary(
      scored.placement, {&scored.request.graph(), &scored.request.cluster(), nullptr, ""});
  ExpectFits(summary);
  EXPECT_THAT(summary, HasSubstr("INFEASIBLE: "));
  EXPECT_THAT(summary, HasSubstr(" over\n"));
  EXPECT_THAT(summary, HasSubstr(">999%"));
  // The reason names all four devices; the summary keeps a few lines of it.
  EXPECT_THAT(summary, HasSubstr(" ...\n"));
  EXPECT_THAT(summary, HasSubstr("of weights and state)"));  // "(would not fit: ...", maybe wrapped
}

TEST(FormatSummaryTest, WithoutTheRequestDevicesAreNumbered) {
  Scored scored = ScoredRequest(2, int64_t{16} << 30);
  const std::string summary = FormatSummary(scored.placement, {nullptr, nullptr, nullptr,
                                                               "give --request=FILE"});
  EXPECT_THAT(summary, HasSubstr("one device  n/a (give --request=FILE)"));
  EXPECT_THAT(summary, HasSubstr("\n#1 "));
  EXPECT_THAT(summary, Not(HasSubstr("winner")));
}

TEST(FormatSummaryTest, ReplacementSaysWhatMoved) {
  Scored scored = ScoredRequest(4, int64_t{16} << 30);
  report::SummaryContext context{&scored.request.graph(), &scored.request.cluster(), nullptr, ""};
  // No previous placement: no line.
  EXPECT_THAT(FormatSummary(scored.placement, context), Not(HasSubstr("moved")));
  v1::PlacementOptions options;
  (*options.mutable_previous_placement())[scored.request.graph().ops(0).name()] = "gpu0";
  context.options = &options;
  EXPECT_THAT(FormatSummary(scored.placement, context), HasSubstr("moved       nothing"));
  int64_t persistent = 0;
  for (const v1::Op& op : scored.request.graph().ops()) persistent += op.persistent_bytes();
  ASSERT_GT(persistent, 0);
  scored.placement.mutable_metrics()->set_ops_moved(3);
  scored.placement.mutable_metrics()->set_bytes_moved(persistent / 4);
  const std::string summary = FormatSummary(scored.placement, context);
  ExpectFits(summary);
  EXPECT_THAT(summary, HasSubstr("moved       3 ops, "));
  EXPECT_THAT(summary, HasSubstr(" of weights and state (25.0 % of all)"));
}

TEST(FormatSummaryTest, ManyDevicesShowTheFullestAndCountTheRest) {
  Scored scored = ScoredRequest(40, int64_t{16} << 30);
  const std::string summary = FormatSummary(
      scored.placement, {&scored.request.graph(), &scored.request.cluster(), nullptr, ""});
  ExpectFits(summary);
  EXPECT_THAT(summary, HasSubstr("... and 24 more devices"));
}

// The table marks the recommended row; the last line says what came from the cache and how many
// contenders got a second solve (only when some did).
TEST(FormatRecommendationTest, MarksTheRecommendationAndCountsTheRefinedContenders) {
  v1::RecommendResponse response;
  for (int n : {1, 2}) {
    v1::RecommendCandidate* row = response.add_candidates();
    row->set_devices(n);
    row->set_data_parallel(1);
    row->set_step_ns(1'000'000 / n);
    row->set_microbatches_per_second(1000.0 * n);
    row->set_feasible(true);
    row->add_device_names(absl::StrCat("gpu", n));
  }
  response.set_recommended(1);
  response.set_reason("fastest: 2 devices");
  response.set_cache_hits(1);
  response.set_elapsed_ns(2'000'000);
  const std::string plain = FormatRecommendation(response);
  const std::vector<std::string> lines = absl::StrSplit(plain, '\n');
  ASSERT_GE(lines.size(), 3u);
  EXPECT_THAT(lines[2], ::testing::StartsWith("=>"));
  EXPECT_THAT(plain, HasSubstr("1 of 2 candidates from the cache"));
  EXPECT_THAT(plain, Not(HasSubstr("re-solved")));
  response.set_refined(1);
  EXPECT_THAT(FormatRecommendation(response), HasSubstr("1 contender re-solved with a longer share"));
}

TEST(FormatSummaryTest, EvaluateListsSomeViolations) {
  Scored scored = ScoredRequest(2, int64_t{16} << 30);
  google::protobuf::RepeatedPtrField<v1::ConstraintViolation> violations;
  for (int i = 0; i < 7; ++i) {
    v1::ConstraintViolation* violation = violations.Add();
    violation->set_field(absl::StrCat("device[", i, "]"));
    violation->set_description(std::string(150, 'x'));  // wrapped, never wider than the terminal
  }
  const std::string summary = FormatSummary(
      scored.placement, {&scored.request.graph(), &scored.request.cluster(), &violations, ""});
  ExpectFits(summary);
  EXPECT_THAT(summary, HasSubstr("7 constraint(s) broken"));
  EXPECT_THAT(summary, HasSubstr("device[4]:"));
  EXPECT_THAT(summary, Not(HasSubstr("device[5]:")));
  EXPECT_THAT(summary, HasSubstr("... and 2 more"));
}

}  // namespace
}  // namespace placement::report
