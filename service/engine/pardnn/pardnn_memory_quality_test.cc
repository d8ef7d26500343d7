// pardnn where memory binds, on a real training step (label `quality`: seconds, not milliseconds).
// The fixture is ResNet-50's training step (torchvision, batch 8 at 224 x 224, SGD) exported by
// placement.torch_export with the tight-memory corpus's cluster (bench/tight_memory), cut to four
// devices of 0.35 x its one-device peak each by placement_compare_bench --dump_dir (tests/data/README.md).
#include <cstdint>
#include <memory>

#include "gtest/gtest.h"
#include "service/engine/io/message_io.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/pardnn/pardnn_partitioner.h"
#include "service/engine/sim/simulator.h"

namespace placement::engine {
namespace {

constexpr char kResNet50Tight[] = "tests/data/requests/resnet50_k4_peak035.json.gz";

SimResult PlaceAndSimulate(const Model& model, const PardnnOptions& options) {
  absl::StatusOr<PartitionResult> result = MakePardnnPartitioner(options)->Partition(model, SolveContext());
  EXPECT_TRUE(result.ok()) << result.status();
  Simulator sim(model);
  return result.ok() ? sim.Run(result->assignment) : SimResult();
}

TEST(PardnnMemoryQualityTest, TheParametersFamilyShortensAMemoryBoundResNetStep) {
  // Without the third family pardnn's best fitting answer takes 19.7 ms; contiguous critical-path
  // pieces that carry their parameters give 17.8 ms (the lower bound is 17.2 ms).
  absl::StatusOr<v1::PlaceRequest> request = ReadMessageFile<v1::PlaceRequest>(kResNet50Tight);
  ASSERT_TRUE(request.ok()) << request.status();
  absl::StatusOr<Model> model = BuildModel(*request);
  ASSERT_TRUE(model.ok()) << model.status();
  PardnnOptions without;
  without.parameters_family = false;
  const SimResult before = PlaceAndSimulate(*model, without);
  const SimResult after = PlaceAndSimulate(*model, PardnnOptions());
  ASSERT_TRUE(before.MemoryFits(*model));
  ASSERT_TRUE(after.MemoryFits(*model));
  EXPECT_LE(static_cast<double>(after.makespan_ns), 0.95 * static_cast<double>(before.makespan_ns))
      << "with the family " << after.makespan_ns << " ns, without " << before.makespan_ns << " ns";
}

}  // namespace
}  // namespace placement::engine
