#include "service/importers/exporters.h"

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/importers/import_options.h"
#include "service/importers/importers_test_util.h"
#include "service/importers/pardnn_importer.h"

namespace placement::importers {
namespace {

using ::testing::HasSubstr;

v1::PlaceRequest Request() {
  v1::PlaceRequest request;
  *request.mutable_cluster() = DefaultCluster();
  *request.mutable_cluster()->add_devices() = DefaultCpuDevice();
  for (const char* name : {"a", "b,c", "noop"}) {
    v1::Op* op = request.mutable_graph()->add_ops();
    op->set_name(name);
  }
  request.mutable_graph()->mutable_ops(2)->set_type("NoOp");
  v1::Edge* edge = request.mutable_graph()->add_edges();
  edge->set_src(0);
  edge->set_dst(1);
  edge->set_bytes(8);
  return request;
}

v1::Placement Placement(int a, int b, int c) {
  v1::Placement placement;
  placement.add_device(a);
  placement.add_device(b);
  placement.add_device(c);
  return placement;
}

TEST(ExportersTest, Csv) {
  absl::StatusOr<std::string> text = ExportPlacement("csv", Request(), Placement(0, 4, 1));
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "name,device\na,gpu0\n\"b,c\",cpu0\nnoop,gpu1\n");
}

TEST(ExportersTest, ParDnnUsesMinusOneForCpuAndSkipsNoOps) {
  absl::StatusOr<std::string> text = ExportPlacement("pardnn", Request(), Placement(3, 4, 1));
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "a 3\nb,c -1\n");
}

TEST(ExportersTest, DotColoursByDeviceAndMarksCrossingEdges) {
  absl::StatusOr<std::string> text = ExportPlacement("dot", Request(), Placement(0, 1, 0));
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("digraph placement {"));
  EXPECT_THAT(*text, HasSubstr("\"a\" [fillcolor=\"#8dd3c7\", tooltip=\"gpu0\"]"));
  EXPECT_THAT(*text, HasSubstr("\"b,c\" [fillcolor=\"#ffffb3\", tooltip=\"gpu1\"]"));
  EXPECT_THAT(*text, HasSubstr("\"a\" -> \"b,c\" [color=red, penwidth=2];"));
}

TEST(ExportersTest, Errors) {
  EXPECT_FALSE(ExportPlacement("csv", Request(), Placement(0, 9, 0)).ok());
  v1::Placement short_placement;
  short_placement.add_device(0);
  absl::StatusOr<std::string> r = ExportPlacement("csv", Request(), short_placement);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("1 entries but the request has 3 ops"));
  r = ExportPlacement("svg", Request(), Placement(0, 0, 0));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("unknown export format 'svg'"));
}

std::string FileText(const std::vector<ExportedFile>& files, const std::string& name) {
  for (const ExportedFile& file : files) {
    if (file.name == name) return file.text;
  }
  ADD_FAILURE() << "no file " << name;
  return "";
}

// a -> "b c" (two parallel edges, 3 + 5 bytes), a -> d (2 bytes), lone op "x->y" unconnected.
v1::PlaceRequest ParDnnRequest() {
  v1::PlaceRequest request;
  *request.mutable_cluster() = DefaultCluster();
  const std::pair<const char*, int64_t> ops[] = {
      {"a", 2400}, {"b c", 499}, {"d", 0}, {"x->y", 7'000'600}, {"b_c", 10}, {"src", 1000}};
  for (auto [name, ns] : ops) {
    v1::Op* op = request.mutable_graph()->add_ops();
    op->set_name(name);
    op->set_compute_ns(ns);
  }
  for (auto [src, dst, bytes] : {std::tuple{0, 1, 3}, std::tuple{0, 1, 5}, std::tuple{0, 2, 2}}) {
    v1::Edge* edge = request.mutable_graph()->add_edges();
    edge->set_src(src);
    edge->set_dst(dst);
    edge->set_bytes(bytes);
  }
  return request;
}

TEST(ExportersTest, ParDnnInputFolderFilesAndSafeNames) {
  const v1::PlaceRequest request = ParDnnRequest();
  EXPECT_THAT(ParDnnNames(request.graph()),
              ::testing::ElementsAre("a", "b_c", "d", "x__y", "b_c_4", "src_5"));
  absl::StatusOr<std::vector<ExportedFile>> files = ExportParDnnInputs(request);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(FileText(*files, "crn_src_sink_low.dot"),
            "digraph{\na->b_c\na->d\nsrc->a\nsrc->x__y\nsrc->b_c_4\nsrc->src_5\n"
            "b_c->snk\nd->snk\nx__y->snk\nb_c_4->snk\nsrc_5->snk\n}\n");
  // µs rounded, at least 1; one size per producer: its largest (merged) edge.
  EXPECT_EQ(FileText(*files, "nodes_average_durations_fixed.txt"),
            "a::2\nb_c::1\nd::1\nx__y::7001\nb_c_4::1\nsrc_5::1\n");
  EXPECT_EQ(FileText(*files, "tensors_sz_32_low.txt"), "a::8\n");
  EXPECT_EQ(FileText(*files, "no_ops.txt"), "");
  EXPECT_EQ(FileText(*files, "var_nodes.txt"), "");
  EXPECT_EQ(FileText(*files, "ref_nodes.txt"), "");
}

TEST(ExportersTest, ParDnnInputFolderReadsBackWithTheParDnnImporter) {
  absl::StatusOr<std::vector<ExportedFile>> files = ExportParDnnInputs(ParDnnRequest());
  ASSERT_TRUE(files.ok()) << files.status();
  const std::string dir = testing::MakeTempDir();
  for (const ExportedFile& file : *files) testing::WriteText(dir + "/" + file.name, file.text);
  absl::StatusOr<v1::PlaceRequest> back = ImportParDnn(dir, ImportOptions());
  ASSERT_TRUE(back.ok()) << back.status();
  const v1::Graph& graph = back->graph();
  ASSERT_EQ(graph.ops_size(), 6);
  EXPECT_EQ(graph.ops(0).name(), "a");
  EXPECT_EQ(graph.ops(0).compute_ns(), 2000);
  EXPECT_EQ(graph.ops(0).output_bytes(), 8);
  ASSERT_EQ(graph.edges_size(), 2);
  for (const v1::Edge& edge : graph.edges()) {
    EXPECT_EQ(edge.src(), 0);
    EXPECT_EQ(edge.bytes(), 8);
  }
  for (const v1::Op& op : graph.ops()) EXPECT_TRUE(op.colocation_group().empty()) << op.name();
}

TEST(ExportersTest, ParDnnInputFolderRejectsEdgesOutOfRange) {
  v1::PlaceRequest request = ParDnnRequest();
  request.mutable_graph()->mutable_edges(0)->set_dst(6);
  absl::StatusOr<std::vector<ExportedFile>> files = ExportParDnnInputs(request);
  ASSERT_FALSE(files.ok());
  EXPECT_THAT(std::string(files.status().message()), HasSubstr("graph.edges[0]"));
}

}  // namespace
}  // namespace placement::importers
