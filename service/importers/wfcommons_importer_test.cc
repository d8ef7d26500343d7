#include "service/importers/wfcommons_importer.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/importers/importers_test_util.h"

namespace placement::importers {
namespace {

using ::testing::HasSubstr;
using testing::EdgeBytes;
using testing::OpIndex;
using testing::PathExists;
using testing::SharedWorkload;
using testing::ValidationError;

// WfCommons instances are LGPL and not committed: read them from ../shared/workloads when present.
TEST(WfCommonsImporterTest, SraSearchGolden) {
  const std::string path = SharedWorkload("wfcommons/srasearch-chameleon-10a-001.json.gz");
  if (!PathExists(path)) GTEST_SKIP() << "shared workloads not present: " << path;
  absl::StatusOr<v1::PlaceRequest> request = ImportWfCommons(path, ImportOptions());
  ASSERT_TRUE(request.ok()) << request.status();
  const v1::Graph& graph = request->graph();
  EXPECT_EQ(graph.ops_size(), 22);
  EXPECT_EQ(graph.edges_size(), 30);
  const v1::Op& build = graph.ops(OpIndex(graph, "bowtie2-build_ID0000001"));
  EXPECT_EQ(build.compute_ns(), 6'352'000'000);
  EXPECT_EQ(build.temp_bytes(), 94'720'000);
  EXPECT_EQ(build.type(), "bowtie2-build");
  EXPECT_EQ(build.output_bytes(), 8'526'566);
  EXPECT_EQ(EdgeBytes(graph, "bowtie2-build_ID0000001", "bowtie2_ID0000003"), 8'526'566);
  EXPECT_EQ(ValidationError(*request), "");
}

TEST(WfCommonsImporterTest, EveryInstanceImportsAndValidates) {
  const std::string dir = SharedWorkload("wfcommons");
  if (!PathExists(dir)) GTEST_SKIP() << "shared workloads not present: " << dir;
  for (const char* name : {"montage-chameleon-dss-15d-001", "bwa-chameleon-large-001",
                           "epigenomics-chameleon-ilmn-6seq-50k-001"}) {
    absl::StatusOr<v1::PlaceRequest> request =
        ImportWfCommons(dir + "/" + name + ".json.gz", ImportOptions());
    ASSERT_TRUE(request.ok()) << name << ": " << request.status();
    EXPECT_EQ(ValidationError(*request), "") << name;
  }
}

constexpr char kTiny[] = R"({"workflow": {
  "specification": {
    "tasks": [
      {"id": "a", "parents": [], "inputFiles": ["in"], "outputFiles": ["x", "y"]},
      {"id": "b", "parents": ["a"], "inputFiles": ["x"], "outputFiles": []},
      {"id": "c", "parents": ["a", "b"], "inputFiles": ["y"], "outputFiles": []}],
    "files": [{"id": "in", "sizeInBytes": 5}, {"id": "x", "sizeInBytes": 100},
              {"id": "y", "sizeInBytes": 20}]},
  "execution": {"tasks": [
      {"id": "a", "runtimeInSeconds": 1.5, "memoryInBytes": 1000},
      {"id": "b", "runtimeInSeconds": 0.25},
      {"id": "c", "runtimeInSeconds": 2}]}}})";

TEST(WfCommonsImporterTest, TinyInstance) {
  absl::StatusOr<v1::PlaceRequest> request = ImportWfCommonsText("tiny.json", kTiny, ImportOptions());
  ASSERT_TRUE(request.ok()) << request.status();
  const v1::Graph& graph = request->graph();
  ASSERT_EQ(graph.ops_size(), 3);
  EXPECT_EQ(graph.ops(0).compute_ns(), 1'500'000'000);
  EXPECT_EQ(graph.ops(0).temp_bytes(), 1000);
  EXPECT_EQ(graph.ops(0).output_bytes(), 120);
  EXPECT_EQ(EdgeBytes(graph, "a", "b"), 100);
  EXPECT_EQ(EdgeBytes(graph, "a", "c"), 20);
  EXPECT_EQ(EdgeBytes(graph, "b", "c"), 0);  // ordering only
  EXPECT_EQ(ValidationError(*request), "");
}

TEST(WfCommonsImporterTest, Errors) {
  std::string text = kTiny;
  text.replace(text.find("\"runtimeInSeconds\": 0.25"), 24, "\"runtimeInSeconds\": \"x\"");
  absl::StatusOr<v1::PlaceRequest> r = ImportWfCommonsText("t.json", text, ImportOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("t.json: JSON path workflow.execution.tasks[1].runtimeInSeconds"));

  text = kTiny;
  text.replace(text.find("\"parents\": [\"a\"]"), 16, "\"parents\": [\"zz\"]");
  r = ImportWfCommonsText("t.json", text, ImportOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("unknown task 'zz'"));

  r = ImportWfCommonsText("t.json", "{\"workflow\": {}}", ImportOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("workflow.specification: missing"));
}

}  // namespace
}  // namespace placement::importers
