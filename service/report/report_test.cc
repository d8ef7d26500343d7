#include "service/report/report.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/v1/placement.pb.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/sim/simulator.h"
#include "tests/testutil/random_graph.h"

namespace placement::report {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

int CountOccurrences(const std::string& text, const std::string& needle) {
  int count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++count;
  return count;
}

// Checks that every element is closed in order (a small XML-ish well-formedness check: HTML void
// elements and self-closing tags need no end tag). Returns "" when fine, else what went wrong.
std::string NestingProblem(const std::string& html) {
  static const std::vector<std::string> kVoid = {"meta", "br", "hr", "img", "link", "input"};
  std::vector<std::string> open;
  size_t at = 0;
  while ((at = html.find('<', at)) != std::string::npos) {
    const size_t end = html.find('>', at);
    if (end == std::string::npos) return "unterminated tag";
    const std::string tag = html.substr(at + 1, end - at - 1);
    at = end + 1;
    if (tag.empty()) return "empty tag";
    if (tag[0] == '!') continue;  // <!DOCTYPE html>
    if (tag.back() == '/') continue;
    if (tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (open.empty() || open.back() != name) {
        return absl::StrCat("</", name, "> closes <", open.empty() ? "nothing" : open.back(), ">");
      }
      open.pop_back();
      continue;
    }
    const std::string name = tag.substr(0, tag.find_first_of(" \n\t"));
    if (std::find(kVoid.begin(), kVoid.end(), name) != kVoid.end()) continue;
    open.push_back(name);
    if (name == "style") {  // raw text up to </style>
      at = html.find("</style>", at);
      if (at == std::string::npos) return "unterminated style";
    }
  }
  if (!open.empty()) return absl::StrCat("<", open.back(), "> never closed");
  return "";
}

// Three ops on two of three devices: a -> b crosses devices (one transfer), a -> c stays.
v1::PlaceRequest SmallRequest() {
  v1::PlaceRequest request;
  v1::Graph* graph = request.mutable_graph();
  auto add_op = [&](const std::string& name, const std::string& type, int64_t compute) {
    v1::Op* op = graph->add_ops();
    op->set_name(name);
    op->set_type(type);
    op->set_compute_ns(compute);
    op->set_output_bytes(1000);
    op->set_persistent_bytes(500);
  };
  add_op("<a href=\"x\">&'", "MatMul", 1000);
  add_op("b", "Conv2D", 2000);
  add_op("c", "", 1500);
  for (int dst : {1, 2}) {
    v1::Edge* edge = graph->add_edges();
    edge->set_src(0);
    edge->set_dst(dst);
    edge->set_bytes(1000);
  }
  v1::Cluster* cluster = request.mutable_cluster();
  for (const char* name : {"gpu<0>", "gpu1", "gpu2"}) {
    v1::Device* device = cluster->add_devices();
    device->set_name(name);
    device->set_kind("gpu");
    device->set_node("h0");
    device->set_memory_bytes(1 << 20);
  }
  cluster->mutable_intra_node()->set_bandwidth_bytes_per_second(1'000'000'000);
  cluster->mutable_intra_node()->set_latency_ns(100);
  return request;
}

v1::Placement PlacementOf(std::vector<int32_t> devices) {
  v1::Placement placement;
  for (int32_t d : devices) placement.add_device(d);
  return placement;
}

TEST(ReportTest, OneLanePerDeviceInBothCharts) {
  absl::StatusOr<engine::Model> model = engine::BuildModel(SmallRequest());
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<std::string> html =
      RenderHtmlReport(*model, {{"pardnn", PlacementOf({0, 1, 0}), ""}}, ReportOptions());
  ASSERT_TRUE(html.ok()) << html.status();
  EXPECT_EQ(CountOccurrences(*html, "<svg class=\"gantt\""), 1);
  EXPECT_EQ(CountOccurrences(*html, "<g class=\"lane\""), 3);
  EXPECT_EQ(CountOccurrences(*html, "<g class=\"memory-lane\""), 3);
  EXPECT_EQ(CountOccurrences(*html, "<line class=\"capacity\""), 3);
  EXPECT_EQ(CountOccurrences(*html, "<rect class=\"op\""), 3);
  EXPECT_EQ(CountOccurrences(*html, "<line class=\"transfer\""), 1);
  // A single run has no comparison table.
  EXPECT_THAT(*html, Not(HasSubstr("class=\"compare\"")));
  EXPECT_EQ(NestingProblem(*html), "");
}

TEST(ReportTest, NamesAreEscaped) {
  absl::StatusOr<engine::Model> model = engine::BuildModel(SmallRequest());
  ASSERT_TRUE(model.ok());
  ReportOptions options;
  options.title = "report <for> \"me\"";
  absl::StatusOr<std::string> html =
      RenderHtmlReport(*model, {{"run & <done>", PlacementOf({0, 1, 0}), ""}}, options);
  ASSERT_TRUE(html.ok());
  EXPECT_THAT(*html, HasSubstr("&lt;a href=&quot;x&quot;&gt;&amp;&#39;"));
  EXPECT_THAT(*html, Not(HasSubstr("<a href")));
  EXPECT_THAT(*html, HasSubstr("data-device=\"gpu&lt;0&gt;\""));
  EXPECT_THAT(*html, HasSubstr("<h2>run &amp; &lt;done&gt;</h2>"));
  EXPECT_THAT(*html, HasSubstr("<title>report &lt;for&gt; &quot;me&quot;</title>"));
  EXPECT_THAT(*html, HasSubstr("(no type)"));
  EXPECT_EQ(NestingProblem(*html), "");
}

TEST(ReportTest, SelfContained) {
  absl::StatusOr<engine::Model> model = engine::BuildModel(SmallRequest());
  ASSERT_TRUE(model.ok());
  absl::StatusOr<std::string> html =
      RenderHtmlReport(*model, {{"x", PlacementOf({0, 0, 0}), ""}}, ReportOptions());
  ASSERT_TRUE(html.ok());
  EXPECT_THAT(*html, Not(HasSubstr("<script")));
  EXPECT_THAT(*html, Not(HasSubstr("<link")));
  EXPECT_THAT(*html, Not(HasSubstr("src=")));
  EXPECT_THAT(*html, Not(HasSubstr("url(")));
  EXPECT_TRUE(absl::StartsWith(*html, "<!DOCTYPE html>"));
}

TEST(ReportTest, NestingCheckerCatchesBrokenMarkup) {
  EXPECT_EQ(NestingProblem("<p><b>x</b></p>"), "");
  EXPECT_NE(NestingProblem("<p><b>x</p></b>"), "");
  EXPECT_NE(NestingProblem("<p>"), "");
}

TEST(ReportTest, ComparisonTableForSeveralRuns) {
  absl::StatusOr<engine::Model> model = engine::BuildModel(SmallRequest());
  ASSERT_TRUE(model.ok());
  std::vector<ReportRun> runs = {{"single", PlacementOf({0, 0, 0}), ""},
                                 {"spread", PlacementOf({0, 1, 2}), ""},
                                 {"broken", v1::Placement(), "INTERNAL: it fell over"}};
  absl::StatusOr<std::string> html = RenderHtmlReport(*model, runs, ReportOptions());
  ASSERT_TRUE(html.ok());
  EXPECT_EQ(CountOccurrences(*html, "<table class=\"compare\""), 1);
  EXPECT_EQ(CountOccurrences(*html, "(best)"), 1);
  EXPECT_THAT(*html, HasSubstr("error: INTERNAL: it fell over"));
  // The failed run has no charts; the other two have one Gantt chart each.
  EXPECT_EQ(CountOccurrences(*html, "<svg class=\"gantt\""), 2);
  EXPECT_EQ(NestingProblem(*html), "");
}

TEST(ReportTest, MismatchedPlacementIsRejected) {
  absl::StatusOr<engine::Model> model = engine::BuildModel(SmallRequest());
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(RenderHtmlReport(*model, {{"x", PlacementOf({0, 1}), ""}}, ReportOptions()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      RenderHtmlReport(*model, {{"x", PlacementOf({0, 1, 3}), ""}}, ReportOptions()).status().code(),
      absl::StatusCode::kInvalidArgument);
}

TEST(ReportTest, AssignmentFollowsTheRequestOrder) {
  v1::PlaceRequest request = SmallRequest();
  absl::StatusOr<engine::Model> model = engine::BuildModel(request);
  ASSERT_TRUE(model.ok());
  absl::StatusOr<engine::Assignment> assignment = AssignmentOf(*model, PlacementOf({2, 1, 0}));
  ASSERT_TRUE(assignment.ok());
  for (int i = 0; i < 3; ++i) EXPECT_EQ((*assignment)[model->op_of_request_index[i]], 2 - i);
}

TEST(ReportTest, MemoryStepsPeakMatchesTheSimulator) {
  testutil::RandomGraphOptions graph;
  graph.num_ops = 400;
  graph.num_devices = 4;
  graph.seed = 7;
  const v1::PlaceRequest request = testutil::RandomLayeredRequest(graph);
  absl::StatusOr<engine::Model> model = engine::BuildModel(request);
  ASSERT_TRUE(model.ok());
  engine::Assignment assignment(model->num_ops());
  for (engine::OpId v = 0; v < model->num_ops(); ++v) assignment[v] = v % model->num_devices();
  engine::Simulator simulator(*model);
  engine::SimOptions options;
  options.record_memory_intervals = true;
  const engine::SimResult& sim = simulator.Run(assignment, options);
  const auto steps = MemorySteps(*model, sim);
  ASSERT_EQ(steps.size(), 4u);
  for (engine::DeviceId d = 0; d < 4; ++d) {
    int64_t peak = 0, peak_time = -1;
    for (const auto& [time, bytes] : steps[d]) {
      if (bytes > peak) {
        peak = bytes;
        peak_time = time;
      }
    }
    EXPECT_EQ(peak, sim.peak_memory_bytes[d]) << "device " << d;
    EXPECT_EQ(peak_time, sim.peak_time_ns[d]) << "device " << d;
    ASSERT_FALSE(steps[d].empty());
    EXPECT_EQ(steps[d].back().second, 0) << "everything is freed by the end";
  }
}

TEST(ReportTest, HugeGraphsAreAggregated) {
  testutil::RandomGraphOptions graph;
  graph.num_ops = 3000;
  graph.num_devices = 4;
  graph.seed = 3;
  const v1::PlaceRequest request = testutil::RandomLayeredRequest(graph);
  absl::StatusOr<engine::Model> model = engine::BuildModel(request);
  ASSERT_TRUE(model.ok());
  v1::Placement placement;
  for (int i = 0; i < request.graph().ops_size(); ++i) placement.add_device(i % 4);
  ReportOptions options;
  options.max_drawn_ops = 1000;
  options.max_drawn_transfers = 50;
  absl::StatusOr<std::string> html = RenderHtmlReport(*model, {{"rr", placement, ""}}, options);
  ASSERT_TRUE(html.ok());
  EXPECT_EQ(CountOccurrences(*html, "<rect class=\"op\""), 0);
  const int busy = CountOccurrences(*html, "<rect class=\"busy\"");
  EXPECT_GT(busy, 0);
  EXPECT_LE(busy, 4 * options.chart_width_px);
  EXPECT_EQ(CountOccurrences(*html, "<line class=\"transfer\""), 50);
  EXPECT_THAT(*html, HasSubstr("are drawn"));
  EXPECT_EQ(CountOccurrences(*html, "<g class=\"lane\""), 4);
  EXPECT_EQ(NestingProblem(*html), "");
  // Bounded output: well under what one bar per op with tooltips would take.
  EXPECT_LT(html->size(), 1u << 20);
}

TEST(ReportTest, AggregatedColumnsPreferNamedTypesOverOthers) {
  // 14 types of equal work: 11 get colours, 3 share "other types", which together outweigh any one
  // named type in almost every column but must not paint the chart grey.
  testutil::RandomGraphOptions graph;
  graph.num_ops = 28000;  // about 13 ops per pixel column and device
  graph.num_devices = 2;
  graph.min_compute_ns = graph.max_compute_ns = 1000;
  graph.seed = 5;
  v1::PlaceRequest request = testutil::RandomLayeredRequest(graph);
  for (int i = 0; i < request.graph().ops_size(); ++i) {
    request.mutable_graph()->mutable_ops(i)->set_type(absl::StrCat("type", i % 14));
  }
  absl::StatusOr<engine::Model> model = engine::BuildModel(request);
  ASSERT_TRUE(model.ok());
  v1::Placement placement;
  for (int i = 0; i < request.graph().ops_size(); ++i) placement.add_device(i % 2);
  ReportOptions options;
  options.max_drawn_ops = 100;
  absl::StatusOr<std::string> html = RenderHtmlReport(*model, {{"rr", placement, ""}}, options);
  ASSERT_TRUE(html.ok());
  EXPECT_THAT(*html, HasSubstr("3 other types"));
  // Grey is left for the odd column where only those three types ran (edges of the schedule).
  const int busy = CountOccurrences(*html, "<rect class=\"busy\"");
  EXPECT_GT(busy, 100);
  EXPECT_LT(CountOccurrences(*html, "fill=\"#bab0ac\""), busy / 50);
}

TEST(ReportTest, EscapeHtmlCoversEveryMetacharacter) {
  EXPECT_EQ(EscapeHtml("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  EXPECT_EQ(EscapeHtml("plain"), "plain");
}

}  // namespace
}  // namespace placement::report
