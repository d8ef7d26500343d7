// Tests for the random request generator and ShuffleRequest: determinism, DAG shape, constraint
// fractions, and that shuffling keeps the problem while changing the order.
#include "tests/testutil/random_graph.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace placement::testutil {
namespace {

TEST(RngTest, DeterministicAndInRange) {
  Rng a(5);
  Rng b(5);
  Rng c(6);
  bool differs = false;
  for (int i = 0; i < 1000; ++i) {
    const int64_t x = a.Uniform(-3, 7);
    EXPECT_EQ(x, b.Uniform(-3, 7));
    EXPECT_GE(x, -3);
    EXPECT_LE(x, 7);
    differs |= x != c.Uniform(-3, 7);
    const double d = a.UniformDouble();
    b.UniformDouble();
    c.UniformDouble();
    EXPECT_GE(d, 0.0);
    EXPECT_LT(d, 1.0);
  }
  EXPECT_TRUE(differs);
  // Both ends of a range are reachable.
  std::set<int64_t> seen;
  for (int i = 0; i < 200; ++i) seen.insert(a.Uniform(0, 3));
  EXPECT_EQ(seen, (std::set<int64_t>{0, 1, 2, 3}));
}

TEST(RandomGraphTest, SameSeedSameRequestOtherSeedOtherRequest) {
  RandomGraphOptions options;
  options.num_ops = 400;
  options.colocation_fraction = 0.2;
  options.pinned_fraction = 0.2;
  options.num_link_overrides = 2;
  const std::string first = RandomLayeredRequest(options).SerializeAsString();
  EXPECT_EQ(RandomLayeredRequest(options).SerializeAsString(), first);
  options.seed = 2;
  EXPECT_NE(RandomLayeredRequest(options).SerializeAsString(), first);
}

TEST(RandomGraphTest, LayeredShape) {
  RandomGraphOptions options;
  options.num_ops = 1000;
  options.layer_width = 50;  // 20 layers
  options.avg_out_degree = 3.0;
  options.max_layer_skip = 2;
  options.scramble_names = false;
  const v1::PlaceRequest request = RandomLayeredRequest(options);
  const v1::Graph& graph = request.graph();
  ASSERT_EQ(graph.ops_size(), 1000);
  EXPECT_NEAR(graph.edges_size(), 3000, 30);
  std::vector<int> has_previous_layer_input(1000, 0);
  for (const v1::Edge& edge : graph.edges()) {
    const int src_layer = edge.src() / 50;
    const int dst_layer = edge.dst() / 50;
    EXPECT_GE(dst_layer - src_layer, 1);
    EXPECT_LE(dst_layer - src_layer, 2);
    if (dst_layer == src_layer + 1) has_previous_layer_input[edge.dst()] = 1;
    EXPECT_EQ(edge.bytes(), graph.ops(edge.src()).output_bytes());
  }
  for (int i = 50; i < 1000; ++i) EXPECT_TRUE(has_previous_layer_input[i]) << i;
  // Unscrambled names follow generation order, zero-padded to a common width.
  EXPECT_EQ(graph.ops(0).name(), "op000");
  EXPECT_EQ(graph.ops(999).name(), "op999");
  for (const v1::Op& op : graph.ops()) {
    EXPECT_GE(op.compute_ns(), options.min_compute_ns);
    EXPECT_LE(op.compute_ns(), options.max_compute_ns);
    EXPECT_GE(op.output_bytes(), options.min_output_bytes);
    EXPECT_LE(op.output_bytes(), options.max_output_bytes);
  }
}

TEST(RandomGraphTest, ScrambledNamesAreAPermutation) {
  RandomGraphOptions options;
  options.num_ops = 300;
  const v1::PlaceRequest request = RandomLayeredRequest(options);
  std::vector<std::string> names;
  for (const v1::Op& op : request.graph().ops()) names.push_back(op.name());
  EXPECT_FALSE(std::is_sorted(names.begin(), names.end()));
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names.front(), "op000");
  EXPECT_EQ(names.back(), "op299");
  EXPECT_EQ(std::unique(names.begin(), names.end()), names.end());
}

