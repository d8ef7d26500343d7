#include "service/importers/pipedream_importer.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/importers/importers_test_util.h"

namespace placement::importers {
namespace {

using ::testing::HasSubstr;
using testing::CountOpsWithSuffix;
using testing::EdgeBytes;
using testing::OpIndex;
using testing::TestData;
using testing::ValidationError;

TEST(PipeDreamImporterTest, AlexNetTrainingGolden) {
  absl::StatusOr<v1::PlaceRequest> request =
      ImportPipeDream(TestData("pipedream/alexnet_graph.txt"), ImportOptions());
  ASSERT_TRUE(request.ok()) << request.status();
  const v1::Graph& graph = request->graph();
  // 23 layers, 22 backward ops (not the input), 8 updates (5 conv + 3 linear layers have parameters).
  EXPECT_EQ(graph.ops_size(), 23 + 22 + 8);
  EXPECT_EQ(CountOpsWithSuffix(graph, "/backward"), 22);
  EXPECT_EQ(CountOpsWithSuffix(graph, "/update"), 8);
  // 23 forward, 23 stash (input of the consumer's backward), 22 gradient, 22 own output, 8 weight grads.
  EXPECT_EQ(graph.edges_size(), 98);

  // node2: Conv2d(3, 64, 11x11): 22.316 ms forward, 6.405 ms backward, 198246400 B out, 93184 B params.
  const v1::Op& conv = graph.ops(OpIndex(graph, "node2"));
  EXPECT_EQ(conv.type(), "Conv2d");
  EXPECT_EQ(conv.compute_ns(), 22'316'000);
  EXPECT_EQ(conv.output_bytes(), 198'246'400);
  EXPECT_EQ(conv.persistent_bytes(), 93'184);
  EXPECT_EQ(conv.colocation_group(), "node2/params");
  const v1::Op& conv_backward = graph.ops(OpIndex(graph, "node2/backward"));
  EXPECT_EQ(conv_backward.compute_ns(), 6'405'000);
  EXPECT_EQ(conv_backward.colocation_group(), "node2/params");
  EXPECT_EQ(conv_backward.output_bytes(), 93'184);  // weight gradient (its input needs none)
  const v1::Op& update = graph.ops(OpIndex(graph, "node2/update"));
  EXPECT_EQ(update.colocation_group(), "node2/params");
  EXPECT_EQ(update.persistent_bytes(), 93'184);  // momentum
  // Memory-bound update: 5 x 93184 B at 900 GB/s = 517.7 ns, plus the 5 µs launch.
  EXPECT_EQ(update.compute_ns(), 5'518);

  // The input layer: no time (data loading is not part of the step), no backward op.
  EXPECT_EQ(graph.ops(OpIndex(graph, "node1")).compute_ns(), 0);
  EXPECT_EQ(OpIndex(graph, "node1/backward"), -1);

  // Data flow: forward, stashed activations, reversed gradients.
  EXPECT_EQ(EdgeBytes(graph, "node1", "node2"), 154'140'672);
  EXPECT_EQ(EdgeBytes(graph, "node1", "node2/backward"), 154'140'672);
  EXPECT_EQ(EdgeBytes(graph, "node2", "node2/backward"), 198'246'400);
  EXPECT_EQ(EdgeBytes(graph, "node3/backward", "node2/backward"), 198'246'400);
  EXPECT_EQ(EdgeBytes(graph, "node2/backward", "node2/update"), 93'184);
  EXPECT_EQ(EdgeBytes(graph, "node2/backward", "node3/backward"), -1);

  EXPECT_EQ(request->cluster().devices_size(), 4);
  EXPECT_EQ(ValidationError(*request), "");
}

TEST(PipeDreamImporterTest, ForwardOnlyAndListActivations) {
  ImportOptions options;
  options.training.enabled = false;
  absl::StatusOr<v1::PlaceRequest> request =
      ImportPipeDream(TestData("pipedream/gnmt_graph.txt"), options);
  ASSERT_TRUE(request.ok()) << request.status();
  const v1::Graph& graph = request->graph();
  EXPECT_EQ(graph.ops_size(), 48);
  EXPECT_EQ(graph.edges_size(), 58);
  EXPECT_EQ(CountOpsWithSuffix(graph, "/backward"), 0);
  // node7: LSTM(2048, 1024) with activation_size=[6291456.0; 131072.0; 131072.0].
  const v1::Op& lstm = graph.ops(OpIndex(graph, "node7"));
  EXPECT_EQ(lstm.output_bytes(), 6'291'456 + 131'072 + 131'072);
  EXPECT_EQ(lstm.persistent_bytes(), 50'364'416);
  EXPECT_EQ(lstm.compute_ns(), 3'190'000);
  EXPECT_EQ(ValidationError(*request), "");
}

TEST(PipeDreamImporterTest, ErrorsNameFileAndLine) {
  absl::StatusOr<LayerGraph> r = ParsePipeDream(
      "g.txt", "node1 -- Input -- forward_compute_time=0, backward_compute_time=0, "
               "activation_size=4, parameter_size=0\n"
               "node2 -- ReLU -- forward_compute_time=abc, backward_compute_time=0, "
               "activation_size=4, parameter_size=0\n");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("g.txt:2:"));

  r = ParsePipeDream("g.txt",
                     "node1 -- Input -- forward_compute_time=0, backward_compute_time=0, "
                     "activation_size=4, parameter_size=0\n\tnode1 -- node9\n");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("g.txt:2: edge names unknown node 'node9'"));

  r = ParsePipeDream("g.txt", "node1 -- Input -- forward_compute_time=0\n");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("g.txt:1:"));

  r = ParsePipeDream("g.txt", "this is not a profile\n");
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace placement::importers
