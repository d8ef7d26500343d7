#ifndef PLACEMENT_SERVICE_ENGINE_PARTITION_REPORTED_SCORE_CHECK_H_
#define PLACEMENT_SERVICE_ENGINE_PARTITION_REPORTED_SCORE_CHECK_H_

// For tests of partitioners that fill PartitionResult::simulated: on random layered graphs with plans
// (microbatches, windows the solver chooses, tight memory), the score a result reports must be what a
// fresh simulation of its assignment on the model gives (with the plan's working window) — `auto` takes
// it instead of simulating again. Header-only, with gtest expectations.

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/partition/partitioner.h"
#include "service/engine/sim/placement_score.h"
#include "service/engine/sim/simulator.h"
#include "tests/testutil/random_graph.h"

namespace placement::engine {

inline void ExpectReportedScoresMatchASimulation(const Partitioner& partitioner) {
  for (int seed = 1; seed <= 10; ++seed) {
    testutil::RandomGraphOptions options;
    options.num_ops = 30 + 23 * seed;
    options.num_devices = 2 + seed % 3;
    options.colocation_fraction = 0.2;
    options.max_output_bytes = 8 << 20;
    options.seed = seed;
    v1::PlaceRequest request = testutil::RandomLayeredRequest(options);
    request.mutable_options()->set_microbatches(1 + seed % 4);
    if (seed % 2 == 0) request.mutable_options()->set_max_in_flight(0);  // the solver chooses W
    if (seed % 3 == 0) {
      for (v1::Device& d : *request.mutable_cluster()->mutable_devices()) d.set_memory_bytes(24 << 20);
    }
    absl::StatusOr<Model> model = BuildModel(request);
    ASSERT_TRUE(model.ok()) << model.status();
    absl::StatusOr<PartitionResult> result = partitioner.Partition(*model, SolveContext());
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_TRUE(result->simulated.has_value()) << partitioner.name() << ", seed " << seed;
    Simulator simulator(*model);
    const PlacementScore fresh = ScoreSimulation(*model, simulator.Run(result->assignment));
    EXPECT_EQ(result->simulated->makespan_ns, fresh.makespan_ns) << partitioner.name() << ", seed " << seed;
    EXPECT_EQ(result->simulated->overflow_bytes, fresh.overflow_bytes) << partitioner.name() << ", seed " << seed;
  }
}

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_PARTITION_REPORTED_SCORE_CHECK_H_