TEST(RandomGraphTest, ClusterAndConstraints) {
  RandomGraphOptions options;
  options.num_ops = 4000;
  options.num_devices = 6;
  options.num_nodes = 3;
  options.device_kinds = {"gpu", "cpu"};
  options.heterogeneous_speeds = true;
  options.num_link_overrides = 4;
  options.colocation_fraction = 0.25;
  options.colocation_group_size = 5;
  options.pinned_fraction = 0.1;
  options.kind_restricted_fraction = 0.2;
  options.control_edge_fraction = 0.5;
  const v1::PlaceRequest request = RandomLayeredRequest(options);
  const v1::Cluster& cluster = request.cluster();
  ASSERT_EQ(cluster.devices_size(), 6);
  EXPECT_EQ(cluster.devices(0).name(), "gpu0");
  EXPECT_EQ(cluster.devices(1).name(), "cpu1");
  EXPECT_EQ(cluster.devices(0).node(), "node0");
  EXPECT_EQ(cluster.devices(5).node(), "node2");
  for (const v1::Device& device : cluster.devices()) {
    ASSERT_TRUE(device.has_speed());
    EXPECT_GE(device.speed(), 0.5);
    EXPECT_LE(device.speed(), 2.0);
  }
  EXPECT_EQ(cluster.links_size(), 4);

  int grouped = 0;
  int pinned = 0;
  int restricted = 0;
  std::map<std::string, std::set<std::string>> group_pins;
  for (const v1::Op& op : request.graph().ops()) {
    grouped += !op.colocation_group().empty();
    pinned += !op.pinned_device().empty();
    restricted += op.allowed_kinds_size() > 0;
    if (!op.colocation_group().empty() && !op.pinned_device().empty()) {
      group_pins[op.colocation_group()].insert(op.pinned_device());
    }
  }
  EXPECT_NEAR(grouped, 1000, 150);
  EXPECT_GT(pinned, 150);
  EXPECT_GT(restricted, 400);
  for (const auto& [group, pins] : group_pins) EXPECT_EQ(pins.size(), 1u) << group;
  int control = 0;
  for (const v1::Edge& edge : request.graph().edges()) control += edge.bytes() == 0;
  EXPECT_NEAR(control, request.graph().edges_size() / 2, request.graph().edges_size() / 10);
}

// The problem as a set: ops by name with their attributes, edges by names, links as unordered pairs.
struct Canonical {
  std::set<std::string> ops;
  std::multiset<std::tuple<std::string, std::string, int64_t>> edges;
  std::set<std::tuple<std::string, std::string, int64_t, int64_t>> links;
};

Canonical CanonicalOf(const v1::PlaceRequest& request) {
  Canonical c;
  const v1::Graph& graph = request.graph();
  for (const v1::Op& op : graph.ops()) {
    std::vector<std::string> kinds(op.allowed_kinds().begin(), op.allowed_kinds().end());
    std::sort(kinds.begin(), kinds.end());
    std::string text = op.name() + "|" + op.type() + "|" + std::to_string(op.compute_ns()) + "|" +
                       std::to_string(op.output_bytes()) + "|" + op.colocation_group() + "|" +
                       op.pinned_device();
    for (const std::string& kind : kinds) text += "|" + kind;
    c.ops.insert(text);
  }
  for (const v1::Edge& edge : graph.edges()) {
    c.edges.insert({graph.ops(edge.src()).name(), graph.ops(edge.dst()).name(), edge.bytes()});
  }
  for (const v1::Link& link : request.cluster().links()) {
    c.links.insert({std::min(link.a(), link.b()), std::max(link.a(), link.b()),
                    link.spec().bandwidth_bytes_per_second(), link.spec().latency_ns()});
  }
  return c;
}

TEST(ShuffleRequestTest, SameProblemDifferentOrder) {
  RandomGraphOptions options;
  options.num_ops = 500;
  options.parallel_edge_fraction = 0.1;
  options.device_kinds = {"gpu", "cpu", "tpu"};
  options.kind_restricted_fraction = 0.5;
  options.num_link_overrides = 3;
  const v1::PlaceRequest request = RandomLayeredRequest(options);
  const v1::PlaceRequest shuffled = ShuffleRequest(request, 17);
  const Canonical a = CanonicalOf(request);
  const Canonical b = CanonicalOf(shuffled);
  EXPECT_EQ(a.ops, b.ops);
  EXPECT_EQ(a.edges, b.edges);
  EXPECT_EQ(a.links, b.links);
  int moved = 0;
  for (int i = 0; i < request.graph().ops_size(); ++i) {
    moved += request.graph().ops(i).name() != shuffled.graph().ops(i).name();
  }
  EXPECT_GT(moved, 400);
  EXPECT_NE(request.graph().edges(0).SerializeAsString(), shuffled.graph().edges(0).SerializeAsString());
  EXPECT_EQ(ShuffleRequest(request, 17).SerializeAsString(), shuffled.SerializeAsString());
  EXPECT_NE(ShuffleRequest(request, 18).SerializeAsString(), shuffled.SerializeAsString());
}

TEST(ShuffleRequestTest, OutOfRangeIndicesStayOutOfRange) {
  RandomGraphOptions options;
  options.num_ops = 20;
  v1::PlaceRequest request = RandomLayeredRequest(options);
  request.mutable_graph()->mutable_edges(0)->set_src(912);
  request.mutable_graph()->mutable_edges(1)->set_dst(-4);
  const v1::PlaceRequest shuffled = ShuffleRequest(request, 3);
  int bad_src = 0;
  int bad_dst = 0;
  for (const v1::Edge& edge : shuffled.graph().edges()) {
    bad_src += edge.src() == 912;
    bad_dst += edge.dst() == -4;
  }
  EXPECT_EQ(bad_src, 1);
  EXPECT_EQ(bad_dst, 1);
}

}  // namespace
}  // namespace placement::testutil
