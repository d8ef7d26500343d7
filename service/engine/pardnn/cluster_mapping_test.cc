#include "service/engine/pardnn/cluster_mapping.h"

#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "service/engine/pardnn/linear_clustering.h"
#include "service/engine/repair/test_model.h"
#include "service/engine/sim/constraints.h"
#include "service/engine/sim/placement_score.h"
#include "service/engine/sim/simulator.h"

namespace placement::engine::pardnn {
namespace {

// Maps `model` with `options`, the slicing computed here.
absl::StatusOr<ClusterMapping> MapWith(const Model& model, const MappingOptions& options) {
  const SlicingCosts costs = ComputeSlicingCosts(model);
  const LinearClusters clusters = SliceIntoLinearClusters(model, costs, model.num_devices());
  return MapClustersToDevices(model, costs, clusters, options, SolveContext());
}

Assignment Map(const Model& model, const MappingOptions& options = MappingOptions()) {
  absl::StatusOr<ClusterMapping> mapping = MapWith(model, options);
  EXPECT_TRUE(mapping.ok()) << mapping.status();
  return mapping.ok() ? mapping->assignment : Assignment(model.num_ops(), 0);
}

TEST(ClusterMappingTest, AChainStaysOnOneDevice) {
  TestModel t;
  for (int i = 0; i < 6; ++i) t.AddOp(1000, 1000);
  for (int i = 0; i + 1 < 6; ++i) t.AddEdge(i, i + 1, 1000);
  t.AddDevices(4, 1 << 30);
  t.SetLink(1'000'000'000, 10'000);
  const Model model = t.Build();
  const Assignment a = Map(model);
  EXPECT_EQ(std::set<DeviceId>(a.begin(), a.end()).size(), 1u);
}

TEST(ClusterMappingTest, TwoIndependentHeavyChainsSplitAcrossTwoDevices) {
  TestModel t;
  for (int c = 0; c < 2; ++c) {
    const int first = t.AddOp(10'000);
    int prev = first;
    for (int i = 1; i < 5; ++i) {
      const int v = t.AddOp(10'000);
      t.AddEdge(prev, v, 1000);
      prev = v;
    }
  }
  t.AddDevices(2, 1 << 30);
  const Model model = t.Build();
  const Assignment a = Map(model);
  for (int i = 1; i < 5; ++i) EXPECT_EQ(a[i], a[0]);
  for (int i = 6; i < 10; ++i) EXPECT_EQ(a[i], a[5]);
  EXPECT_NE(a[0], a[5]);
}

TEST(ClusterMappingTest, ForkJoinWithExpensiveEdgesStaysTogether) {
  TestModel t;
  const int s = t.AddOp(1000), x = t.AddOp(1000), y = t.AddOp(1000), z = t.AddOp(1000),
            e = t.AddOp(1000);
  for (const int m : {x, y, z}) {
    t.AddEdge(s, m, 10'000'000);  // 10 ms per transfer at 1 GB/s
    t.AddEdge(m, e, 10'000'000);
  }
  t.AddDevices(3, 1 << 30);
  t.SetLink(1'000'000'000, 1000);
  const Model model = t.Build();
  // The first placement gives each of the three paths a device of its own; the improvement pass joins
  // them when it sees no queueing, i.e. on the reference's communication-weighted time axis. (Both are
  // off by default: on real graphs the refinement does this job better; pardnn_partitioner_test checks
  // the same fork-join end to end.)
  MappingOptions with_improvement;
  with_improvement.improvement_evaluations_per_cluster = 3.0;
  with_improvement.span_comm_weight = 1.0;
  const Assignment a = Map(model, with_improvement);
  EXPECT_EQ(std::set<DeviceId>(a.begin(), a.end()).size(), 1u);
}

TEST(ClusterMappingTest, ForkJoinWithCheapEdgesAndHeavyBranchesSpreads) {
  TestModel t;
  const int s = t.AddOp(10);
  const int e = t.AddOp(10);
  for (int i = 0; i < 3; ++i) {
    const int m = t.AddOp(1'000'000);
    t.AddEdge(s, m, 100);
    t.AddEdge(m, e, 100);
  }
  t.AddDevices(3, 1 << 30);
  t.SetLink(1'000'000'000, 1000);
  const Model model = t.Build();
  const Assignment a = Map(model);
  EXPECT_EQ(std::set<DeviceId>({a[2], a[3], a[4]}).size(), 3u);
}

// A chain of blocks, each a fork into a 33 µs op on the path and a 22 µs side op that joins it again:
// the side op has 11 µs of slack and its two transfers cost 45 µs each, so it belongs beside the path.
// With the time axis in buckets much wider than a block (as on graphs of tens of thousands of ops), a
// side op's window must see only its share of the path device's load in the buckets it touches, not
// all of it (which looked like a queue longer than the transfers, and sent every side op away).
TEST(ClusterMappingTest, ASideOpWithLittleSlackStaysBesideThePathInWideBuckets) {
  TestModel t;
  std::vector<int> side;
  int previous = t.AddOp(10'000);
  for (int block = 0; block < 40; ++block) {
    const int on_path = t.AddOp(33'000), beside = t.AddOp(22'000), join = t.AddOp(10'000);
    for (const int branch : {on_path, beside}) {
      t.AddEdge(previous, branch, 20'000);
      t.AddEdge(branch, join, 20'000);
    }
    side.push_back(beside);
    previous = join;
  }
  t.AddDevices(2, 1 << 30);
  t.SetLink(1'000'000'000, 25'000);  // 20 KB: 25 + 20 µs
  const Model model = t.Build();
  MappingOptions wide;
  wide.max_time_slots = 8;  // ~250 µs per bucket against 53 µs blocks
  wide.max_time_slots_where_the_path_bounds = 8;
  const Assignment a = Map(model, wide);
  const Assignment exact = Map(model);  // the distinct levels as slots (few ops)
  int away = 0;
  for (const int v : side) away += a[v] != a[0];
  // The buckets' load is an even spread, so as side ops join the path's device its density grows and
  // a few still leave (8 of 40 here; every one of them when a bucket counted whole: a step 1.83 x).
  EXPECT_LE(away, 10);
  Simulator sim(model);
  EXPECT_LE(static_cast<double>(sim.Run(a).makespan_ns), 1.2 * static_cast<double>(sim.Run(exact).makespan_ns));

  // The fine slots are capped in device x slot entries (MappingOptions::max_fine_load_entries): 16
  // entries on 2 devices are the same 8 buckets.
  MappingOptions capped;
  capped.max_time_slots = 8;
  capped.max_fine_load_entries = 16;
  EXPECT_EQ(Map(model, capped), a);
}

TEST(ClusterMappingTest, FasterDeviceReceivesTheCriticalPath) {
  TestModel t;
  // Critical chain of 5 heavy ops plus a light independent chain.
  for (int i = 0; i < 5; ++i) t.AddOp(100'000);
  for (int i = 0; i + 1 < 5; ++i) t.AddEdge(i, i + 1, 1000);
  const int l0 = t.AddOp(1000), l1 = t.AddOp(1000);
  t.AddEdge(l0, l1, 1000);
  t.AddDevice(1 << 30, 1.0);
  t.AddDevice(1 << 30, 2.0);
  t.AddDevice(1 << 30, 1.0);
  const Model model = t.Build();
  const Assignment a = Map(model);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(a[i], 1) << "op " << i;
}

TEST(ClusterMappingTest, ConstraintsHoldDuringMapping) {
  TestModel t;
  for (int i = 0; i < 8; ++i) t.AddOp(1000 * (i + 1), 100);
  for (int i = 0; i + 1 < 8; ++i) t.AddEdge(i, i + 1, 100);
  t.Colocate(1, "g");
  t.Colocate(6, "g");
  t.Pin(3, 2);
  t.op(5)->add_allowed_kinds("cpu");
  t.AddDevice(1 << 30, 1.0, "gpu");
  t.AddDevice(1 << 30, 1.0, "gpu");
  t.AddDevice(1 << 30, 1.0, "gpu");
  t.AddDevice(1 << 30, 1.0, "cpu");
  const Model model = t.Build();
  const Assignment a = Map(model);
  EXPECT_TRUE(CheckConstraints(model, a).empty());
  EXPECT_EQ(a[3], 2);
  EXPECT_EQ(a[5], 3);
  EXPECT_EQ(a[1], a[6]);
}

TEST(ClusterMappingTest, RandomDagsWithConstraintsAlwaysSatisfyThem) {
  std::mt19937_64 rng(17);
  for (int trial = 0; trial < 30; ++trial) {
    TestModel t;
    const int n = 10 + static_cast<int>(rng() % 300);
    for (int i = 0; i < n; ++i) t.AddOp(static_cast<int64_t>(rng() % 10'000), rng() % 10'000);
    for (int i = 1; i < n; ++i) {
      for (int k = 0; k < 2; ++k) t.AddEdge(static_cast<int>(rng() % i), i, rng() % 100'000);
    }
    const int devices = 2 + static_cast<int>(rng() % 6);
    for (int d = 0; d < devices; ++d) t.AddDevice(1 << 30, 1.0 + (rng() % 3), d == 0 ? "cpu" : "gpu");
    for (int i = 0; i < n; ++i) {
      const int r = static_cast<int>(rng() % 20);
      if (r == 0) t.Pin(i, static_cast<int>(rng() % devices));
      if (r == 1) t.op(i)->add_allowed_kinds("gpu");
      if (r == 2 || r == 3) t.Colocate(i, "g" + std::to_string(rng() % 5));
    }
    absl::StatusOr<Model> model = BuildModel(t.graph(), t.cluster(), 0.0);
    if (!model.ok()) continue;  // random pins may conflict inside a group
    const SlicingCosts costs = ComputeSlicingCosts(*model);
    const LinearClusters clusters = SliceIntoLinearClusters(*model, costs, devices);
    absl::StatusOr<ClusterMapping> mapping =
        MapClustersToDevices(*model, costs, clusters, MappingOptions(), SolveContext());
    if (!mapping.ok()) continue;  // a group whose members' restrictions do not intersect
    for (const DeviceId d : mapping->assignment) ASSERT_TRUE(d >= 0 && d < devices);
    const auto problems = CheckConstraints(*model, mapping->assignment);
    EXPECT_TRUE(problems.empty()) << "trial " << trial << ": " << problems[0].description;
  }
}

// A step whose total work, not its critical path, bounds it on four devices over two hosts: the path
// is forward and backward through 32 layers (100 us each, 6.4 ms); off it, per layer, a side task that
// reads the layer's 8 MiB activation and then updates the layer's parameters (400 us each: 25.6 ms).
Model TwoHostWorkBoundStep() {
  TestModel t;
  const int64_t mib = int64_t{1} << 20;
  const int layers = 32;
  std::vector<int> forward;
  for (int i = 0; i < layers; ++i) {
    forward.push_back(t.AddOp(100'000, 8 * mib));
    if (i > 0) t.AddEdge(forward[i - 1], forward[i], mib);
  }
  int previous = forward.back();
  for (int i = layers - 1; i >= 0; --i) {
    const int backward = t.AddOp(100'000, mib);
    t.AddEdge(previous, backward, mib);
    previous = backward;
    const int param = t.AddOp(0, 0, mib);
    const int side = t.AddOp(400'000, mib / 4);
    const int update = t.AddOp(400'000, 0);
    t.AddEdge(forward[i], side, 8 * mib);
    t.AddEdge(side, update, mib / 4);
    t.AddEdge(param, update, mib);
  }
  for (int d = 0; d < 4; ++d) t.AddDevice(int64_t{1} << 40, 1.0, "gpu", d < 2 ? "host0" : "host1");
  t.cluster().mutable_intra_node()->set_bandwidth_bytes_per_second(100'000'000'000);
  t.cluster().mutable_intra_node()->set_latency_ns(2000);
  t.cluster().mutable_inter_node()->set_bandwidth_bytes_per_second(12'500'000'000);
  t.cluster().mutable_inter_node()->set_latency_ns(10'000);
  return t.Build();
}

TEST(ClusterMappingTest, SlackCostsWhereTheWorkBoundsTheStepOnlyWhenAskedFor) {
  // slack_aware alone maps a work-bound step with plain costs (the same mapping as slack_aware false);
  // slack_beyond_critical_bound gives the slack costs there (pardnn's second cost model; its effect
  // on a real step is measured by pardnn_step_quality_test).
  const Model model = TwoHostWorkBoundStep();
  MappingOptions options;
  absl::StatusOr<ClusterMapping> plain = MapWith(model, options);
  options.slack_beyond_critical_bound = true;
  absl::StatusOr<ClusterMapping> slack = MapWith(model, options);
  options.slack_aware = false;
  absl::StatusOr<ClusterMapping> off = MapWith(model, options);
  ASSERT_TRUE(plain.ok() && slack.ok() && off.ok());
  EXPECT_FALSE(plain->critical_path_bounds_step);
  EXPECT_NE(plain->assignment, slack->assignment);
  for (const DeviceId d : slack->assignment) EXPECT_TRUE(d >= 0 && d < 4);
  EXPECT_EQ(off->assignment, plain->assignment);
}

TEST(ClusterMappingTest, SlackBeyondTheCriticalBoundChangesNothingWhereThePathBoundsTheStep) {
  // Two heavy chains and a light one on four devices: the path bounds the step, the slack costs are
  // used anyway, and the option leaves the mapping as it is.
  TestModel t;
  for (int c = 0; c < 3; ++c) {
    int prev = t.AddOp(c < 2 ? 100'000 : 1'000, 1 << 20);
    for (int i = 1; i < 6; ++i) {
      const int v = t.AddOp(c < 2 ? 100'000 : 1'000, 1 << 20);
      t.AddEdge(prev, v, 1 << 20);
      prev = v;
    }
  }
  t.AddDevices(4, int64_t{1} << 40);
  const Model model = t.Build();
  MappingOptions options;
  absl::StatusOr<ClusterMapping> plain = MapWith(model, options);
  options.slack_beyond_critical_bound = true;
  absl::StatusOr<ClusterMapping> slack = MapWith(model, options);
  ASSERT_TRUE(plain.ok() && slack.ok());
  EXPECT_TRUE(plain->critical_path_bounds_step);
  EXPECT_EQ(plain->assignment, slack->assignment);
}

// A training step of `layers` layers as a chain: forward f_i (its activation read again by the
// backward b_i), backward b_L .. b_1, each layer's parameters (persistent bytes) read by f_i and b_i.
struct TrainingChain {
  std::vector<int> forward, backward, params;
};
TrainingChain AddTrainingChain(TestModel& t, int layers, int64_t activation_bytes, int64_t param_bytes) {
  TrainingChain c;
  for (int i = 0; i < layers; ++i) {
    c.params.push_back(t.AddOp(0, 0, param_bytes));
    c.forward.push_back(t.AddOp(100'000, activation_bytes));
    t.AddEdge(c.params[i], c.forward[i], param_bytes);
    if (i > 0) t.AddEdge(c.forward[i - 1], c.forward[i], activation_bytes);
  }
  c.backward.resize(layers);
  for (int i = layers - 1; i >= 0; --i) {
    c.backward[i] = t.AddOp(200'000, activation_bytes / 4);
    t.AddEdge(c.forward[i], c.backward[i], activation_bytes);
    t.AddEdge(c.params[i], c.backward[i], param_bytes);
    t.AddEdge(i == layers - 1 ? c.forward[i] : c.backward[i + 1], c.backward[i], activation_bytes / 4);
  }
  return c;
}

// 16 or so layers of 64 MiB activations and 4 MiB parameters on eight devices of 400 MiB.
Model MemoryBoundChain(int layers, TrainingChain* chain) {
  TestModel t;
  *chain = AddTrainingChain(t, layers, int64_t{64} << 20, int64_t{4} << 20);
  t.AddDevices(8, int64_t{400} << 20);
  t.SetLink(10'000'000'000, 2000);
  return t.Build();
}

TEST(ClusterMappingTest, MemoryBoundChainIsFoldedOntoFewDevicesInContiguousStretches) {
  // 16 layers of 64 MiB activations on devices of 400 MiB: the whole step needs ~1.1 GiB at its turn
  // from forward to backward, so it spans three or four devices. The mapping keeps each layer's
  // backward with its forward (its activation stays local) and cuts the forward chain only a few
  // times, so the step fits (or nearly: stage 2 fixes the rest) with few transfers.
  const int layers = 16;
  TrainingChain c;
  const Model model = MemoryBoundChain(layers, &c);
  const Assignment a = Map(model);
  int folded = 0, cuts = 0;
  for (int i = 0; i < layers; ++i) {
    folded += a[c.forward[i]] == a[c.backward[i]];
    if (i > 0) cuts += a[c.forward[i]] != a[c.forward[i - 1]];
  }
  EXPECT_GE(folded, layers - 2);
  EXPECT_GE(cuts, 2);  // one device cannot hold it
  EXPECT_LE(cuts, 5);
  Simulator sim(model);
  EXPECT_LE(ScoreSimulation(model, sim.Run(a)).overflow_bytes, int64_t{128} << 20);
}

// The static estimate (persistent + half the outputs, summed) with contiguous critical-path pieces,
// with or without the parameters they read (pardnn's second and third families).
Assignment MapContiguousPieces(const Model& model, bool with_parameters) {
  MappingOptions pieces;
  pieces.memory_timeline = false;
  pieces.chunk_critical_path = false;
  pieces.segment_with_parameters = with_parameters;
  return Map(model, pieces);
}

TEST(ClusterMappingTest, WithoutTheTimelineTheSameChainIsCutContiguouslyOnly) {
  // Forward stretches and their backward halves end on different devices.
  const int layers = 16;
  TrainingChain c;
  const Model model = MemoryBoundChain(layers, &c);
  const Assignment a = MapContiguousPieces(model, /*with_parameters=*/false);
  int folded = 0;
  for (int i = 0; i < layers; ++i) folded += a[c.forward[i]] == a[c.backward[i]];
  EXPECT_LT(folded, layers - 2);
}

TEST(ClusterMappingTest, SegmentedWithItsParametersTheChainIsFoldedAndCarriesTheParameters) {
  // The same chain, contiguous pieces of the critical path with the parameters each piece reads
  // (segment_with_parameters): the pieces are sized by the path's whole footprint, parameters
  // included, and each layer's backward follows the piece that holds its activation.
  const int layers = 16;
  TrainingChain c;
  const Model model = MemoryBoundChain(layers, &c);
  const Assignment a = MapContiguousPieces(model, /*with_parameters=*/true);
  int folded = 0, with_params = 0, cuts = 0;
  for (int i = 0; i < layers; ++i) {
    folded += a[c.forward[i]] == a[c.backward[i]];
    with_params += a[c.params[i]] == a[c.forward[i]];
    if (i > 0) cuts += a[c.forward[i]] != a[c.forward[i - 1]];
  }
  EXPECT_EQ(folded, layers);
  EXPECT_EQ(with_params, layers);
  EXPECT_GE(cuts, 2);  // one device cannot hold it
  EXPECT_LE(cuts, 7);  // contiguous stretches, not scattered layers
}

TEST(ClusterMappingTest, AmpleMemoryGivesTheSameMappingWithOrWithoutTheTimeline) {
  TestModel t;
  AddTrainingChain(t, 8, int64_t{1} << 20, int64_t{1} << 20);
  t.AddDevices(4, int64_t{1} << 40);
  const Model model = t.Build();
  MappingOptions without;
  without.memory_timeline = false;
  without.chunk_critical_path = false;
  EXPECT_EQ(Map(model), Map(model, without));
}

TEST(ClusterMappingTest, IgnoringMemoryTheTightChainIsMappedAsWithAmpleMemory) {
  // The memory-bound chain above (devices of 400 MiB), mapped with memory out of view
  // (ignore_memory, ParDNN's own first stage), gets the mapping of the same chain on devices of
  // 1 TiB: nothing is cut for memory, and the time-resolved estimate is not used.
  TrainingChain c;
  const Model tight = MemoryBoundChain(16, &c);
  TestModel t;
  AddTrainingChain(t, 16, int64_t{64} << 20, int64_t{4} << 20);
  t.AddDevices(8, int64_t{1} << 40);
  t.SetLink(10'000'000'000, 2000);
  const Model ample = t.Build();
  MappingOptions oblivious;
  oblivious.ignore_memory = true;
  absl::StatusOr<ClusterMapping> mapping = MapWith(tight, oblivious);
  ASSERT_TRUE(mapping.ok()) << mapping.status();
  EXPECT_FALSE(mapping->memory_timeline);
  EXPECT_EQ(mapping->assignment, Map(ample));
  EXPECT_NE(mapping->assignment, Map(tight));  // with memory in view the chain is cut
}

}  // namespace
}  // namespace placement::engine::pardnn
