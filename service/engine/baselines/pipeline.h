// pipeline.h — the "why not just pipeline it?" baseline (GPipe / PipeDream / DeepSpeed style): a
// contiguous split of a topological order into K stages, one per device, balancing time under memory.
//
// 1. Devices are put in a chain that keeps neighbouring stages on fast links: a nearest-neighbour path
//    through the link matrix (cost = transfer time of the mean edge), tried from every start, cheapest
//    kept. Only devices whose kind most of the compute may use take part (a CPU next to GPUs is left out
//    unless the ops allow it).
// 2. The split minimises the bottleneck stage time (stage work / device speed) by a binary search over the
//    bottleneck T: a greedy pass fills stage after stage while the stage's time stays <= T and its
//    estimated peak memory fits the device. The memory estimate runs the stage's ops in topological order:
//    persistent bytes for the whole step, temp bytes while an op runs, an output from its op until its last
//    consumer (or the end of the stage), a received input from its first use in the stage until its last
//    consumer. When no T makes every stage fit, the capacities are scaled by the smallest factor that lets
//    K stages hold everything (found by bisection), so the overflow is spread as evenly as the order
//    allows, and time is balanced within that (the simulator reports the overflow).
// A colocation group lives in the stage of its first member in the order (its compute and persistent
// bytes are counted there). A unit whose pins or kinds forbid its stage's device goes to the nearest
// allowed device along the chain.
//
// Cost O((V + E) log(total work)); when memory cannot bind (the most any stage's estimate could reach —
// every unit's persistent bytes, every output and received copy, the largest scratch — fits the smallest
// chain device), the passes skip the memory estimate: O(V) each, the same answer.
//
// Example:
//   std::unique_ptr<Partitioner> pipeline = MakePipelinePartitioner();
//   absl::StatusOr<PartitionResult> result = pipeline->Partition(model, context);
//
// Faithful to the published method, and where it is extended:
//
// The pipeline stage memory estimate runs each stage's ops in topological order (activations live until
// their last consumer), which is closer to the simulator than a static sum.
#ifndef PLACEMENT_SERVICE_ENGINE_BASELINES_PIPELINE_H_
#define PLACEMENT_SERVICE_ENGINE_BASELINES_PIPELINE_H_

#include <memory>
#include <vector>

#include "service/engine/model/model.h"
#include "service/engine/partition/partitioner.h"

namespace placement::engine {

struct PipelineOptions {
  // Skip the memory estimate in the passes when memory cannot bind (see above). Off only in tests that
  // check the answer does not change.
  bool skip_memory_when_it_cannot_bind = true;
};

// api.md name "pipeline".
std::unique_ptr<Partitioner> MakePipelinePartitioner(PipelineOptions options = PipelineOptions());

namespace baselines {
// The device chain of step 1 (exposed for tests): every device in `eligible` once, neighbours on fast
// links.
std::vector<DeviceId> PipelineDeviceChain(const Model& model, const std::vector<DeviceId>& eligible);
}  // namespace baselines

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_BASELINES_PIPELINE_H_
