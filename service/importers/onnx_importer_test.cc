#include "service/importers/onnx_importer.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"
#include "service/importers/importers_test_util.h"

namespace placement::importers {
namespace {

using ::testing::HasSubstr;
using testing::CountOpsWithSuffix;
using testing::OpIndex;
using testing::TestData;
using testing::ValidationError;

// The zoo AlexNet: 40 nodes of which 16 are Constant / ConstantOfShape (the stripped weights).
TEST(OnnxImporterTest, AlexNetForwardGolden) {
  ImportOptions options;
  options.training.enabled = false;
  absl::StatusOr<v1::PlaceRequest> request =
      ImportOnnx(TestData("onnx/light_bvlc_alexnet.onnx"), options);
  ASSERT_TRUE(request.ok()) << request.status();
  const v1::Graph& graph = request->graph();
  EXPECT_EQ(graph.ops_size(), 24);
  int64_t parameters = 0;
  for (const v1::Op& op : graph.ops()) parameters += op.persistent_bytes();
  // 60,965,224 fp32 weights and biases (the published AlexNet size), 243.9 MB.
  EXPECT_EQ(parameters, 243'860'896);

  // conv1 (BVLC: 96 filters): 1x3x224x224 -> 1x96x54x54 with 96x3x11x11 weights and 96 biases:
  //   FLOPs = 2 * 96*54*54 * 3*11*11 = 203,233,536 -> 12,945 ns at 15.7 TFLOP/s, + 5 µs launch;
  //   traffic = 602,112 in + 139,392 weights + 384 bias + 1,119,744 out (2.1 µs at 900 GB/s, below).
  const v1::Op& conv1 = graph.ops(0);
  EXPECT_EQ(conv1.type(), "Conv");
  EXPECT_EQ(conv1.compute_ns(), 17'945);
  EXPECT_EQ(conv1.persistent_bytes(), 139'392 + 384);
  EXPECT_EQ(conv1.output_bytes(), 1'119'744);
  ASSERT_GE(graph.edges_size(), 1);
  EXPECT_EQ(graph.edges(0).src(), 0);
  EXPECT_EQ(graph.edges(0).bytes(), 1'119'744);
  EXPECT_EQ(ValidationError(*request), "");
}

TEST(OnnxImporterTest, BatchSizeScalesShapes) {
  ImportOptions options;
  options.training.enabled = false;
  options.onnx_batch_size = 32;
  absl::StatusOr<v1::PlaceRequest> request =
      ImportOnnx(TestData("onnx/light_bvlc_alexnet.onnx"), options);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->graph().ops(0).output_bytes(), 32 * 1'119'744);
  EXPECT_EQ(request->graph().ops(0).persistent_bytes(), 139'392 + 384);
}

TEST(OnnxImporterTest, SqueezeNetTrainingExpansion) {
  absl::StatusOr<v1::PlaceRequest> request =
      ImportOnnx(TestData("onnx/light_squeezenet.onnx"), ImportOptions());
  ASSERT_TRUE(request.ok()) << request.status();
  const v1::Graph& graph = request->graph();
  // 66 compute nodes, each with a backward op; 26 conv layers hold parameters and get an update.
  EXPECT_EQ(CountOpsWithSuffix(graph, "/backward"), 66);
  EXPECT_EQ(CountOpsWithSuffix(graph, "/update"), 26);
  EXPECT_EQ(graph.ops_size(), 66 + 66 + 26);
  // Every update shares its layer's group.
  for (const v1::Op& op : graph.ops()) {
    if (op.type() != "WeightUpdate") continue;
    const std::string layer = op.name().substr(0, op.name().size() - std::string("/update").size());
    EXPECT_EQ(graph.ops(OpIndex(graph, layer)).colocation_group(), op.colocation_group());
  }
  EXPECT_EQ(ValidationError(*request), "");
}

TEST(OnnxImporterTest, BrokenFileIsAnError) {
  absl::StatusOr<LayerGraph> r = OnnxLayerGraph("junk.onnx", "this is not protobuf \xff\xff\xff",
                                                ImportOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("junk.onnx"));
  r = OnnxLayerGraph("empty.onnx", "", ImportOptions());
  EXPECT_FALSE(r.ok());
}

// Regression (importer_onnx fuzzer, UBSan): a shape of 10^7 x 10^7 x 10^7 floats (4e21 bytes) used to
// overflow the float-to-int64 conversion; it is capped at 1 PiB so that validation rejects it by name.
TEST(OnnxImporterTest, AbsurdTensorShapesAreCappedNotOverflowed) {
  onnx::ModelProto model;
  model.set_ir_version(7);
  model.add_opset_import()->set_version(13);
  onnx::GraphProto* graph = model.mutable_graph();
  graph->set_name("huge");
  for (const char* name : {"x", "y"}) {
    onnx::ValueInfoProto* value = name[0] == 'x' ? graph->add_input() : graph->add_output();
    value->set_name(name);
    onnx::TypeProto_Tensor* tensor = value->mutable_type()->mutable_tensor_type();
    tensor->set_elem_type(onnx::TensorProto_DataType_FLOAT);
    for (int i = 0; i < 3; ++i) tensor->mutable_shape()->add_dim()->set_dim_value(10'000'000);
  }
  onnx::NodeProto* relu = graph->add_node();
  relu->set_op_type("Relu");
  relu->add_input("x");
  relu->add_output("y");
  ImportOptions options;
  options.training.enabled = false;
  absl::StatusOr<LayerGraph> layers = OnnxLayerGraph("huge.onnx", model.SerializeAsString(), options);
  ASSERT_TRUE(layers.ok()) << layers.status();
  bool saw_relu = false;
  for (const LayerSpec& layer : layers->layers) {
    EXPECT_GE(layer.output_bytes, 0) << layer.name;
    EXPECT_LE(layer.output_bytes, int64_t{1} << 56) << layer.name;
    if (layer.type == "Relu") {
      saw_relu = true;
      EXPECT_EQ(layer.output_bytes, int64_t{1} << 50);
    }
  }
  EXPECT_TRUE(saw_relu);
}

}  // namespace
}  // namespace placement::importers
