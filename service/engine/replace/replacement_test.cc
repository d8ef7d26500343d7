#include "service/engine/replace/replacement.h"

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "service/engine/baselines/m_etf.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/model/model_test_util.h"
#include "service/engine/sim/placement_score.h"
#include "service/engine/sim/simulator.h"
#include "service/engine/solve/solve.h"
#include "tests/testutil/random_graph.h"

namespace placement::engine {
namespace {

using testutil::RandomGraphOptions;
using testutil::RandomLayeredRequest;
using testutil::ShuffleRequest;

// A 300-op step on 4 GPUs with room to spare, so that memory never forces a move.
v1::PlaceRequest StepOnFourGpus(uint64_t seed) {
  RandomGraphOptions options;
  options.num_ops = 300;
  options.num_devices = 4;
  options.persistent_fraction = 0.5;
  options.seed = seed;
  return RandomLayeredRequest(options);
}

// Solves `request` with auto and returns the answer as a previous placement (op name -> device
// name).
google::protobuf::Map<std::string, std::string> PlaceFresh(const v1::PlaceRequest& request) {
  absl::StatusOr<Model> model = BuildModel(request);
  EXPECT_TRUE(model.ok()) << model.status();
  absl::StatusOr<v1::Placement> placement = Solve(*model, request.options(), SolveContext());
  EXPECT_TRUE(placement.ok()) << placement.status();
  google::protobuf::Map<std::string, std::string> previous;
  for (int i = 0; i < request.graph().ops_size(); ++i) {
    previous[request.graph().ops(i).name()] =
        request.cluster().devices(placement->device(i)).name();
  }
  return previous;
}

void RemoveDevice(v1::PlaceRequest& request, const std::string& name) {
  auto* devices = request.mutable_cluster()->mutable_devices();
  for (int d = 0; d < devices->size(); ++d) {
    if (devices->Get(d).name() == name) {
      devices->erase(devices->begin() + d);
      return;
    }
  }
  ADD_FAILURE() << "no device " << name;
}

// Persistent bytes of the ops the previous placement put on `device`.
int64_t BytesOn(const v1::PlaceRequest& request,
                const google::protobuf::Map<std::string, std::string>& previous,
                const std::string& device) {
  int64_t bytes = 0;
  for (const v1::Op& op : request.graph().ops()) {
    if (previous.at(op.name()) == device) bytes += op.persistent_bytes();
  }
  return bytes;
}

struct Replaced {
  v1::Placement placement;
  Model model;
};

// Re-places `request` (which carries a previous placement) with auto.
Replaced ReplaceWithAuto(const v1::PlaceRequest& request) {
  absl::StatusOr<Model> model = BuildModel(request);
  EXPECT_TRUE(model.ok()) << model.status();
  absl::StatusOr<v1::Placement> placement = Solve(*model, request.options(), SolveContext());
  EXPECT_TRUE(placement.ok()) << placement.status();
  return Replaced{*placement, *std::move(model)};
}

TEST(ReplacementTest, OpsOfARemovedDeviceMoveAndTheAnswerFits) {
  v1::PlaceRequest request = StepOnFourGpus(3);
  const auto previous = PlaceFresh(request);
  const int64_t departed_bytes = BytesOn(request, previous, "gpu3");
  int64_t departed_ops = 0;
  for (const auto& [op, device] : previous) departed_ops += device == "gpu3" ? 1 : 0;
  ASSERT_GT(departed_ops, 0) << "the fresh answer does not use gpu3; pick another seed";

  RemoveDevice(request, "gpu3");
  *request.mutable_options()->mutable_previous_placement() = previous;
  request.mutable_options()->set_move_weight_ns_per_byte(1e-3);
  const Replaced replaced = ReplaceWithAuto(request);
  EXPECT_EQ(replaced.placement.outcome(), v1::FEASIBLE);
  EXPECT_GE(replaced.placement.metrics().ops_moved(), departed_ops);
  EXPECT_GE(replaced.placement.metrics().bytes_moved(), departed_bytes);
  for (int i = 0; i < request.graph().ops_size(); ++i) {
    EXPECT_LT(replaced.placement.device(i), 3);
  }
}

TEST(ReplacementTest, WithALargeMoveWeightOnlyTheDepartedStateMoves) {
  v1::PlaceRequest request = StepOnFourGpus(5);
  const auto previous = PlaceFresh(request);
  const int64_t departed_bytes = BytesOn(request, previous, "gpu1");
  RemoveDevice(request, "gpu1");
  *request.mutable_options()->mutable_previous_placement() = previous;
  request.mutable_options()->set_move_weight_ns_per_byte(1e6);
  const Replaced replaced = ReplaceWithAuto(request);
  EXPECT_EQ(replaced.placement.outcome(), v1::FEASIBLE);
  EXPECT_EQ(replaced.placement.metrics().bytes_moved(), departed_bytes);
  // Every op with state that was on a remaining device is still there (ops without state may move:
  // they move nothing).
  int64_t ops_moved = 0;
  for (int i = 0; i < request.graph().ops_size(); ++i) {
    const v1::Op& op = request.graph().ops(i);
    const std::string& now = request.cluster().devices(replaced.placement.device(i)).name();
    const std::string& before = previous.at(op.name());
    if (now != before) ++ops_moved;
    if (before != "gpu1" && op.persistent_bytes() > 0) {
      EXPECT_EQ(now, before) << op.name();
    }
  }
  EXPECT_EQ(replaced.placement.metrics().ops_moved(), ops_moved);
}

TEST(ReplacementTest, WithWeightZeroTheStepIsNoWorseThanTheReHomedSeed) {
  for (const uint64_t seed : {7, 8, 9}) {
    v1::PlaceRequest request = StepOnFourGpus(seed);
    const auto previous = PlaceFresh(request);
    RemoveDevice(request, "gpu0");
    *request.mutable_options()->mutable_previous_placement() = previous;
    const Replaced replaced = ReplaceWithAuto(request);
    const Assignment seed_assignment = ReplacementSeed(replaced.model);
    Simulator simulator(replaced.model);
    const PlacementScore seed_score =
        ScoreSimulation(replaced.model, simulator.Run(seed_assignment));
    ASSERT_TRUE(seed_score.Fits());
    EXPECT_LE(replaced.placement.metrics().makespan_ns(), seed_score.makespan_ns)
        << "seed " << seed;
    // The re-homed seed, or a quick member's fresh answer that was better still (moves are free).
    if (replaced.placement.provenance().winner() == "previous_placement") {
      EXPECT_EQ(replaced.placement.provenance().winner_makespan_ns(), seed_score.makespan_ns);
    } else {
      EXPECT_LT(replaced.placement.provenance().winner_makespan_ns(), seed_score.makespan_ns);
    }
  }
}

TEST(ReplacementTest, AnAddedDeviceMayBeUsed) {
  // Three independent ops of equal work on two GPUs; a third GPU arrives: with free moves one of
  // the two ops sharing a GPU goes to it and the step halves.
  v1::PlaceRequest request;
  AddTestOp(request, "a", 1'000'000);
  AddTestOp(request, "b", 1'000'000);
  AddTestOp(request, "c", 1'000'000);
  for (const char* name : {"gpu0", "gpu1", "gpu2"}) AddTestDevice(request, name, "gpu", 1 << 20);
  request.mutable_cluster()->mutable_intra_node()->set_bandwidth_bytes_per_second(1'000'000'000);
  auto& previous = *request.mutable_options()->mutable_previous_placement();
  previous["a"] = "gpu0";
  previous["b"] = "gpu1";
  previous["c"] = "gpu0";
  const Replaced replaced = ReplaceWithAuto(request);
  EXPECT_EQ(replaced.placement.metrics().makespan_ns(), 1'000'000);
  EXPECT_EQ(replaced.placement.metrics().ops_moved(), 1);
  EXPECT_EQ(replaced.placement.metrics().bytes_moved(), 0);
  EXPECT_EQ(replaced.placement.metrics().devices(2).op_count(), 1);
}

TEST(ReplacementTest, SeedKeepsValidDevicesAndHonoursPinsGroupsAndKinds) {
  v1::PlaceRequest request;
  AddTestOp(request, "kept")->set_persistent_bytes(10);
  AddTestOp(request, "orphan")->set_persistent_bytes(10);
  AddTestOp(request, "new");
  AddTestOp(request, "pinned")->set_pinned_device("gpu1");
  AddTestOp(request, "g1")->set_colocation_group("g");
  AddTestOp(request, "g2")->set_colocation_group("g");
  AddTestOp(request, "g3")->set_colocation_group("g");
  AddTestOp(request, "cpu_only")->add_allowed_kinds("cpu");
  AddTestDevice(request, "gpu0", "gpu", 1 << 20);
  AddTestDevice(request, "gpu1", "gpu", 1 << 20);
  AddTestDevice(request, "cpu0", "cpu", 1 << 20);
  request.mutable_cluster()->mutable_intra_node()->set_bandwidth_bytes_per_second(1'000'000'000);
  auto& previous = *request.mutable_options()->mutable_previous_placement();
  previous["kept"] = "gpu1";
  previous["orphan"] = "gpu7";  // left
  previous["pinned"] = "gpu0";  // against its pin
  previous["g1"] = "gpu0";      // a group split before: joined where most of it was
  previous["g2"] = "gpu1";
  previous["g3"] = "gpu1";
  previous["cpu_only"] = "gpu0";  // against its kinds
  absl::StatusOr<Model> model = BuildModel(request);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->previous_device[OpNamed(*model, "orphan")], kDepartedDevice);
  EXPECT_EQ(model->previous_device[OpNamed(*model, "new")], kNone);
  const Assignment seed = ReplacementSeed(*model);
  auto on = [&](const std::string& op) { return model->device_name[seed[OpNamed(*model, op)]]; };
  EXPECT_EQ(on("kept"), "gpu1");
  EXPECT_NE(on("orphan"), "gpu7");
  EXPECT_EQ(on("pinned"), "gpu1");
  EXPECT_EQ(on("g1"), "gpu1");
  EXPECT_EQ(on("g2"), "gpu1");
  EXPECT_EQ(on("g3"), "gpu1");
  EXPECT_EQ(on("cpu_only"), "cpu0");
}

// A member that answers with a fixed assignment (device per canonical op).
class FixedAnswer final : public Partitioner {
 public:
  explicit FixedAnswer(Assignment answer) : answer_(std::move(answer)) {}
  int calls() const { return calls_; }
  std::string_view name() const override { return "fixed"; }
  std::string_view version() const override { return "1"; }
  std::string_view description() const override { return "a fixed answer (test)"; }
  absl::StatusOr<PartitionResult> Partition(const Model&, const SolveContext&) const override {
    ++calls_;
    PartitionResult result;
    result.assignment = answer_;
    return result;
  }

 private:
  Assignment answer_;
  mutable int calls_ = 0;
};

TEST(ReplacementTest, AFreshAnswerIsRenamedTowardsThePreviousPlacement) {
  // Two chains a1 -> a2 and b1 -> b2 of stateful ops (100 bytes each). Before: a1, a2, b1 on gpu0,
  // b2 on gpu1 (a 3 ms step). A fresh answer puts chain a on gpu1 and chain b on gpu0 (2 ms): as
  // given it moves a1, a2 and b2 (300 bytes); renamed (gpu0 <-> gpu1) only b1 (100 bytes), for the
  // same step.
  v1::PlaceRequest request;
  for (const char* name : {"a1", "a2", "b1", "b2"})
    AddTestOp(request, name, 1'000'000)->set_persistent_bytes(100);
  for (const auto& [src, dst] : {std::pair{0, 1}, std::pair{2, 3}}) {
    v1::Edge* edge = request.mutable_graph()->add_edges();
    edge->set_src(src);
    edge->set_dst(dst);
    edge->set_bytes(1000);
  }
  for (const char* name : {"gpu0", "gpu1"}) AddTestDevice(request, name, "gpu", 1 << 20);
  request.mutable_cluster()->mutable_intra_node()->set_bandwidth_bytes_per_second(1'000'000'000);
  auto& previous = *request.mutable_options()->mutable_previous_placement();
  previous["a1"] = previous["a2"] = previous["b1"] = "gpu0";
  previous["b2"] = "gpu1";
  request.mutable_options()->set_move_weight_ns_per_byte(1.0);
  absl::StatusOr<Model> model = BuildModel(request);
  ASSERT_TRUE(model.ok()) << model.status();
  Assignment fresh(4);
  fresh[OpNamed(*model, "a1")] = fresh[OpNamed(*model, "a2")] = 1;
  fresh[OpNamed(*model, "b1")] = fresh[OpNamed(*model, "b2")] = 0;
  const FixedAnswer member(fresh);
  ReplacementOptions options;
  options.search = false;
  absl::StatusOr<PartitionResult> result = Replace(*model, SolveContext(), options, {&member});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->winner, "fixed");
  EXPECT_EQ(result->winner_makespan_ns, 2'000'000);
  EXPECT_EQ(BytesMoved(*model, fresh), 300);
  EXPECT_EQ(BytesMoved(*model, result->assignment), 100);
  EXPECT_EQ(result->assignment[OpNamed(*model, "a1")], 0);
  EXPECT_EQ(result->assignment[OpNamed(*model, "b1")], 1);
  // With a move weight that makes 100 bytes (2 ms) dearer than the 1 ms the fresh answer saves, the
  // previous placement stays as it was.
  request.mutable_options()->set_move_weight_ns_per_byte(20'000.0);
  absl::StatusOr<Model> dear = BuildModel(request);
  ASSERT_TRUE(dear.ok());
  result = Replace(*dear, SolveContext(), options, {&member});
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->winner, "previous_placement");
  EXPECT_EQ(BytesMoved(*dear, result->assignment), 0);
}

// Independent ops on three GPUs of one host (the step is the busiest GPU's compute).
v1::PlaceRequest IndependentOps(const std::vector<std::pair<std::string, int64_t>>& ops) {
  v1::PlaceRequest request;
  for (const auto& [name, compute_ns] : ops) AddTestOp(request, name, compute_ns);
  for (const char* name : {"gpu0", "gpu1", "gpu2"}) AddTestDevice(request, name, "gpu", 1 << 20);
  request.mutable_cluster()->mutable_intra_node()->set_bandwidth_bytes_per_second(1'000'000'000);
  return request;
}

// Ops L (100 ms), x, M (100 ms) and N on gpu0..gpu2 with these persistent bytes; the previous
// placement had L and x on gpu0, M on gpu1, N on gpu2; a negligible move weight.
v1::PlaceRequest LAndXShareGpu0(int64_t x_ns, int64_t n_ns, const std::array<int64_t, 4>& bytes) {
  v1::PlaceRequest request =
      IndependentOps({{"L", 100'000'000}, {"x", x_ns}, {"M", 100'000'000}, {"N", n_ns}});
  for (int i = 0; i < 4; ++i) request.mutable_graph()->mutable_ops(i)->set_persistent_bytes(bytes[i]);
  auto& previous = *request.mutable_options()->mutable_previous_placement();
  previous["L"] = previous["x"] = "gpu0";
  previous["M"] = "gpu1";
  previous["N"] = "gpu2";
  request.mutable_options()->set_move_weight_ns_per_byte(1e-6);
  return request;
}

// A fresh answer for LAndXShareGpu0's model: L, M and N on devices 0, 1 and 2, x on `x_device`.
Assignment FreshWithXOn(const Model& model, DeviceId x_device) {
  Assignment fresh(model.num_ops());
  fresh[OpNamed(model, "L")] = 0;
  fresh[OpNamed(model, "M")] = 1;
  fresh[OpNamed(model, "N")] = 2;
  fresh[OpNamed(model, "x")] = x_device;
  return fresh;
}

// Step 1's choice alone among the seed and the given members: no search, no pull-back, no m-ETF
// drawn towards the previous devices, and no shortcut near the lower bound (these seeds are within
// 1 % of it).
ReplacementOptions ChoiceOnly() {
  ReplacementOptions options;
  options.towards_previous_weights.clear();
  options.search = false;
  options.pull_back = false;
  options.skip_near_lower_bound = 0;
  return options;
}

TEST(ReplacementTest, AnAnswerThatMovesStateMustGainItsKeepInPlacePriceInStep) {
  // Before: L and x on gpu0 (101 ms), M on gpu1 (100 ms), N on gpu2 (99.5 ms). A fresh answer moves
  // x (stateful) to gpu2: 100.5 ms, 0.5 ms faster, at a negligible move weight. L, M and N hold the
  // most state: renaming keeps them in place. Nothing must move, so a device's worth of state is a
  // third of all; the keep-in-place price is 3 % of the seed's 101 ms per device's worth.
  for (const int64_t x_bytes : {1000, 4000}) {
    SCOPED_TRACE(x_bytes);
    absl::StatusOr<Model> model =
        BuildModel(LAndXShareGpu0(1'000'000, 99'500'000, {10'000, x_bytes, 10'000, 10'000}));
    ASSERT_TRUE(model.ok()) << model.status();
    const FixedAnswer member(FreshWithXOn(*model, 2));
    ReplacementOptions options = ChoiceOnly();
    absl::StatusOr<PartitionResult> result = Replace(*model, SolveContext(), options, {&member});
    ASSERT_TRUE(result.ok()) << result.status();
    if (x_bytes == 1000) {
      // x is 0.097 of a device's worth (31 KB / 3): priced 0.29 ms < the 0.5 ms it gains.
      EXPECT_EQ(result->winner, "fixed");
      EXPECT_EQ(result->winner_makespan_ns, 100'500'000);
      EXPECT_EQ(BytesMoved(*model, result->assignment), 1000);
    } else {
      // x is 0.35 of a device's worth (34 KB / 3): priced 1.07 ms > 0.5 ms, the state stays.
      EXPECT_EQ(result->winner, "previous_placement");
      EXPECT_EQ(BytesMoved(*model, result->assignment), 0);
      options.keep_in_place_tolerance = 0.0;  // the request's weight alone: the fresh answer wins
      absl::StatusOr<PartitionResult> moved = Replace(*model, SolveContext(), options, {&member});
      ASSERT_TRUE(moved.ok()) << moved.status();
      EXPECT_EQ(moved->winner, "fixed");
      EXPECT_EQ(BytesMoved(*model, moved->assignment), 4000);
    }
  }
}

TEST(ReplacementTest, TheToleranceGrowsWithEveryDevicesWorthOfStateAnAnswerMoves) {
  // Before: L and x on gpu0 (103 ms), M on gpu1 and N on gpu2 (100 ms each); gpu3 joins. A fresh
  // answer moves x to gpu3: 100 ms, 2.9 % faster. L holds the most state, so renaming keeps it (and
  // gpu0) in place and x moves. Nothing must move, so a device's worth of state is a quarter of all;
  // each is priced 3 % of the seed's 103 ms.
  for (const int64_t x_bytes : {40'000, 190'000}) {
    SCOPED_TRACE(x_bytes);
    v1::PlaceRequest request = LAndXShareGpu0(3'000'000, 100'000'000, {200'000, x_bytes, 5'000, 5'000});
    AddTestDevice(request, "gpu3", "gpu", 1 << 20);
    absl::StatusOr<Model> model = BuildModel(request);
    ASSERT_TRUE(model.ok()) << model.status();
    const FixedAnswer member(FreshWithXOn(*model, 3));
    absl::StatusOr<PartitionResult> result = Replace(*model, SolveContext(), ChoiceOnly(), {&member});
    ASSERT_TRUE(result.ok()) << result.status();
    if (x_bytes == 40'000) {
      // x is 0.39 of a device's worth (410 KB / 4): 1.2 ms < the 3 ms it gains.
      EXPECT_EQ(result->winner, "fixed");
      EXPECT_EQ(result->winner_makespan_ns, 100'000'000);
      EXPECT_EQ(BytesMoved(*model, result->assignment), x_bytes);
    } else {
      // x is 1.9 devices' worth (400 KB / 4): 1.9 x 3 % = 5.9 ms > 3 ms, the state stays.
      EXPECT_EQ(result->winner, "previous_placement");
      EXPECT_EQ(BytesMoved(*model, result->assignment), 0);
    }
  }
}

TEST(ReplacementTest, TheSeedMaySplitTheDepartedWorkBetweenTwoDevices) {
  // A chain a -> x -> b -> c1 -> c2 of 1 ms ops, 0.5 ms per transfer; a, b and w (2 ms, independent)
  // on gpu0, z (4 ms) on gpu1, gpu2 idle; x, c1 and c2 were on gpu3, which leaves. Whole on gpu2 (the
  // best single device) x costs two transfers on the chain: 6.5 ms; whole on gpu0, c2 waits for w:
  // 7 ms. Split, x goes to gpu0 and c1, c2 to gpu2: 5.5 ms.
  v1::PlaceRequest request = IndependentOps({{"a", 1'000'000}, {"x", 1'000'000}, {"b", 1'000'000},
                                             {"c1", 1'000'000}, {"c2", 1'000'000}, {"w", 2'000'000},
                                             {"z", 4'000'000}});
  for (int i = 0; i < 4; ++i) {
    v1::Edge* edge = request.mutable_graph()->add_edges();
    edge->set_src(i);
    edge->set_dst(i + 1);
    edge->set_bytes(500'000);
  }
  auto& previous = *request.mutable_options()->mutable_previous_placement();
  previous["a"] = previous["b"] = previous["w"] = "gpu0";
  previous["z"] = "gpu1";
  previous["x"] = previous["c1"] = previous["c2"] = "gpu3";
  absl::StatusOr<Model> model = BuildModel(request);
  ASSERT_TRUE(model.ok()) << model.status();
  const Assignment seed = ReplacementSeed(*model);
  EXPECT_EQ(seed[OpNamed(*model, "x")], 0);
  EXPECT_EQ(seed[OpNamed(*model, "c1")], 2);
  EXPECT_EQ(seed[OpNamed(*model, "c2")], 2);
  Simulator simulator(*model);
  EXPECT_EQ(simulator.Run(seed).makespan_ns, 5'500'000);
}

TEST(ReplacementTest, AMembersAnswerWithTheKeptStatePutBackCompetesToo) {
  // Before: w1 (2 KB of state), w2 (1 KB), x and y on gpu0, z (no state) on gpu2, which leaves. The
  // seed keeps gpu0 and re-homes z to gpu1: 4.2 ms. A fresh answer balances the compute (x on gpu0,
  // y and z on gpu1: 4.1 ms) but moves w2; with w2 put back on gpu0 it takes 4.0 ms and moves
  // nothing, so that hybrid wins.
  v1::PlaceRequest request = IndependentOps(
      {{"w1", 100'000}, {"w2", 100'000}, {"x", 2'000'000}, {"y", 2'000'000}, {"z", 2'000'000}});
  request.mutable_graph()->mutable_ops(0)->set_persistent_bytes(2000);
  request.mutable_graph()->mutable_ops(1)->set_persistent_bytes(1000);
  auto& previous = *request.mutable_options()->mutable_previous_placement();
  previous["w1"] = previous["w2"] = previous["x"] = previous["y"] = "gpu0";
  previous["z"] = "gpu2";
  request.mutable_options()->set_move_weight_ns_per_byte(1e-6);
  RemoveDevice(request, "gpu2");
  absl::StatusOr<Model> model = BuildModel(request);
  ASSERT_TRUE(model.ok()) << model.status();
  Assignment fresh(model->num_ops());
  fresh[OpNamed(*model, "w1")] = fresh[OpNamed(*model, "x")] = 0;
  fresh[OpNamed(*model, "w2")] = fresh[OpNamed(*model, "y")] = fresh[OpNamed(*model, "z")] = 1;
  const FixedAnswer member(fresh);
  absl::StatusOr<PartitionResult> result = Replace(*model, SolveContext(), ChoiceOnly(), {&member});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->winner, "previous_state+fixed");
  EXPECT_EQ(result->winner_makespan_ns, 4'000'000);
  EXPECT_EQ(BytesMoved(*model, result->assignment), 0);
  EXPECT_EQ(result->assignment[OpNamed(*model, "w2")], 0);
  EXPECT_EQ(result->assignment[OpNamed(*model, "y")], 1);
}

TEST(ReplacementTest, MEtfDrawnTowardsThePreviousDevicesCompetes) {
  // A 400-op step that m-ETF placed on 6 GPUs loses gpu0. Among the seed and m-ETF's fresh answer
  // (and its hybrids) the seed wins; m-ETF drawn towards the previous devices finds a faster start
  // that still keeps most state in place.
  RandomGraphOptions graph;
  graph.num_ops = 400;
  graph.num_devices = 6;
  graph.seed = 2;
  v1::PlaceRequest request = RandomLayeredRequest(graph);
  absl::StatusOr<Model> before = BuildModel(request);
  ASSERT_TRUE(before.ok()) << before.status();
  const std::unique_ptr<Partitioner> m_etf = MakeMEtfPartitioner();
  absl::StatusOr<PartitionResult> placed = m_etf->Partition(*before, SolveContext());
  ASSERT_TRUE(placed.ok()) << placed.status();
  auto& previous = *request.mutable_options()->mutable_previous_placement();
  for (const v1::Op& op : request.graph().ops()) {
    previous[op.name()] =
        request.cluster().devices(placed->assignment[OpNamed(*before, op.name())]).name();
  }
  request.mutable_options()->set_move_weight_ns_per_byte(1e-6);
  RemoveDevice(request, "gpu0");
  absl::StatusOr<Model> model = BuildModel(request);
  ASSERT_TRUE(model.ok()) << model.status();
  ReplacementOptions options = ChoiceOnly();
  absl::StatusOr<PartitionResult> without = Replace(*model, SolveContext(), options, {m_etf.get()});
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_EQ(without->winner, "previous_placement");
  options.towards_previous_weights = ReplacementOptions().towards_previous_weights;
  absl::StatusOr<PartitionResult> with = Replace(*model, SolveContext(), options, {m_etf.get()});
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_EQ(with->winner, "m_etf@previous");
  EXPECT_LT(with->winner_makespan_ns, without->winner_makespan_ns);
  // What a device's worth of state costs: the objective the choice minimised is lower too.
  const Assignment seed = ReplacementSeed(*model);
  Simulator simulator(*model);
  const double price = ReplacementOptions().keep_in_place_tolerance *
                       static_cast<double>(simulator.Run(seed).makespan_ns) /
                       static_cast<double>(BytesMoved(*model, seed));
  auto objective = [&](const PartitionResult& r) {
    return static_cast<double>(r.winner_makespan_ns) +
           (price + 1e-6) * static_cast<double>(BytesMoved(*model, r.assignment));
  };
  EXPECT_LT(objective(*with), objective(*without));
}

TEST(ReplacementTest, ASeedNearTheLowerBoundSkipsTheMembersAndTheSearch) {
  // Four independent 100 ms ops, two of them on gpu0 before, one on gpu1 and one on gpu2, which
  // leaves: the seed re-homes its op to gpu1, a 200 ms step, which is the lower bound (400 ms of work
  // on two GPUs). Nothing can beat it: the member is not asked, nor is the search run; with the
  // margin below zero (never near) the member is asked.
  v1::PlaceRequest request = IndependentOps({{"a", 100'000'000},
                                             {"b", 100'000'000},
                                             {"c", 100'000'000},
                                             {"d", 100'000'000}});
  auto& previous = *request.mutable_options()->mutable_previous_placement();
  previous["a"] = previous["b"] = "gpu0";
  previous["c"] = "gpu1";
  previous["d"] = "gpu2";
  RemoveDevice(request, "gpu2");
  absl::StatusOr<Model> model = BuildModel(request);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ(LowerBoundNs(*model), 200'000'000);
  const Assignment seed = ReplacementSeed(*model);
  const FixedAnswer member(seed);
  ReplacementOptions options;
  options.skip_near_lower_bound = 0.01;
  absl::StatusOr<PartitionResult> skipped = Replace(*model, SolveContext(), options, {&member});
  ASSERT_TRUE(skipped.ok()) << skipped.status();
  EXPECT_EQ(member.calls(), 0);
  EXPECT_EQ(skipped->winner, "previous_placement");
  EXPECT_EQ(skipped->assignment, seed);
  options.skip_near_lower_bound = -1;  // never near enough
  absl::StatusOr<PartitionResult> asked = Replace(*model, SolveContext(), options, {&member});
  ASSERT_TRUE(asked.ok()) << asked.status();
  EXPECT_EQ(member.calls(), 1);
}

TEST(ReplacementTest, ThePullBackReturnsStateTheStepDoesNotNeedMoved) {
  // Before: a and b (2 ms each) on gpu0, s (0.1 ms) on gpu1, gpu2 idle: 4 ms. A fresh answer splits a
  // and b (2.1 ms) but also moves s, which gains nothing: renamed towards the previous placement it
  // moves a and s (b, the most state, stays on gpu0). The pull-back returns s to gpu1 for the same
  // step.
  v1::PlaceRequest request = IndependentOps({{"a", 2'000'000}, {"b", 2'000'000}, {"s", 100'000}});
  request.mutable_graph()->mutable_ops(0)->set_persistent_bytes(100);
  request.mutable_graph()->mutable_ops(1)->set_persistent_bytes(1000);
  request.mutable_graph()->mutable_ops(2)->set_persistent_bytes(100);
  auto& previous = *request.mutable_options()->mutable_previous_placement();
  previous["a"] = previous["b"] = "gpu0";
  previous["s"] = "gpu1";
  request.mutable_options()->set_move_weight_ns_per_byte(1.0);
  absl::StatusOr<Model> model = BuildModel(request);
  ASSERT_TRUE(model.ok()) << model.status();
  Assignment fresh(3);
  fresh[OpNamed(*model, "a")] = 0;
  fresh[OpNamed(*model, "b")] = fresh[OpNamed(*model, "s")] = 2;
  const FixedAnswer member(fresh);
  ReplacementOptions options;
  options.search = false;
  options.pull_back = false;
  options.towards_previous_weights.clear();
  absl::StatusOr<PartitionResult> without = Replace(*model, SolveContext(), options, {&member});
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_EQ(without->winner, "fixed");
  EXPECT_EQ(BytesMoved(*model, without->assignment), 200);
  options.pull_back = true;
  absl::StatusOr<PartitionResult> with = Replace(*model, SolveContext(), options, {&member});
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_EQ(BytesMoved(*model, with->assignment), 100);
  EXPECT_EQ(with->assignment[OpNamed(*model, "s")], 1);
  EXPECT_EQ(with->assignment[OpNamed(*model, "b")], 0);
  Simulator simulator(*model);
  EXPECT_EQ(ScoreSimulation(*model, simulator.Run(with->assignment)).makespan_ns, 2'100'000);
  // However wide the tolerance, the step never ends above the start's (winner_makespan_ns): a back
  // on gpu0 (4 ms, within 2 × 2.1 ms) stays where the fresh answer put it.
  options.pull_back_step_tolerance = 1.0;
  absl::StatusOr<PartitionResult> wide = Replace(*model, SolveContext(), options, {&member});
  ASSERT_TRUE(wide.ok()) << wide.status();
  EXPECT_EQ(ScoreSimulation(*model, simulator.Run(wide->assignment)).makespan_ns,
            wide->winner_makespan_ns);
  EXPECT_EQ(BytesMoved(*model, wide->assignment), 100);
}

TEST(ReplacementTest, RenamingKeepsAMembersDevicesOnTheirHosts) {
  // Two hosts of two GPUs, 1 GB/s within a host and 1 MB/s between them. A fresh answer runs chain
  // p1 -> p2 on host h0 (1 MB between them: 1 ms) and chain q1 -> q2 on host h1. Before, p2's state was
  // on h1's first GPU (q1 and q2 are new): renaming the answer's h0b to h1a would keep it there but put p1 -> p2 across
  // hosts (1 s); only devices of one host are interchangeable, so the answer keeps its own step.
  v1::PlaceRequest request;
  for (const char* name : {"p1", "p2", "q1", "q2"})
    AddTestOp(request, name, 1'000'000)->set_persistent_bytes(1000);
  for (const auto& [src, dst] : {std::pair{0, 1}, std::pair{2, 3}}) {
    v1::Edge* edge = request.mutable_graph()->add_edges();
    edge->set_src(src);
    edge->set_dst(dst);
    edge->set_bytes(1'000'000);
  }
  for (const char* name : {"h0a", "h0b"}) AddTestDevice(request, name, "gpu", 1 << 30)->set_node("h0");
  for (const char* name : {"h1a", "h1b"}) AddTestDevice(request, name, "gpu", 1 << 30)->set_node("h1");
  request.mutable_cluster()->mutable_intra_node()->set_bandwidth_bytes_per_second(1'000'000'000);
  request.mutable_cluster()->mutable_inter_node()->set_bandwidth_bytes_per_second(1'000'000);
  auto& previous = *request.mutable_options()->mutable_previous_placement();
  previous["p1"] = "h0a";
  previous["p2"] = "h1a";
  request.mutable_options()->set_move_weight_ns_per_byte(1e-3);
  absl::StatusOr<Model> model = BuildModel(request);
  ASSERT_TRUE(model.ok()) << model.status();
  auto device = [&](const char* name) {
    for (DeviceId d = 0; d < model->num_devices(); ++d) {
      if (model->device_name[d] == name) return d;
    }
    ADD_FAILURE() << name;
    return DeviceId{0};
  };
  Assignment fresh(4);
  fresh[OpNamed(*model, "p1")] = device("h0a");
  fresh[OpNamed(*model, "p2")] = device("h0b");
  fresh[OpNamed(*model, "q1")] = device("h1a");
  fresh[OpNamed(*model, "q2")] = device("h1b");
  Simulator simulator(*model);
  const int64_t member_step = ScoreSimulation(*model, simulator.Run(fresh)).makespan_ns;
  ASSERT_LT(member_step, 10'000'000);
  const FixedAnswer member(fresh);
  ReplacementOptions options;
  options.search = false;
  options.pull_back = false;
  options.towards_previous_weights.clear();  // it would put p1 and p2 together: a renaming test
  absl::StatusOr<PartitionResult> result = Replace(*model, SolveContext(), options, {&member});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->winner, "fixed");
  EXPECT_EQ(result->winner_makespan_ns, member_step);
  EXPECT_EQ(model->device_node[result->assignment[OpNamed(*model, "p1")]],
            model->device_node[result->assignment[OpNamed(*model, "p2")]]);
}

TEST(ReplacementTest, DeterministicForARequestAndSeed) {
  v1::PlaceRequest request = StepOnFourGpus(11);
  const auto previous = PlaceFresh(request);
  RemoveDevice(request, "gpu2");
  *request.mutable_options()->mutable_previous_placement() = previous;
  request.mutable_options()->set_move_weight_ns_per_byte(1e-4);
  request.mutable_options()->set_seed(4);
  const Replaced first = ReplaceWithAuto(request);
  const Replaced second = ReplaceWithAuto(ShuffleRequest(request, 99));
  // Same answer by op name (the shuffled request orders its ops differently).
  EXPECT_EQ(first.placement.metrics().makespan_ns(), second.placement.metrics().makespan_ns());
  EXPECT_EQ(first.placement.metrics().bytes_moved(), second.placement.metrics().bytes_moved());
  EXPECT_EQ(first.placement.provenance().request_digest(),
            second.placement.provenance().request_digest());
}

}  // namespace
}  // namespace placement::engine
