#include "service/importers/pardnn_importer.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/importers/importers_test_util.h"

namespace placement::importers {
namespace {

using ::testing::HasSubstr;
using testing::EdgeBytes;
using testing::MakeTempDir;
using testing::OpIndex;
using testing::TestData;
using testing::ValidationError;
using testing::WriteText;

void ExpectGolden(const v1::PlaceRequest& request) {
  const v1::Graph& graph = request.graph();
  // src and snk are dropped; nodes in first-appearance order.
  ASSERT_EQ(graph.ops_size(), 11);
  EXPECT_EQ(graph.ops(0).name(), "input");
  EXPECT_EQ(OpIndex(graph, "src"), -1);
  EXPECT_EQ(OpIndex(graph, "snk"), -1);
  EXPECT_EQ(graph.edges_size(), 10);

  const v1::Op& matmul = graph.ops(OpIndex(graph, "matmul"));
  EXPECT_EQ(matmul.compute_ns(), 250'000);  // 250 µs
  EXPECT_EQ(matmul.output_bytes(), 600'000);  // memory.txt wins over the tensor size
  const v1::Op& relu = graph.ops(OpIndex(graph, "relu"));
  EXPECT_EQ(relu.output_bytes(), 524'288);
  EXPECT_EQ(EdgeBytes(graph, "matmul", "relu"), 524'288);  // edges carry the tensor size

  // Variables: persistent, nothing output.
  const v1::Op& w1 = graph.ops(OpIndex(graph, "w1"));
  EXPECT_EQ(w1.type(), "Variable");
  EXPECT_EQ(w1.persistent_bytes(), 524'288);
  EXPECT_EQ(w1.output_bytes(), 0);
  EXPECT_EQ(graph.ops(OpIndex(graph, "w1/momentum")).persistent_bytes(), 262'144);

  // The ref op joins its variables (and w1/read joins w1).
  for (const char* member : {"w1", "w1/read", "applymomentum_w1", "w1/momentum"}) {
    EXPECT_EQ(graph.ops(OpIndex(graph, member)).colocation_group(), "colo:w1") << member;
  }
  EXPECT_EQ(matmul.colocation_group(), "");
  // Unknown tensor size (-1) -> 0 bytes.
  EXPECT_EQ(graph.ops(OpIndex(graph, "applymomentum_w1")).output_bytes(), 0);

  // NO_OPs: listed ones and every ^name node; their edges carry nothing.
  const v1::Op& control = graph.ops(OpIndex(graph, "^control"));
  EXPECT_EQ(control.type(), "NoOp");
  EXPECT_EQ(EdgeBytes(graph, "grad", "^control"), 0);
  EXPECT_EQ(control.compute_ns(), 1'000);  // no duration line: the reference's 1 µs

  // CPU-only (vanilla_cleaned.place -1) -> allowed kinds {"cpu"}, and the default cluster gets a CPU.
  const v1::Op& saver = graph.ops(OpIndex(graph, "save/saver"));
  ASSERT_EQ(saver.allowed_kinds_size(), 1);
  EXPECT_EQ(saver.allowed_kinds(0), "cpu");
  EXPECT_EQ(relu.allowed_kinds_size(), 0);
  ASSERT_EQ(request.cluster().devices_size(), 5);
  EXPECT_EQ(request.cluster().devices(4).kind(), "cpu");
  EXPECT_EQ(ValidationError(request), "");
}

TEST(ParDnnImporterTest, ReferenceFileNames) {
  absl::StatusOr<v1::PlaceRequest> request = ImportParDnn(TestData("pardnn/folder_a"), ImportOptions());
  ASSERT_TRUE(request.ok()) << request.status();
  ExpectGolden(*request);
}

TEST(ParDnnImporterTest, ShortFileNamesAndGzip) {
  absl::StatusOr<v1::PlaceRequest> request = ImportParDnn(TestData("pardnn/folder_b"), ImportOptions());
  ASSERT_TRUE(request.ok()) << request.status();
  ExpectGolden(*request);
}

TEST(ParDnnImporterTest, DotFileAsPath) {
  absl::StatusOr<v1::PlaceRequest> request =
      ImportParDnn(TestData("pardnn/folder_a/crn_src_sink_low.dot"), ImportOptions());
  ASSERT_TRUE(request.ok()) << request.status();
  ExpectGolden(*request);
}

TEST(ParDnnImporterTest, GivenClusterWithoutCpuIsAnError) {
  ImportOptions options;
  options.cluster = DefaultCluster();
  absl::StatusOr<v1::PlaceRequest> request = ImportParDnn(TestData("pardnn/folder_a"), options);
  ASSERT_FALSE(request.ok());
  EXPECT_THAT(std::string(request.status().message()), HasSubstr("no device of kind \"cpu\""));
}

TEST(ParDnnImporterTest, Errors) {
  const std::string dir = MakeTempDir();
  absl::StatusOr<v1::PlaceRequest> r = ImportParDnn(dir, ImportOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("graph.dot"));

  WriteText(dir + "/graph.dot", "digraph{\n\"src\"->\"a\"\n\"a\"->\"b\"\n\"b\"->\"snk\"\n}\n");
  WriteText(dir + "/weights.txt", "\"a\":: 10\n\"b\":: ten\n");
  r = ImportParDnn(dir, ImportOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("weights.txt:2:"));

  WriteText(dir + "/weights.txt", "\"a\":: 10\n\"b\":: 20\n");
  r = ImportParDnn(dir, ImportOptions());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->graph().ops_size(), 2);
  EXPECT_EQ(r->graph().ops(1).compute_ns(), 20'000);

  r = ImportParDnn(dir + "/nothing-here", ImportOptions());
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace placement::importers
