// Tests of PlacementScore (its order), ScoreSimulation (overflow summed over devices, saturating) and
// CheckAssignmentComplete (size and range).
#include "service/engine/sim/placement_score.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/v1/placement.pb.h"
#include "service/engine/model/model_builder.h"

namespace placement::engine {
namespace {

using ::testing::HasSubstr;

TEST(PlacementScoreTest, LessOverflowWinsBeforeAShorterStep) {
  const PlacementScore fits_slow{0, 900}, fits_fast{0, 100}, short_of_10{10, 50}, short_of_20{20, 10};
  EXPECT_TRUE(fits_fast.BetterThan(fits_slow));
  EXPECT_FALSE(fits_slow.BetterThan(fits_fast));
  EXPECT_TRUE(fits_slow.BetterThan(short_of_10));  // fitting beats any overflow, however fast
  EXPECT_TRUE(short_of_10.BetterThan(short_of_20));
  EXPECT_FALSE(short_of_20.BetterThan(short_of_10));
  EXPECT_TRUE((PlacementScore{10, 40}).BetterThan(short_of_10));  // same overflow: the shorter step
}

TEST(PlacementScoreTest, EqualIsNotBetterAndWorstLosesToEverything) {
  const PlacementScore a{5, 7};
  EXPECT_FALSE(a.BetterThan(a));
  EXPECT_TRUE(a.BetterThan(PlacementScore::Worst()));
  EXPECT_FALSE(PlacementScore::Worst().BetterThan(a));
  EXPECT_TRUE((PlacementScore{0, 0}).Fits());
  EXPECT_FALSE(a.Fits());
}

TEST(PlacementScoreTest, MemoryCanBindWhenTheGraphsBytesExceedTheSmallestDevice) {
  auto model = [](int64_t memory_bytes, int32_t microbatches) {
    v1::PlaceRequest request;
    for (const char* name : {"a", "b"}) {
      v1::Op* op = request.mutable_graph()->add_ops();
      op->set_name(name);
      op->set_compute_ns(10);
      op->set_output_bytes(100);
      op->set_persistent_bytes(50);
    }
    v1::Edge* e = request.mutable_graph()->add_edges();
    e->set_src(0);
    e->set_dst(1);
    e->set_bytes(100);
    for (int64_t bytes : {memory_bytes, memory_bytes * 2}) {
      v1::Device* d = request.mutable_cluster()->add_devices();
      d->set_name(bytes == memory_bytes ? "small" : "large");
      d->set_kind("gpu");
      d->set_memory_bytes(bytes);
    }
    request.mutable_cluster()->mutable_intra_node()->set_bandwidth_bytes_per_second(1'000'000'000);
    request.mutable_options()->set_microbatches(microbatches);
    absl::StatusOr<Model> built = BuildModel(request);
    EXPECT_TRUE(built.ok()) << built.status();
    return *std::move(built);
  };
  // Persistent 100 + per copy (2 x 200 output + 100 edge) = 600 bytes at most.
  EXPECT_FALSE(MemoryCanBind(model(600, 1)));
  EXPECT_TRUE(MemoryCanBind(model(599, 1)));
  // Two microbatches: 100 + 2 x 500.
  EXPECT_TRUE(MemoryCanBind(model(1000, 2)));
  EXPECT_FALSE(MemoryCanBind(model(1100, 2)));
}

// Two devices with 1000 and 1550 bytes; `a` and `b` hold 1500 persistent bytes each, `c` 100.
Model TwoDeviceModel() {
  v1::PlaceRequest request;
  for (const auto& [name, bytes] : {std::pair<std::string, int64_t>{"a", 1500}, {"b", 1500}, {"c", 100}}) {
    v1::Op* op = request.mutable_graph()->add_ops();
    op->set_name(name);
    op->set_compute_ns(10);
    op->set_persistent_bytes(bytes);
  }
  for (const auto& [name, bytes] : {std::pair<std::string, int64_t>{"d0", 1000}, {"d1", 1550}}) {
    v1::Device* device = request.mutable_cluster()->add_devices();
    device->set_name(name);
    device->set_kind("gpu");
    device->set_node("n0");
    device->set_memory_bytes(bytes);
  }
  request.mutable_cluster()->mutable_intra_node()->set_bandwidth_bytes_per_second(1'000'000'000);
  absl::StatusOr<Model> model = BuildModel(request);
  EXPECT_TRUE(model.ok()) << model.status();
  return *std::move(model);
}

// 3,100 persistent bytes against 2,550 bytes of memory: no placement fits. With 3,200 bytes they might;
// one op of 1,600 bytes (its persistent, temp and output bytes) is too big for either device, unless it
// takes no time (it then holds nothing).
TEST(PlacementScoreTest, MemoryCannotFitWhenThePersistentBytesExceedEveryDeviceTogether) {
  Model model = TwoDeviceModel();
  EXPECT_TRUE(MemoryCannotFit(model));
  model.capacity_bytes = {1600, 1600};
  EXPECT_FALSE(MemoryCannotFit(model));
  model.temp_bytes[0] = 100;  // a: 1500 + 100 = 1600, still fits the larger device
  EXPECT_FALSE(MemoryCannotFit(model));
  model.output_bytes[0] = 1;
  EXPECT_TRUE(MemoryCannotFit(model));
  model.compute_ns[0] = 0;
  EXPECT_FALSE(MemoryCannotFit(model));
}

// Counted, not simulated: d0 (1000) and d1 (1550) against the persistent bytes each assignment puts there.
TEST(PlacementScoreTest, PersistentBytesAboveCapacityCountsWhatEachDeviceHoldsForTheWholeStep) {
  const Model model = TwoDeviceModel();  // a = 0, b = 1, c = 2
  EXPECT_EQ(PersistentBytesAboveCapacity(model, {0, 1, 0}), 600);          // d0: 1600
  EXPECT_EQ(PersistentBytesAboveCapacity(model, {1, 1, 1}), 1550);         // d1: 3100
  EXPECT_EQ(PersistentBytesAboveCapacity(model, {0, 0, 1}), 2000);         // d0: 3000
  EXPECT_EQ(PersistentBytesAboveCapacity(model, {0, 1, 1}), 500 + 50);     // d0: 1500, d1: 1600
}

TEST(ScoreSimulationTest, SumsWhatEachDeviceIsShortAndTakesTheMakespan) {
  const Model model = TwoDeviceModel();  // canonical ids follow names: a = 0, b = 1, c = 2
  Simulator simulator(model);
  // d0 holds a + c = 1600 (600 short), d1 holds b = 1500 (fits).
  const SimResult& one_short = simulator.Run({0, 1, 0});
  PlacementScore score = ScoreSimulation(model, one_short);
  EXPECT_EQ(score.overflow_bytes, 600);
  EXPECT_EQ(score.makespan_ns, one_short.makespan_ns);
  // d0 holds nothing, d1 holds 3100 (1550 short); serial on one device.
  score = ScoreSimulation(model, simulator.Run({1, 1, 1}));
  EXPECT_EQ(score.overflow_bytes, 1550);
  EXPECT_EQ(score.makespan_ns, 30);
  // d0 holds a = 1500 (500 short), d1 holds b + c = 1600 (50 short): the shortfalls add up.
  EXPECT_EQ(ScoreSimulation(model, simulator.Run({0, 1, 1})).overflow_bytes, 500 + 50);
}

TEST(ScoreSimulationTest, OverflowSaturatesInsteadOfWrapping) {
  const Model model = TwoDeviceModel();
  SimResult huge;
  huge.makespan_ns = 1;
  huge.peak_memory_bytes = {INT64_MAX, INT64_MAX};
  EXPECT_EQ(ScoreSimulation(model, huge).overflow_bytes, INT64_MAX);
}

// What a report computes from an answer's per-device peaks and capacities: the shortfalls add up, a
// device with room counts nothing, and the sum saturates.
TEST(BytesAboveCapacityTest, AddsTheShortfallsAndSaturates) {
  EXPECT_EQ(BytesAboveCapacity({1500, 900, 1600}, {1000, 1000, 1550}), 500 + 50);
  EXPECT_EQ(BytesAboveCapacity({900, 1000}, {1000, 1000}), 0);
  EXPECT_EQ(BytesAboveCapacity({INT64_MAX, INT64_MAX}, {0, 0}), INT64_MAX);
}

TEST(CheckAssignmentCompleteTest, AcceptsOneInRangeDevicePerOp) {
  const Model model = TwoDeviceModel();
  EXPECT_TRUE(CheckAssignmentComplete(model, {0, 1, 1}, "x").ok());
}

TEST(CheckAssignmentCompleteTest, NamesTheAlgorithmAndTheProblem) {
  const Model model = TwoDeviceModel();
  absl::Status short_one = CheckAssignmentComplete(model, {0, 1}, "heft");
  EXPECT_EQ(short_one.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(short_one.message()), HasSubstr("\"heft\" returned 2 devices for 3 ops"));
  absl::Status out_of_range = CheckAssignmentComplete(model, {0, 2, 1}, "pipeline");
  EXPECT_EQ(out_of_range.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(out_of_range.message()), HasSubstr("returned device 2 for op \"b\""));
  EXPECT_FALSE(CheckAssignmentComplete(model, {kNone, 0, 0}, "m_etf").ok());
}

// Only where the best fits does a run stop early, at the best step less the candidate's added cost
// (at least 1 ns in); the other options are kept.
TEST(PlacementScoreTest, StopUnlessBetterStopsOnlyAgainstAFittingBest) {
  SimOptions base;
  base.compute_memory = false;
  base.max_in_flight = 2;
  const SimOptions fits = StopUnlessBetter(base, PlacementScore{0, 1000}, 300);
  EXPECT_EQ(fits.stop_at_ns, 700);
  EXPECT_FALSE(fits.compute_memory);
  EXPECT_EQ(fits.max_in_flight, 2);
  EXPECT_EQ(StopUnlessBetter(base, PlacementScore{0, 1000}).stop_at_ns, 1000);
  EXPECT_EQ(StopUnlessBetter(base, PlacementScore{0, 1000}, 5000).stop_at_ns, 1);
  EXPECT_EQ(StopUnlessBetter(base, PlacementScore{10, 1000}).stop_at_ns, 0);  // overflowing: no stop
}

}  // namespace
}  // namespace placement::engine
