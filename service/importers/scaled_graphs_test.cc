#include "service/importers/scaled_graphs.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/importers/import_util.h"
#include "service/importers/importers_test_util.h"
#include "service/importers/msr_importer.h"

namespace placement::importers {
namespace {

using testing::EdgeBytes;
using testing::OpIndex;
using testing::PathExists;
using testing::SharedWorkload;
using testing::ValidationError;

v1::PlaceRequest WithCluster(v1::Graph graph) {
  v1::PlaceRequest request;
  *request.mutable_graph() = std::move(graph);
  *request.mutable_cluster() = DefaultCluster();
  return request;
}

// A 4-layer model shaped like the msr BERT graphs: embedding and mask (layer 0), per layer a forward op,
// a backward op and an unlabelled activation op between them, a loss (layer 5).
struct Toy {
  v1::Graph graph;
  std::vector<int64_t> layer;
  int32_t Add(const std::string& name, int64_t layer_id) {
    v1::Op* op = graph.add_ops();
    op->set_name(name);
    op->set_compute_ns(10 * (graph.ops_size()));
    layer.push_back(layer_id);
    return graph.ops_size() - 1;
  }
  void Edge(int32_t a, int32_t b, int64_t bytes) {
    v1::Edge* e = graph.add_edges();
    e->set_src(a);
    e->set_dst(b);
    e->set_bytes(bytes);
  }
};

Toy MakeToy() {
  Toy t;
  const int32_t emb = t.Add("emb", 0), emb_grad = t.Add("emb_grad", 0), mask = t.Add("mask", 0);
  std::vector<int32_t> f(5), g(5), act(5);
  for (int k = 1; k <= 4; ++k) {
    f[k] = t.Add(absl::StrCat("f", k), k);
    g[k] = t.Add(absl::StrCat("g", k), k);
    act[k] = t.Add(absl::StrCat("act", k), -1);
    t.Edge(f[k], act[k], 7);
    t.Edge(act[k], g[k], 7);
    t.Edge(mask, f[k], 3);
  }
  const int32_t loss = t.Add("loss", 5);
  t.Edge(emb, f[1], 100);
  for (int k = 1; k < 4; ++k) t.Edge(f[k], f[k + 1], 100);
  t.Edge(f[4], loss, 100);
  t.Edge(loss, g[4], 50);
  for (int k = 4; k > 1; --k) t.Edge(g[k], g[k - 1], 50);
  t.Edge(g[1], emb_grad, 50);
  return t;
}

TEST(ScaledGraphsTest, StackLayersChainsCopies) {
  Toy toy = MakeToy();
  ASSERT_EQ(ValidationError(WithCluster(toy.graph)), "");
  StackSpec spec{/*template_layer=*/2, /*first_layer=*/1, /*last_layer=*/4, /*target_ops=*/34};
  absl::StatusOr<v1::Graph> big = StackLayers(toy.graph, toy.layer, spec);
  ASSERT_TRUE(big.ok()) << big.status();
  // Kept: emb, emb_grad, mask, loss; 10 copies of {f2, g2, act2}.
  EXPECT_EQ(big->ops_size(), 4 + 10 * 3);
  EXPECT_EQ(EdgeBytes(*big, "emb", "L0/f2"), 100);
  EXPECT_EQ(EdgeBytes(*big, "L3/f2", "L4/f2"), 100);
  EXPECT_EQ(EdgeBytes(*big, "L9/f2", "loss"), 100);
  EXPECT_EQ(EdgeBytes(*big, "loss", "L9/g2"), 50);
  EXPECT_EQ(EdgeBytes(*big, "L4/g2", "L3/g2"), 50);
  EXPECT_EQ(EdgeBytes(*big, "L0/g2", "emb_grad"), 50);
  EXPECT_EQ(EdgeBytes(*big, "L5/f2", "L5/act2"), 7);
  for (int r = 0; r < 10; ++r) EXPECT_EQ(EdgeBytes(*big, "mask", absl::StrCat("L", r, "/f2")), 3);
  // Costs are the template's own.
  EXPECT_EQ(big->ops(OpIndex(*big, "L7/f2")).compute_ns(),
            toy.graph.ops(OpIndex(toy.graph, "f2")).compute_ns());
  // 10 forward + 10 backward chain edges, 2x10 activation edges, 10 mask edges, + emb/loss/grad ends.
  EXPECT_EQ(big->edges_size(), 9 + 9 + 20 + 10 + 4);
  EXPECT_EQ(ValidationError(WithCluster(*big)), "");
}

TEST(ScaledGraphsTest, StackLayersRejectsOtherStructures) {
  Toy toy = MakeToy();
  // A second forward output from layer 1 into layer 2 breaks the single-interface assumption.
  toy.Edge(OpIndex(toy.graph, "act1"), OpIndex(toy.graph, "f2"), 1);
  toy.layer[OpIndex(toy.graph, "act1")] = 1;
  StackSpec spec{2, 1, 4, 100};
  EXPECT_FALSE(StackLayers(toy.graph, toy.layer, spec).ok());
  spec.template_layer = 1;  // must lie strictly inside the replaced range
  EXPECT_FALSE(StackLayers(MakeToy().graph, MakeToy().layer, spec).ok());
}

TEST(ScaledGraphsTest, BertFromSharedWorkloads) {
  const std::string path = SharedWorkload(
      "msr_dnn_partitioning/throughput-inputs/OperatorGraphs/bert_L-12_training.json");
  if (!PathExists(path)) GTEST_SKIP() << "shared workloads not present: " << path;
  absl::StatusOr<std::string> text = ReadInputFile(path);
  ASSERT_TRUE(text.ok());
  std::vector<int64_t> layer_of_op;
  absl::StatusOr<v1::PlaceRequest> bert = ImportMsrText(path, *text, ImportOptions(), &layer_of_op);
  ASSERT_TRUE(bert.ok()) << bert.status();
  StackSpec spec;
  spec.target_ops = 20'000;
  absl::StatusOr<v1::Graph> big = StackLayers(bert->graph(), layer_of_op, spec);
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_GT(big->ops_size(), 19'000);
  EXPECT_LE(big->ops_size(), 20'000);
  v1::PlaceRequest request;
  *request.mutable_graph() = *big;
  *request.mutable_cluster() = ClusterForGraph(*big, 8, bert->cluster().devices(0).memory_bytes());
  EXPECT_EQ(ValidationError(request), "");
}

TEST(ScaledGraphsTest, LabelTransformerBlocksNeedsPeriodicNorms) {
  v1::Graph graph;
  for (const char* type : {"aten::embedding", "aten::layer_norm", "aten::addmm"}) {
    graph.add_ops()->set_type(type);
  }
  int64_t blocks = -1;
  absl::StatusOr<std::vector<int64_t>> layers = LabelTransformerBlocks(graph, &blocks);
  ASSERT_FALSE(layers.ok());
  EXPECT_THAT(std::string(layers.status().message()), ::testing::HasSubstr("not a pre-norm transformer"));
  EXPECT_EQ(blocks, -1);
}

TEST(ScaledGraphsTest, UnrolledRnn) {
  RnnSpec spec;
  spec.layers = 3;
  spec.steps = 5;
  const v1::Graph graph = UnrolledRnn(spec);
  EXPECT_EQ(graph.ops_size(), 3 * 5 * 2 + 5 * 2 + 3);
  const int64_t hidden_bytes = 64 * 1024 * 4;
  EXPECT_EQ(EdgeBytes(graph, "rnn/l1/t2", "rnn/l1/t3"), 2 * hidden_bytes);
  EXPECT_EQ(EdgeBytes(graph, "rnn/l0/t2", "rnn/l1/t2"), hidden_bytes);
  EXPECT_EQ(EdgeBytes(graph, "rnn/l1/t3/backward", "rnn/l1/t2/backward"), 2 * hidden_bytes);
  EXPECT_EQ(EdgeBytes(graph, "rnn/l2/t4", "rnn/loss/t4"), hidden_bytes);
  EXPECT_EQ(graph.ops(OpIndex(graph, "rnn/l1/t3")).colocation_group(), "rnn/l1/params");
  EXPECT_EQ(graph.ops(OpIndex(graph, "rnn/l1/update")).colocation_group(), "rnn/l1/params");
  // Cell: 2*64*2048*4096 FLOPs (+ pointwise) = 1.07 GFLOP -> 68 µs at 15.7 TFLOP/s, + 5 µs.
  EXPECT_NEAR(static_cast<double>(graph.ops(0).compute_ns()), 73'400, 200);
  EXPECT_EQ(ValidationError(WithCluster(graph)), "");
}

TEST(ScaledGraphsTest, ClusterForGraphSizesMemory) {
  v1::Graph graph;
  for (int i = 0; i < 10; ++i) graph.add_ops()->set_persistent_bytes(int64_t{4} << 30);
  const v1::Cluster cluster = ClusterForGraph(graph, 10, int64_t{16} << 30);
  ASSERT_EQ(cluster.devices_size(), 10);
  EXPECT_EQ(cluster.devices(9).node(), "node1");
  EXPECT_EQ(cluster.devices(0).memory_bytes(), int64_t{16} << 30);  // 2 x 40 GiB / 10 < 16 GiB
  EXPECT_EQ(ClusterForGraph(graph, 2, int64_t{1} << 30).devices(0).memory_bytes(), int64_t{40} << 30);
}

}  // namespace
}  // namespace placement::importers
