#include "service/engine/pardnn/linear_clustering.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/engine/repair/test_model.h"

namespace placement::engine::pardnn {
namespace {

using ::testing::ElementsAre;

std::vector<OpId> OpsOf(const LinearClusters& c, int32_t cluster) {
  return std::vector<OpId>(c.Ops(cluster).begin(), c.Ops(cluster).end());
}

TEST(SlicingCostsTest, MeanSpeedAndMeanLink) {
  TestModel t;
  const int a = t.AddOp(1000), b = t.AddOp(3000);
  t.AddEdge(a, b, 2000);
  t.AddDevice(1 << 20, 1.0);
  t.AddDevice(1 << 20, 3.0);
  t.SetLink(/*bandwidth=*/1'000'000'000, /*latency_ns=*/100);  // 1 byte per ns
  const Model model = t.Build();
  const SlicingCosts costs = ComputeSlicingCosts(model);
  EXPECT_DOUBLE_EQ(costs.mean_speed, 2.0);
  EXPECT_EQ(costs.op_ns[a], 500);
  EXPECT_EQ(costs.op_ns[b], 1500);
  EXPECT_EQ(costs.out_edge_ns[0], 2100);
  EXPECT_EQ(costs.in_edge_ns[0], 2100);
  EXPECT_EQ(costs.total_work_ns, 2000);
  EXPECT_EQ(costs.total_comm_ns, 2100);
}

TEST(LinearClusteringTest, AChainIsOnePrimary) {
  TestModel t;
  for (int i = 0; i < 5; ++i) t.AddOp(100);
  for (int i = 0; i + 1 < 5; ++i) t.AddEdge(i, i + 1, 10);
  t.AddDevices(3, 1 << 20);
  const Model model = t.Build();
  const LinearClusters c = SliceIntoLinearClusters(model, ComputeSlicingCosts(model), 3);
  EXPECT_EQ(c.num_primaries, 1);  // the graph has only one path
  EXPECT_EQ(c.num_clusters(), 1);
  EXPECT_THAT(OpsOf(c, 0), ElementsAre(0, 1, 2, 3, 4));
  EXPECT_DOUBLE_EQ(c.dop, 1.0);
}

TEST(LinearClusteringTest, TwoIndependentChainsAreTwoPrimariesHeaviestFirst) {
  TestModel t;
  const int a0 = t.AddOp(100), a1 = t.AddOp(100);           // light chain
  const int b0 = t.AddOp(300), b1 = t.AddOp(300), b2 = t.AddOp(300);  // heavy chain
  t.AddEdge(a0, a1);
  t.AddEdge(b0, b1);
  t.AddEdge(b1, b2);
  t.AddDevices(2, 1 << 20);
  const Model model = t.Build();
  const LinearClusters c = SliceIntoLinearClusters(model, ComputeSlicingCosts(model), 2);
  ASSERT_EQ(c.num_primaries, 2);
  EXPECT_THAT(OpsOf(c, 0), ElementsAre(b0, b1, b2));
  EXPECT_THAT(OpsOf(c, 1), ElementsAre(a0, a1));
  EXPECT_NEAR(c.dop, 1100.0 / 900.0, 1e-9);
}

TEST(LinearClusteringTest, CriticalPathFollowsCommunicationWeightedLevels) {
  // s -> x -> t and s -> y -> t; y is shorter but its edges are far more expensive, so the
  // communication-weighted critical path goes through y.
  TestModel t;
  const int s = t.AddOp(10), x = t.AddOp(200), y = t.AddOp(100), e = t.AddOp(10);
  t.AddEdge(s, x, 0);
  t.AddEdge(x, e, 0);
  t.AddEdge(s, y, 1'000'000);
  t.AddEdge(y, e, 1'000'000);
  t.AddDevices(2, 1 << 20);
  t.SetLink(1'000'000'000, 0);
  const Model model = t.Build();
  const LinearClusters c = SliceIntoLinearClusters(model, ComputeSlicingCosts(model), 2);
  ASSERT_GE(c.num_primaries, 1);
  EXPECT_THAT(OpsOf(c, 0), ElementsAre(s, y, e));
  EXPECT_THAT(OpsOf(c, 1), ElementsAre(x));
}

TEST(LinearClusteringTest, SecondariesAreChainsInDecreasingWeightedLevel) {
  // A fork of four branches of different weights; K = 2 takes the two heaviest, the other two become
  // secondaries, the heavier one first.
  TestModel t;
  const int s = t.AddOp(1);
  const int w[4] = {400, 300, 200, 100};
  int branch[4][2];
  for (int i = 0; i < 4; ++i) {
    branch[i][0] = t.AddOp(w[i]);
    branch[i][1] = t.AddOp(w[i]);
    t.AddEdge(s, branch[i][0]);
    t.AddEdge(branch[i][0], branch[i][1]);
  }
  t.AddDevices(2, 1 << 20);
  const Model model = t.Build();
  const LinearClusters c = SliceIntoLinearClusters(model, ComputeSlicingCosts(model), 2);
  ASSERT_EQ(c.num_primaries, 2);
  ASSERT_EQ(c.num_clusters(), 4);
  EXPECT_THAT(OpsOf(c, 0), ElementsAre(s, branch[0][0], branch[0][1]));
  EXPECT_THAT(OpsOf(c, 1), ElementsAre(branch[1][0], branch[1][1]));
  EXPECT_THAT(OpsOf(c, 2), ElementsAre(branch[2][0], branch[2][1]));
  EXPECT_THAT(OpsOf(c, 3), ElementsAre(branch[3][0], branch[3][1]));
}

TEST(LinearClusteringTest, EveryOpIsInExactlyOneClusterOnRandomDags) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 20; ++trial) {
    TestModel t;
    const int n = 5 + static_cast<int>(rng() % 200);
    for (int i = 0; i < n; ++i) t.AddOp(static_cast<int64_t>(rng() % 3) * 100);  // zeros included
    for (int i = 1; i < n; ++i) {
      const int fan_in = static_cast<int>(rng() % 3);
      for (int k = 0; k < fan_in; ++k) t.AddEdge(static_cast<int>(rng() % i), i, rng() % 5000);
    }
    t.AddDevices(1 + static_cast<int>(rng() % 6), 1 << 20);
    t.SetLink(1'000'000'000, 50);
    const Model model = t.Build();
    const LinearClusters c =
        SliceIntoLinearClusters(model, ComputeSlicingCosts(model), model.num_devices());
    ASSERT_EQ(static_cast<int>(c.ops.size()), n);
    std::vector<int> seen(n, 0);
    for (int32_t k = 0; k < c.num_clusters(); ++k) {
      ASSERT_GT(c.Ops(k).size(), 0u);
      for (const OpId v : c.Ops(k)) {
        ++seen[v];
        EXPECT_EQ(c.cluster_of[v], k);
      }
    }
    EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int s) { return s == 1; }));
    EXPECT_LE(c.num_primaries, model.num_devices());
    // Secondaries in non-increasing weighted level of their first op.
    for (int32_t k = c.num_primaries + 1; k < c.num_clusters(); ++k) {
      const OpId f0 = c.Ops(k - 1)[0], f1 = c.Ops(k)[0];
      EXPECT_GE(c.top_level[f0] + c.bottom_level[f0], c.top_level[f1] + c.bottom_level[f1]);
    }
    // Chains: consecutive ops of a cluster are joined by an edge.
    for (int32_t k = 0; k < c.num_clusters(); ++k) {
      for (size_t i = 1; i < c.Ops(k).size(); ++i) {
        const OpId a = c.Ops(k)[i - 1], b = c.Ops(k)[i];
        bool edge = false;
        for (EdgeId e = model.out_begin(a); e < model.out_end(a); ++e) edge |= model.out_dst[e] == b;
        EXPECT_TRUE(edge);
      }
    }
  }
}

}  // namespace
}  // namespace placement::engine::pardnn
