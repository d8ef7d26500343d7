#include "service/importers/msr_importer.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/importers/importers_test_util.h"

namespace placement::importers {
namespace {

using ::testing::HasSubstr;
using testing::EdgeBytes;
using testing::OpIndex;
using testing::TestData;
using testing::ValidationError;

TEST(MsrImporterTest, LayerGraphGolden) {
  absl::StatusOr<v1::PlaceRequest> request =
      ImportMsr(TestData("msr/bert24_training.json"), ImportOptions());
  ASSERT_TRUE(request.ok()) << request.status();
  const v1::Graph& graph = request->graph();
  EXPECT_EQ(graph.ops_size(), 64);
  EXPECT_EQ(graph.edges_size(), 110);
  int backward = 0;
  for (const v1::Op& op : graph.ops()) backward += op.type() == "backward";
  EXPECT_EQ(backward, 32);

  // node3: fpgaLatency 0.696 ms, size 131325952; node3grad: 4.778 ms, same colour class.
  const int32_t node3 = OpIndex(graph, "node3"), grad = OpIndex(graph, "node3grad");
  ASSERT_GE(node3, 0);
  ASSERT_GE(grad, 0);
  EXPECT_EQ(graph.ops(node3).compute_ns(), 696'000);
  EXPECT_EQ(graph.ops(node3).persistent_bytes(), 131'325'952);
  EXPECT_EQ(graph.ops(node3).output_bytes(), 0);
  EXPECT_EQ(graph.ops(grad).compute_ns(), 4'778'000);
  EXPECT_EQ(graph.ops(grad).type(), "backward");
  EXPECT_EQ(graph.ops(node3).colocation_group(), "color3");
  EXPECT_EQ(graph.ops(grad).colocation_group(), "color3");
  EXPECT_EQ(EdgeBytes(graph, "node3", "node5"), 4'194'304);

  // The file's own cluster: maxFPGAs = 6 devices of maxSizePerFPGA bytes; 2 GiB/s links.
  const v1::Cluster& cluster = request->cluster();
  ASSERT_EQ(cluster.devices_size(), 6);
  EXPECT_EQ(cluster.devices(0).memory_bytes(), 17'185'374'208);
  EXPECT_EQ(cluster.devices(0).kind(), "gpu");
  EXPECT_EQ(cluster.intra_node().bandwidth_bytes_per_second(), 2'147'483'648);
  EXPECT_EQ(ValidationError(*request), "");
}

TEST(MsrImporterTest, OperatorGraphGzippedGolden) {
  absl::StatusOr<v1::PlaceRequest> request =
      ImportMsr(TestData("msr/bert_l-3_training.json.gz"), ImportOptions());
  ASSERT_TRUE(request.ok()) << request.status();
  const v1::Graph& graph = request->graph();
  EXPECT_EQ(graph.ops_size(), 600);
  EXPECT_EQ(graph.edges_size(), 817);
  EXPECT_EQ(request->cluster().devices_size(), 3);
  // A node without colorClass has no group; a bias shares class 43 with the ops using it.
  const int32_t shape = OpIndex(graph, "Shape1");
  ASSERT_GE(shape, 0);
  EXPECT_EQ(graph.ops(shape).colocation_group(), "");
  EXPECT_EQ(graph.ops(shape).compute_ns(), 0);  // 4.4e-7 ms rounds to 0 ns
  const int32_t bias = OpIndex(graph, "bert.encoder.layer.2.output.dense.bias");
  ASSERT_GE(bias, 0);
  EXPECT_EQ(graph.ops(bias).colocation_group(), "color43");
  EXPECT_EQ(graph.ops(bias).persistent_bytes(), 512);
  EXPECT_EQ(ValidationError(*request), "");
}

TEST(MsrImporterTest, ClusterFlagOverridesAndActivationsOption) {
  ImportOptions options;
  options.cluster = DefaultCluster();
  options.msr_count_activations = true;
  absl::StatusOr<v1::PlaceRequest> request = ImportMsr(TestData("msr/bert24_training.json"), options);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->cluster().devices_size(), 4);
  const int32_t node3 = OpIndex(request->graph(), "node3");
  EXPECT_EQ(request->graph().ops(node3).output_bytes(), 4'194'304);
}

TEST(MsrImporterTest, ErrorsNameFileAndJsonPath) {
  const ImportOptions options;
  absl::StatusOr<v1::PlaceRequest> r = ImportMsrText("bad.json", R"({"nodes": [], "edges": [)", options);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("bad.json:1:"));

  r = ImportMsrText("bad.json",
                    R"({"maxSizePerFPGA": 1, "maxFPGAs": 1, "nodes": [
                         {"id": 1, "name": "a", "fpgaLatency": 1, "size": 1},
                         {"id": 2, "name": "b", "fpgaLatency": "slow", "size": 1}], "edges": []})",
                    options);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("nodes[1].fpgaLatency"));

  r = ImportMsrText("bad.json",
                    R"({"maxSizePerFPGA": 1, "maxFPGAs": 1, "nodes": [
                         {"id": 1, "name": "a", "fpgaLatency": 1, "size": 1}],
                        "edges": [{"sourceId": 1, "destId": 7, "size": 4}]})",
                    options);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("edges[0].destId: no node has id 7"));

  r = ImportMsrText("bad.json",
                    R"({"maxSizePerFPGA": 1, "maxFPGAs": 1, "nodes": [
                         {"id": 1, "name": "a", "fpgaLatency": -3, "size": 1}], "edges": []})",
                    options);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("negative"));

  r = ImportMsr(TestData("msr/does_not_exist.json"), options);
  EXPECT_FALSE(r.ok());
}

TEST(MsrImporterTest, CpuOnlyNodesGetACpuDevice) {
  absl::StatusOr<v1::PlaceRequest> r = ImportMsrText(
      "cpu.json",
      R"({"maxSizePerFPGA": 1000, "maxFPGAs": 2, "maxCPUs": 1, "nodes": [
           {"id": 1, "name": "a", "fpgaLatency": 1, "cpuLatency": 10, "size": 1},
           {"id": 2, "name": "b", "supportedOnFpga": false, "fpgaLatency": 0, "cpuLatency": 2.5,
            "size": 1}],
          "edges": [{"sourceId": 1, "destId": 2, "cost": 0.5, "size": 1000}]})",
      ImportOptions());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->cluster().devices_size(), 3);
  EXPECT_EQ(r->cluster().devices(2).kind(), "cpu");
  EXPECT_EQ(r->graph().ops(1).compute_ns(), 2'500'000);
  ASSERT_EQ(r->graph().ops(1).allowed_kinds_size(), 1);
  EXPECT_EQ(r->graph().ops(1).allowed_kinds(0), "cpu");
  EXPECT_EQ(r->cluster().intra_node().bandwidth_bytes_per_second(), 2'147'483'648);
  EXPECT_EQ(ValidationError(*r), "");
}

}  // namespace
}  // namespace placement::importers
