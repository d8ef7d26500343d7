#ifndef PLACEMENT_SERVICE_ENGINE_PARTITION_REPORTED_SCORE_CHECK_H_
#define PLACEMENT_SERVICE_ENGINE_PARTITION_REPORTED_SCORE_CHECK_H_

// For tests of partitioners that fill PartitionResult::simulated: on random layered graphs with plans
// (microbatches, windows the solver chooses, tight memory), the score a result reports must be what a
// fresh simulation of its assignment on the model gives (with the plan's working window), and the score
// it reports for the window it chose is what a simulation with that window gives — `auto` takes both
// instead of simulating again. Header-only, with gtest expectations.

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/partition/partitioner.h"
#include "service/engine/plans/plan_model.h"
#include "service/engine/plans/window_search.h"
#include "service/engine/sim/placement_score.h"
#include "service/engine/sim/simulator.h"
#include "tests/testutil/random_graph.h"

namespace placement::engine {

// `windowed_results` (optional) counts the results that also reported a window they chose
// (PartitionResult::windowed).
inline void ExpectReportedScoresMatchASimulation(const Partitioner& partitioner,
                                                 int* windowed_results = nullptr) {
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
    absl::StatusOr<Model> built = BuildModel(request);
    ASSERT_TRUE(built.ok()) << built.status();
    // As the solver gives it: with W left open, a plan model whose working window the algorithms use.
    const PlanModel plan_model(*built, 1);
    const Model* model = &plan_model.model();
    absl::StatusOr<PartitionResult> result = partitioner.Partition(*model, SolveContext());
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_TRUE(result->simulated.has_value()) << partitioner.name() << ", seed " << seed;
    Simulator simulator(*model);
    const PlacementScore fresh = ScoreSimulation(*model, simulator.Run(result->assignment));
    EXPECT_EQ(result->simulated->makespan_ns, fresh.makespan_ns) << partitioner.name() << ", seed " << seed;
    EXPECT_EQ(result->simulated->overflow_bytes, fresh.overflow_bytes) << partitioner.name() << ", seed " << seed;
    // A window the algorithm chose, with its score: what a simulation with that window gives.
    if (result->windowed.has_value()) {
      ASSERT_GT(result->max_in_flight, 0) << partitioner.name() << ", seed " << seed;
      const PlacementScore windowed = ScoreWithWindow(*model, result->assignment, simulator, result->max_in_flight);
      EXPECT_EQ(result->windowed->makespan_ns, windowed.makespan_ns) << partitioner.name() << ", seed " << seed;
      EXPECT_EQ(result->windowed->overflow_bytes, windowed.overflow_bytes) << partitioner.name() << ", seed " << seed;
      if (windowed_results != nullptr) ++*windowed_results;
    }
  }
}

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_PARTITION_REPORTED_SCORE_CHECK_H_
