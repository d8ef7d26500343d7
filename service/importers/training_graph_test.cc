#include "service/importers/training_graph.h"

#include "gtest/gtest.h"
#include "service/importers/importers_test_util.h"

namespace placement::importers {
namespace {

using testing::EdgeBytes;
using testing::OpIndex;

// input -> conv -> relu, conv has parameters.
LayerGraph Chain() {
  LayerGraph g;
  g.layers.push_back({"input", "Input", 0, 0, 100, 0, 0, false});
  g.layers.push_back({"conv", "Conv", 1000, 2000, 400, 64, 0, true});
  g.layers.push_back({"relu", "ReLU", 10, 20, 400, 0, 0, true});
  g.edges.push_back({0, 1, 100});
  g.edges.push_back({1, 2, 400});
  return g;
}

TEST(TrainingGraphTest, ExpandsBackwardAndUpdate) {
  TrainingOptions training;
  training.optimizer_state_copies = 2;
  RooflineModel roofline;
  const v1::Graph graph = ExpandForTraining(Chain(), training, roofline);
  // 3 forward, 2 backward (not the input), 1 update.
  ASSERT_EQ(graph.ops_size(), 6);
  EXPECT_EQ(graph.ops(3).name(), "relu/backward");  // reverse layer order
  EXPECT_EQ(graph.ops(4).name(), "conv/backward");
  EXPECT_EQ(graph.ops(5).name(), "conv/update");
  EXPECT_EQ(graph.ops(4).compute_ns(), 2000);
  EXPECT_EQ(graph.ops(4).output_bytes(), 64);   // no gradient for the input, 64 B weight gradient
  EXPECT_EQ(graph.ops(3).output_bytes(), 400);  // gradient of conv's output
  EXPECT_EQ(graph.ops(5).persistent_bytes(), 128);
  EXPECT_EQ(graph.ops(1).persistent_bytes(), 64);
  // (3 + 2*2) * 64 = 448 B at 900 GB/s = 0.498 ns, rounded to 0, plus the 5 µs launch.
  EXPECT_EQ(graph.ops(5).compute_ns(), 5000);
  for (const char* member : {"conv", "conv/backward", "conv/update"}) {
    EXPECT_EQ(graph.ops(OpIndex(graph, member)).colocation_group(), "conv/params") << member;
  }
  EXPECT_EQ(graph.ops(OpIndex(graph, "relu")).colocation_group(), "");
  EXPECT_EQ(EdgeBytes(graph, "input", "conv"), 100);
  EXPECT_EQ(EdgeBytes(graph, "input", "conv/backward"), 100);
  EXPECT_EQ(EdgeBytes(graph, "conv", "relu/backward"), 400);
  EXPECT_EQ(EdgeBytes(graph, "relu", "relu/backward"), 400);
  EXPECT_EQ(EdgeBytes(graph, "relu/backward", "conv/backward"), 400);
  EXPECT_EQ(EdgeBytes(graph, "conv/backward", "conv/update"), 64);
  EXPECT_EQ(EdgeBytes(graph, "conv/backward", "input/backward"), -1);
  EXPECT_EQ(graph.edges_size(), 2 + 2 + 1 + 2 + 1);
  EXPECT_EQ(testing::ValidationError(
                [&] {
                  v1::PlaceRequest r;
                  *r.mutable_graph() = graph;
                  *r.mutable_cluster() = DefaultCluster();
                  return r;
                }()),
            "");
}

TEST(TrainingGraphTest, ForwardOnly) {
  TrainingOptions training;
  training.enabled = false;
  const v1::Graph graph = BuildLayerGraph(Chain(), training, RooflineModel());
  ASSERT_EQ(graph.ops_size(), 3);
  EXPECT_EQ(graph.edges_size(), 2);
  EXPECT_EQ(graph.ops(1).persistent_bytes(), 64);
  EXPECT_EQ(graph.ops(1).colocation_group(), "");
}

TEST(TrainingGraphTest, WeightUpdateTime) {
  TrainingOptions training;  // SGD with momentum: 5 x P bytes of traffic
  RooflineModel roofline;
  EXPECT_EQ(WeightUpdateNs(900'000'000, training, roofline), 5'000 + 5'000'000);
}

}  // namespace
}  // namespace placement::importers
