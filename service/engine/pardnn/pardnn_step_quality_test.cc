// pardnn on real training steps (label `quality`: seconds, not milliseconds), exported by
// placement.torch_export with the tight-memory corpus's cluster (bench/tight_memory; tests/data/README.md):
//   * ResNet-50 (torchvision, batch 8 at 224 x 224, SGD) cut to four devices of 0.35 x its one-device
//     peak each by placement_compare_bench --dump_dir: memory binds;
//   * a 32-layer transformer of width 128 (Adam) on four devices over two hosts: the total work, not
//     the critical path, bounds the step, and the link between the hosts is eight times slower;
//   * a 24-layer transformer of width 512 (Adam), four devices over two hosts of 0.35 x its
//     one-device peak each (bench/tight_memory's gpt_24x512 cut by placement_compare_bench --dump_dir);
//   * a 48-layer transformer of width 256 (Adam) on two devices of 0.45 x its one-device peak, with
//     pardnn 6's answer (before the work balance): one device busy the whole step, the other full;
//   * DenseNet-121 (torchvision, batch 8 at 224 x 224, SGD) on eight devices over four hosts (two
//     each, 12.5 GB/s between hosts) of 0.45 x its one-device peak.
#include <cstdint>
#include <memory>

#include "gtest/gtest.h"
#include "service/engine/io/message_io.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/pardnn/pardnn_partitioner.h"
#include "service/engine/pardnn/work_balance.h"
#include "service/engine/sim/placement_score.h"
#include "service/engine/sim/simulator.h"

namespace placement::engine {
namespace {

constexpr char kResNet50Tight[] = "tests/data/requests/resnet50_k4_peak035.json.gz";
constexpr char kTransformerTwoHosts[] = "tests/data/requests/gpt32x128_k4_two_hosts.json.gz";
constexpr char kTransformerTight[] = "tests/data/requests/gpt24x512_k4_peak035.json.gz";
constexpr char kDenseNetFourHosts[] = "tests/data/requests/densenet121_k8_four_hosts_peak045.json.gz";
constexpr char kDeepTransformerTight[] = "tests/data/requests/gpt48x256_k2_peak045.json.gz";
constexpr char kDeepTransformerPardnn6[] = "tests/data/requests/gpt48x256_k2_peak045.pardnn6.json.gz";

absl::StatusOr<Model> ReadModel(const char* path) {
  absl::StatusOr<v1::PlaceRequest> request = ReadMessageFile<v1::PlaceRequest>(path);
  if (!request.ok()) return request.status();
  return BuildModel(*request);
}

SimResult PlaceAndSimulate(const Model& model, const PardnnOptions& options) {
  absl::StatusOr<PartitionResult> result = MakePardnnPartitioner(options)->Partition(model, SolveContext());
  EXPECT_TRUE(result.ok()) << result.status();
  Simulator sim(model);
  return result.ok() ? sim.Run(result->assignment) : SimResult();
}

// Places the fixture's step with `without` and with the default options: both must fit, and the
// default's step must take at most `ratio` x the other's.
void ExpectShorterThanWithout(const char* fixture, const PardnnOptions& without, double ratio) {
  absl::StatusOr<Model> model = ReadModel(fixture);
  ASSERT_TRUE(model.ok()) << model.status();
  const SimResult before = PlaceAndSimulate(*model, without);
  const SimResult after = PlaceAndSimulate(*model, PardnnOptions());
  EXPECT_TRUE(before.MemoryFits(*model));
  EXPECT_TRUE(after.MemoryFits(*model));
  EXPECT_LE(static_cast<double>(after.makespan_ns), ratio * static_cast<double>(before.makespan_ns))
      << "with the defaults " << after.makespan_ns << " ns, without " << before.makespan_ns << " ns";
}

TEST(PardnnStepQualityTest, TheParametersFamilyShortensAMemoryBoundResNetStep) {
  // Without the third family pardnn's best fitting answer takes 19.7 ms; contiguous critical-path
  // pieces that carry their parameters give 17.8 ms (the lower bound is 17.2 ms).
  PardnnOptions without;
  without.parameters_family = false;
  ExpectShorterThanWithout(kResNet50Tight, without, 0.95);
}

TEST(PardnnStepQualityTest, SlackCostsWhereTheWorkBoundsTheStepUseTheOtherHost) {
  // With plain costs for its second model too, pardnn keeps the weight updates off the slow link
  // (most of the work on the first host): 12.5 ms. Slack measured against the critical path lets
  // them cross it: 10.3 ms (the lower bound is 8.4 ms).
  PardnnOptions without;
  without.slack_costs_where_work_bound = false;
  ExpectShorterThanWithout(kTransformerTwoHosts, without, 0.9);
}

TEST(PardnnStepQualityTest, TheMemoryObliviousMappingShortensATightTransformerStep) {
  // The mappings that keep memory in view cut the critical path for memory the simulated schedule
  // never needs: 21.6 ms. Mapped with memory out of view (ParDNN's own first stage), the step fits
  // as it is and takes 19.2 ms (the lower bound is 17.9 ms).
  PardnnOptions without;
  without.memory_oblivious_mapping = false;
  ExpectShorterThanWithout(kTransformerTight, without, 0.95);
}

TEST(PardnnStepQualityTest, FewerHostsShortenATightStepOverSlowLinks) {
  // On all eight devices the chunked critical path spreads over three hosts: 21.7 ms. On the devices
  // of the first two hosts (what holds 1.25 x the one-device peak) pardnn takes 19.4 ms (the lower
  // bound is 19.0; heft 20.1).
  PardnnOptions without;
  without.fewer_hosts_family = false;
  ExpectShorterThanWithout(kDenseNetFourHosts, without, 0.95);
}

TEST(PardnnStepQualityTest, TheWorkBalanceMovesTheSmallUpdatesToTheIdleDevice) {
  // pardnn 6's answer keeps the first device busy the whole step (42.9 ms) and the second 34 % busy
  // and full to 0.1 MiB: no single move fits. Most of the work is Adam's updates, and those of biases
  // and norms hold almost nothing: one batch of 235 of them moved takes the step to 31.6 ms in five
  // simulations (the lower bound is 28.8 ms). pardnn's whole solve takes ~25 s here (30.4 ms), so the
  // stage is checked on its own, from that answer.
  absl::StatusOr<Model> model = ReadModel(kDeepTransformerTight);
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<v1::Placement> answer = ReadMessageFile<v1::Placement>(kDeepTransformerPardnn6);
  ASSERT_TRUE(answer.ok()) << answer.status();
  ASSERT_EQ(answer->device_size(), model->num_ops());
  Assignment assignment(model->num_ops());
  for (int32_t i = 0; i < answer->device_size(); ++i) {
    assignment[model->op_of_request_index[i]] = answer->device(i);
  }
  Simulator sim(*model);
  const PlacementScore before = ScoreSimulation(*model, sim.Run(assignment));
  ASSERT_TRUE(before.Fits());
  const pardnn::WorkBalanceResult r =
      pardnn::BalanceWork(*model, pardnn::WorkBalanceOptions(), SolveContext(), sim, assignment);
  const PlacementScore after = ScoreSimulation(*model, sim.Run(assignment));
  EXPECT_TRUE(after.Fits());
  EXPECT_EQ(after.makespan_ns, r.makespan_ns);
  EXPECT_LE(static_cast<double>(after.makespan_ns), 0.8 * static_cast<double>(before.makespan_ns))
      << "balanced " << after.makespan_ns << " ns, pardnn 6 " << before.makespan_ns << " ns";
}

}  // namespace
}  // namespace placement::engine
