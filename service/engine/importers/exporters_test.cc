#include "service/engine/importers/exporters.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/engine/importers/import_options.h"

namespace placement::engine::importers {
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

}  // namespace
}  // namespace placement::engine::importers
