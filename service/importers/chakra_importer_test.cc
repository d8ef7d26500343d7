#include "service/importers/chakra_importer.h"

#include <string>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/importers/import_util.h"
#include "service/importers/importers_test_util.h"
#include "service/importers/scaled_graphs.h"

namespace placement::importers {
namespace {

using ::testing::HasSubstr;
using testing::EdgeBytes;
using testing::MakeTempDir;
using testing::PathExists;
using testing::SharedWorkload;
using testing::TestData;
using testing::ValidationError;
using testing::WriteText;

int CountType(const v1::Graph& graph, const std::string& type) {
  int count = 0;
  for (const v1::Op& op : graph.ops()) count += op.type() == type;
  return count;
}

const v1::Op* FindByPrefix(const v1::Graph& graph, const std::string& prefix) {
  for (const v1::Op& op : graph.ops()) {
    if (absl::StartsWith(op.name(), prefix)) return &op;
  }
  return nullptr;
}

// ResNet-18, one training iteration (ET schema 1.0.1), no Kineto: roofline times.
TEST(ChakraImporterTest, ResNet18Golden) {
  ChakraImportStats stats;
  absl::StatusOr<v1::PlaceRequest> request =
      ImportChakra(TestData("chakra/resnet_et_2023_pid23442.json.gz"), ImportOptions(), &stats);
  ASSERT_TRUE(request.ok()) << request.status();
  const v1::Graph& graph = request->graph();
  EXPECT_EQ(stats.et_nodes, 1313);
  EXPECT_EQ(stats.kineto_iterations_matched, 0);
  // 231 top-level nodes; the zero_grad scope is opened into its ops.
  EXPECT_EQ(graph.ops_size(), stats.top_level_ops);
  EXPECT_GT(graph.ops_size(), 231);
  EXPECT_EQ(CountType(graph, "aten::conv2d"), 20);
  EXPECT_EQ(CountType(graph, "ConvolutionBackward0"), 20);
  EXPECT_EQ(CountType(graph, "CudnnBatchNormBackward0"), 20);

  // The first conv's output (128x64x112x112 fp32) feeds the first batch norm.
  const v1::Op* conv = FindByPrefix(graph, "aten::conv2d@");
  const v1::Op* bn = FindByPrefix(graph, "aten::batch_norm@");
  ASSERT_NE(conv, nullptr);
  ASSERT_NE(bn, nullptr);
  EXPECT_EQ(EdgeBytes(graph, conv->name(), bn->name()), int64_t{128} * 64 * 112 * 112 * 4);
  // Its weights (64x3x7x7 fp32) are state: persistent on the conv, shared with its backward op.
  EXPECT_EQ(conv->persistent_bytes(), 64 * 3 * 7 * 7 * 4);
  ASSERT_FALSE(conv->colocation_group().empty());
  int group_members = 0;
  bool backward_in_group = false;
  for (const v1::Op& op : graph.ops()) {
    if (op.colocation_group() != conv->colocation_group()) continue;
    ++group_members;
    backward_in_group |= op.type() == "ConvolutionBackward0";
  }
  EXPECT_GE(group_members, 2);
  EXPECT_TRUE(backward_in_group);
  // Roofline time of conv1: 2 * 128*64*112*112 * 3*7*7 FLOPs = 30.21 GFLOP -> 1.924 ms at 15.7 TFLOP/s
  // (compute-bound: its 0.5 GB of traffic takes 0.54 ms at 900 GB/s), plus the 5 µs launch.
  EXPECT_NEAR(static_cast<double>(conv->compute_ns()), 1.929e6, 0.002e6);
  EXPECT_EQ(ValidationError(*request), "");
}

// The same iteration with GPU kernel times from a three-iteration excerpt of its Kineto trace.
TEST(ChakraImporterTest, ResNet18WithKineto) {
  ImportOptions options;
  options.kineto_path = TestData("chakra/resnet_kineto_pid23442_3iter.json.gz");
  ChakraImportStats stats;
  absl::StatusOr<v1::PlaceRequest> request =
      ImportChakra(TestData("chakra/resnet_et_2023_pid23442.json.gz"), options, &stats);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(stats.kineto_iterations_matched, 3);
  EXPECT_GT(stats.ops_with_kineto_time, stats.top_level_ops * 9 / 10);
  int64_t total_ns = 0;
  for (const v1::Op& op : request->graph().ops()) total_ns += op.compute_ns();
  // One ResNet-18 step at batch 128 on an RTX 2080 Ti: about 0.2 s of GPU time.
  EXPECT_GT(total_ns, 100'000'000);
  EXPECT_LT(total_ns, 400'000'000);
  EXPECT_EQ(ValidationError(*request), "");
}

TEST(ChakraImporterTest, FullKinetoTraceFromSharedWorkloads) {
  const std::string dir = SharedWorkload("pytorch_execution_traces_param");
  if (!PathExists(dir)) GTEST_SKIP() << "shared workloads not present: " << dir;
  ImportOptions options;
  options.kineto_path = dir + "/resnet_kineto_pid23442.json.gz";
  ChakraImportStats stats;
  absl::StatusOr<v1::PlaceRequest> request =
      ImportChakra(dir + "/resnet_et_2023_pid23442.json.gz", options, &stats);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_GE(stats.kineto_iterations_matched, 5);
  EXPECT_EQ(ValidationError(*request), "");
}

TEST(ChakraImporterTest, SchemaOneOneAndTarFromSharedWorkloads) {
  const std::string dir = SharedWorkload("pytorch_execution_traces_param");
  if (!PathExists(dir)) GTEST_SKIP() << "shared workloads not present: " << dir;
  ChakraImportStats stats;
  absl::StatusOr<v1::PlaceRequest> resnet50 =
      ImportChakra(dir + "/resnet_et_2024_chakra.json.gz", ImportOptions(), &stats);
  ASSERT_TRUE(resnet50.ok()) << resnet50.status();
  EXPECT_EQ(CountType(resnet50->graph(), "ConvolutionBackward0"), 53);  // one of the 3 steps
  EXPECT_EQ(ValidationError(*resnet50), "");

  absl::StatusOr<v1::PlaceRequest> gpt2 =
      ImportChakra(dir + "/hf_GPT2_et.json.tar.gz", ImportOptions(), &stats);
  ASSERT_TRUE(gpt2.ok()) << gpt2.status();
  EXPECT_EQ(stats.et_nodes, 27156);
  EXPECT_GT(gpt2->graph().ops_size(), 4000);
  EXPECT_EQ(ValidationError(*gpt2), "");

  // Its transformer blocks are recoverable and can be stacked (bench/corpus gpt2_*).
  int64_t blocks = 0;
  absl::StatusOr<std::vector<int64_t>> layers = LabelTransformerBlocks(gpt2->graph(), &blocks);
  ASSERT_TRUE(layers.ok()) << layers.status();
  EXPECT_EQ(blocks, 36);
  StackSpec spec;
  spec.first_layer = 1;
  spec.last_layer = blocks;
  spec.template_layer = blocks / 2;
  spec.target_ops = 12'000;
  absl::StatusOr<v1::Graph> stacked = StackLayers(gpt2->graph(), *layers, spec);
  ASSERT_TRUE(stacked.ok()) << stacked.status();
  EXPECT_GT(stacked->ops_size(), 11'800);
  EXPECT_LE(stacked->ops_size(), 12'000);
  v1::PlaceRequest big;
  *big.mutable_graph() = *stacked;
  *big.mutable_cluster() = DefaultCluster();
  EXPECT_EQ(ValidationError(big), "");
}

TEST(ChakraImporterTest, Errors) {
  const std::string dir = MakeTempDir();
  WriteText(dir + "/bad.json", "{\"schema\": \"1.0.1\",\n \"nodes\": [\n {\"id\": 1,, }]}");
  absl::StatusOr<v1::PlaceRequest> r = ImportChakra(dir + "/bad.json", ImportOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("bad.json:3:"));

  WriteText(dir + "/noid.json", "{\"nodes\": [{\"name\": \"aten::add\", \"parent\": 1}]}");
  r = ImportChakra(dir + "/noid.json", ImportOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("JSON path nodes[0].id: missing"));

  ImportOptions options;
  options.kineto_path = dir + "/bad.json";
  r = ImportChakra(TestData("chakra/resnet_et_2023_pid23442.json.gz"), options);
  EXPECT_FALSE(r.ok());
}

// Two ops: B reads what A wrote; C updates A's output in place after B read it.
TEST(ChakraImporterTest, DependenciesFromTensorReadsAndInPlaceWrites) {
  const std::string dir = MakeTempDir();
  WriteText(dir + "/tiny.json", R"json({"schema": "1.1.0-chakra.0.0.4", "nodes": [
    {"id": 1, "name": "[pytorch|profiler|execution_trace|process]", "ctrl_deps": 1,
     "inputs": {"values": [], "types": []}, "outputs": {"values": [], "types": []}},
    {"id": 2, "name": "aten::mul", "ctrl_deps": 1,
     "inputs": {"values": [[10, 10, 0, 256, 4, "cuda:0"]], "types": ["Tensor(float)"], "shapes": [[256]]},
     "outputs": {"values": [[11, 11, 0, 256, 4, "cuda:0"]], "types": ["Tensor(float)"], "shapes": [[256]]}},
    {"id": 3, "name": "aten::relu", "ctrl_deps": 1,
     "inputs": {"values": [[11, 11, 0, 256, 4, "cuda:0"]], "types": ["Tensor(float)"], "shapes": [[256]]},
     "outputs": {"values": [[12, 12, 0, 256, 4, "cuda:0"]], "types": ["Tensor(float)"], "shapes": [[256]]}},
    {"id": 4, "name": "aten::add_", "ctrl_deps": 1,
     "inputs": {"values": [[11, 11, 0, 256, 4, "cuda:0"], 1], "types": ["Tensor(float)", "Int"]},
     "outputs": {"values": [[11, 11, 0, 256, 4, "cuda:0"]], "types": ["Tensor(float)"]}},
    {"id": 5, "name": "aten::sum", "ctrl_deps": 1,
     "inputs": {"values": [[11, 11, 0, 256, 4, "cuda:0"]], "types": ["Tensor(float)"]},
     "outputs": {"values": [[13, 13, 0, 1, 4, "cuda:0"]], "types": ["Tensor(float)"]}}]})json");
  absl::StatusOr<v1::PlaceRequest> r = ImportChakra(dir + "/tiny.json", ImportOptions());
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::Graph& graph = r->graph();
  ASSERT_EQ(graph.ops_size(), 4);
  EXPECT_EQ(EdgeBytes(graph, "aten::mul@2", "aten::relu@3"), 1024);
  EXPECT_EQ(EdgeBytes(graph, "aten::mul@2", "aten::add_@4"), 1024);
  EXPECT_EQ(EdgeBytes(graph, "aten::relu@3", "aten::add_@4"), 0);   // write after read
  EXPECT_EQ(EdgeBytes(graph, "aten::add_@4", "aten::sum@5"), 1024);  // reads the updated value
  EXPECT_EQ(EdgeBytes(graph, "aten::mul@2", "aten::sum@5"), -1);
  EXPECT_EQ(graph.ops(0).persistent_bytes(), 1024);  // tensor 10: read, never written: state
  EXPECT_EQ(graph.ops(0).output_bytes(), 1024);
  EXPECT_EQ(ValidationError(*r), "");
}

TEST(ImportUtilTest, ExtractFromTar) {
  // A one-member ustar archive built by hand: 512-byte header, data padded to 512, two zero blocks.
  std::string header(512, '\0');
  const std::string name = "dir/trace.json", data = "{\"nodes\": []}";
  header.replace(0, name.size(), name);
  header.replace(124, 11, "00000000015");  // 13 bytes, octal
  header[156] = '0';
  header.replace(257, 5, "ustar");
  std::string tar = header + data + std::string(512 - data.size(), '\0') + std::string(1024, '\0');
  ASSERT_TRUE(LooksLikeTar(tar));
  absl::StatusOr<std::string> member = ExtractFromTar("t.tar", tar, ".json");
  ASSERT_TRUE(member.ok()) << member.status();
  EXPECT_EQ(*member, data);
  EXPECT_FALSE(ExtractFromTar("t.tar", tar, ".onnx").ok());
  EXPECT_FALSE(ExtractFromTar("t.tar", tar.substr(0, 520), ".json").ok());  // member cut short
}

}  // namespace
}  // namespace placement::importers
