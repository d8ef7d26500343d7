// Tests of the plan model (replica counts, working window) and of the window search.
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/model/model_test_util.h"
#include "service/engine/model/replica_group.h"
#include "service/engine/plans/plan_model.h"
#include "service/engine/plans/window_search.h"
#include "service/engine/sim/simulator.h"
#include "tests/testutil/random_graph.h"

namespace placement::engine {
namespace {

// A chain a -> b -> c -> d, each 100 ns, 1000-byte outputs, on `devices` devices of one host.
v1::PlaceRequest Chain(int32_t devices, int32_t microbatches, int64_t memory_bytes = int64_t{1} << 30) {
  v1::PlaceRequest request;
  const char* names[] = {"a", "b", "c", "d"};
  for (const char* name : names) AddTestOp(request, name, 100)->set_output_bytes(1000);
  for (int32_t i = 0; i + 1 < 4; ++i) {
    v1::Edge* edge = request.mutable_graph()->add_edges();
    edge->set_src(i);
    edge->set_dst(i + 1);
    edge->set_bytes(1000);
  }
  for (int32_t d = 0; d < devices; ++d) {
    AddTestDevice(request, "gpu" + std::to_string(d), "gpu", memory_bytes)->set_node("h0");
  }
  request.mutable_cluster()->mutable_intra_node()->set_bandwidth_bytes_per_second(1'000'000'000);
  request.mutable_options()->set_microbatches(microbatches);
  return request;
}

TEST(PlanModelTest, BorrowsThePlainModelAndCopiesWhenTheWindowIsOpen) {
  absl::StatusOr<Model> plain = BuildModel(Chain(2, 1));
  ASSERT_TRUE(plain.ok()) << plain.status();
  const PlanModel borrowed(*plain, 1);
  EXPECT_EQ(&borrowed.model(), &*plain);
  EXPECT_TRUE(borrowed.window_fixed());

  absl::StatusOr<Model> open = BuildModel(Chain(2, 8));
  ASSERT_TRUE(open.ok()) << open.status();
  const PlanModel copied(*open, 1);
  EXPECT_NE(&copied.model(), &*open);
  EXPECT_FALSE(copied.window_fixed());
  EXPECT_EQ(copied.model().plan.max_in_flight, 2);  // the working window: one per device
}

TEST(PlanModelTest, ReplicaCountsAreTheDivisorsWhoseGroupHoldsEveryPin) {
  v1::PlaceRequest request = Chain(6, 4);
  request.mutable_options()->set_data_parallel(0);
  absl::StatusOr<Model> model = BuildModel(request);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(ReplicaCountsToTry(*model), (std::vector<int32_t>{1, 2, 3, 6}));
  request.mutable_graph()->mutable_ops(1)->set_pinned_device("gpu2");  // group 0 needs >= 3 devices
  model = BuildModel(request);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(ReplicaCountsToTry(*model), (std::vector<int32_t>{1, 2}));
  const PlanModel group(*model, 2);
  EXPECT_EQ(group.model().num_devices(), 3);
  EXPECT_EQ(group.model().plan.data_parallel, 2);
  EXPECT_EQ(group.model().ring_link.size(), 3u);
}

// The chain's a, b on gpu0 and c, d on gpu1: a two-stage pipeline.
Assignment TwoStages(const Model& model) {
  Assignment assignment(model.num_ops());
  assignment[OpNamed(model, "a")] = 0;
  assignment[OpNamed(model, "b")] = 0;
  assignment[OpNamed(model, "c")] = 1;
  assignment[OpNamed(model, "d")] = 1;
  return assignment;
}

// Chain(2, 8, memory) as a replica group of one, placed as TwoStages, with its simulator: what the
// window-search tests start from. Not copyable (the simulator reads the model in place).
struct TwoStageChainPlan {
  explicit TwoStageChainPlan(int64_t memory)
      : full(BuildModel(Chain(2, 8, memory)).value()), plan(full, 1), assignment(TwoStages(plan.model())),
        sim(plan.model()) {}
  const Model& model() const { return plan.model(); }
  Model full;
  PlanModel plan;
  Assignment assignment;
  Simulator sim;
};

// The window search returns the fastest W that fits: with memory for only a few microbatches' outputs
// in flight, the larger windows overflow; every W is checked against a brute force over all of them.
TEST(WindowSearchTest, FastestFeasibleWindowMatchesBruteForce) {
  for (int64_t memory : {int64_t{1} << 30, int64_t{5000}, int64_t{3500}, int64_t{2500}}) {
    TwoStageChainPlan setup(memory);
    const Model& model = setup.model();
    const Assignment& assignment = setup.assignment;
    Simulator& sim = setup.sim;
    const WindowChoice choice = ChooseWindow(model, assignment, sim);
    int32_t brute_window = 0;
    PlacementScore brute = PlacementScore::Worst();
    for (int32_t w = 1; w <= 8; ++w) {
      const PlacementScore score = ScoreWithWindow(model, assignment, sim, w);
      if (brute_window == 0 || score.BetterThan(brute)) {
        brute = score;
        brute_window = w;
      }
    }
    EXPECT_EQ(choice.max_in_flight, brute_window) << "memory " << memory;
    EXPECT_EQ(choice.score.makespan_ns, brute.makespan_ns);
    EXPECT_EQ(choice.score.overflow_bytes, brute.overflow_bytes);
  }
}

// Told to stop before it starts (a solve past its time limit), the search with stop_only_once_fitting
// takes the first of no window, the model's working window and W = 1 that fits, or the least overflow of
// the three, in at most three simulations; without it, no window alone.
TEST(WindowSearchTest, AStoppedSearchTakesTheFirstFittingOfNoWindowTheWorkingWindowAndOne) {
  SolveContext stopped;
  stopped.deadline = absl::InfinitePast();
  int32_t took_working = 0;  // memories where no window overflowed and the working window fitted
  for (int64_t memory : {int64_t{1} << 30, int64_t{5000}, int64_t{3500}, int64_t{2500}, int64_t{1500}}) {
    TwoStageChainPlan setup(memory);
    const Model& model = setup.model();
    const Assignment& assignment = setup.assignment;
    Simulator& sim = setup.sim;
    const int32_t working = model.plan.Window();
    int32_t expected = 0;
    PlacementScore expected_score = PlacementScore::Worst();
    for (const int32_t w : {8, working, 1}) {
      const PlacementScore score = ScoreWithWindow(model, assignment, sim, w);
      // Better as the search judges: less overflow, a shorter step, then the smaller window.
      if (expected == 0 || score.BetterThan(expected_score) ||
          (!expected_score.BetterThan(score) && w < expected)) {
        expected = w;
        expected_score = score;
      }
      if (expected_score.Fits()) break;
    }
    WindowSearchOptions quick;
    quick.stop_only_once_fitting = true;
    const WindowChoice choice = ChooseWindow(model, assignment, sim, stopped, quick);
    EXPECT_EQ(choice.max_in_flight, expected) << "memory " << memory;
    EXPECT_EQ(choice.score.makespan_ns, expected_score.makespan_ns) << "memory " << memory;
    EXPECT_EQ(choice.score.overflow_bytes, expected_score.overflow_bytes) << "memory " << memory;
    EXPECT_LE(choice.simulations, 3);
    took_working += expected == working && working != 8;

    const WindowChoice plain = ChooseWindow(model, assignment, sim, stopped);
    EXPECT_EQ(plain.max_in_flight, 8);
    EXPECT_EQ(plain.simulations, 1);
  }
  EXPECT_GT(took_working, 0) << "no memory made no window overflow";
}

// One device per replica: every window has the same schedule (the microbatches run one after another
// whatever W), so the search simulates W = 1 alone. Checked against every W on random layered steps
// with once ops (sources before the microbatches, sinks as the update), with and without replicas (their
// all-reduces), with memory to spare and too little.
TEST(WindowSearchTest, OneDevicePerReplicaHasOneScoreForEveryWindow) {
  int32_t overflowing = 0;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    for (const int32_t replicas : {1, 2, 3}) {
      for (const int64_t memory : {int64_t{64} << 30, int64_t{96} << 20}) {
        testutil::RandomGraphOptions options;
        options.num_ops = 60;
        options.num_devices = replicas;
        options.device_memory_bytes = memory;
        options.seed = seed;
        v1::PlaceRequest request = testutil::RandomLayeredRequest(options);
        std::vector<int32_t> in(request.graph().ops_size(), 0), out(request.graph().ops_size(), 0);
        for (const v1::Edge& e : request.graph().edges()) {
          ++out[e.src()];
          ++in[e.dst()];
        }
        for (int32_t i = 0; i < request.graph().ops_size(); ++i) {
          if (out[i] == 0 && in[i] > 0) request.mutable_graph()->mutable_ops(i)->set_once_per_step(true);
          if (in[i] == 0 && i % 4 == 0) request.mutable_graph()->mutable_ops(i)->set_once_per_step(true);
        }
        request.mutable_options()->set_microbatches(5);
        request.mutable_options()->set_data_parallel(replicas);
        absl::StatusOr<Model> full = BuildModel(request);
        ASSERT_TRUE(full.ok()) << full.status();
        const PlanModel plan(*full, replicas);
        const Model& model = plan.model();
        ASSERT_EQ(model.num_devices(), 1);
        const Assignment assignment(model.num_ops(), 0);
        Simulator sim(model);
        const PlacementScore first = ScoreWithWindow(model, assignment, sim, 1);
        overflowing += first.overflow_bytes > 0;
        for (int32_t w = 2; w <= 5; ++w) {
          const PlacementScore score = ScoreWithWindow(model, assignment, sim, w);
          EXPECT_EQ(score.makespan_ns, first.makespan_ns) << "seed " << seed << " D " << replicas << " W " << w;
          EXPECT_EQ(score.overflow_bytes, first.overflow_bytes) << "seed " << seed << " D " << replicas;
        }
        const WindowChoice choice = ChooseWindow(model, assignment, sim);
        EXPECT_EQ(choice.max_in_flight, 1);
        EXPECT_EQ(choice.simulations, 1);
        EXPECT_EQ(choice.score.makespan_ns, first.makespan_ns);
        EXPECT_EQ(choice.score.overflow_bytes, first.overflow_bytes);
      }
    }
  }
  EXPECT_GT(overflowing, 0);  // the tight memory does bind somewhere
}

}  // namespace
}  // namespace placement::engine
