#include "service/engine/partition/simple_partitioners.h"

#include "service/engine/partition/placement_rules.h"

namespace placement::engine {
namespace {

class SingleDevicePartitioner final : public Partitioner {
 public:
  std::string_view name() const override { return "single_device"; }
  std::string_view version() const override { return "1"; }
  std::string_view description() const override {
    return "Every op on the fastest (then largest) device, except where constraints forbid it.";
  }
  absl::StatusOr<PartitionResult> Partition(const Model& model,
                                            const SolveContext& context) const override {
    PartitionResult result;
    result.assignment = SingleDeviceAssignment(model);
    context.Report("done", 1.0);
    return result;
  }
};

class RoundRobinPartitioner final : public Partitioner {
 public:
  std::string_view name() const override { return "round_robin"; }
  std::string_view version() const override { return "1"; }
  std::string_view description() const override {
    return "The k-th op in topological order on device k mod D (constraints honoured).";
  }
  absl::StatusOr<PartitionResult> Partition(const Model& model,
                                            const SolveContext& context) const override {
    PartitionResult result;
    result.assignment = RoundRobinAssignment(model);
    context.Report("done", 1.0);
    return result;
  }
};

}  // namespace

DeviceId FastestDevice(const Model& model) {
  DeviceId best = 0;
  for (DeviceId d = 1; d < model.num_devices(); ++d) {
    if (model.speed[d] > model.speed[best] ||
        (model.speed[d] == model.speed[best] && model.capacity_bytes[d] > model.capacity_bytes[best])) {
      best = d;
    }
  }
  return best;
}

Assignment SingleDeviceAssignment(const Model& model) {
  Assignment assignment(model.num_ops(), FastestDevice(model));
  PlacementRules(model).Enforce(assignment);
  return assignment;
}

Assignment RoundRobinAssignment(const Model& model) {
  Assignment assignment(model.num_ops(), 0);
  const int32_t devices = model.num_devices();
  for (size_t k = 0; k < model.topo_order.size(); ++k) {
    assignment[model.topo_order[k]] = static_cast<DeviceId>(k % devices);
  }
  PlacementRules(model).Enforce(assignment);
  return assignment;
}

std::unique_ptr<Partitioner> MakeSingleDevicePartitioner() {
  return std::make_unique<SingleDevicePartitioner>();
}
std::unique_ptr<Partitioner> MakeRoundRobinPartitioner() {
  return std::make_unique<RoundRobinPartitioner>();
}

}  // namespace placement::engine
