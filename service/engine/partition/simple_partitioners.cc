#include "service/engine/partition/simple_partitioners.h"

#include "service/engine/partition/placement_rules.h"

namespace placement::engine {
namespace {

// A partitioner whose answer is one rule applied to the model: nothing to search, so nothing to stop.
class RulePartitioner final : public Partitioner {
 public:
  RulePartitioner(std::string_view name, std::string_view description, Assignment (*rule)(const Model&))
      : name_(name), description_(description), rule_(rule) {}
  std::string_view name() const override { return name_; }
  std::string_view version() const override { return "1"; }
  std::string_view description() const override { return description_; }
  absl::StatusOr<PartitionResult> Partition(const Model& model,
                                            const SolveContext& context) const override {
    PartitionResult result;
    result.assignment = rule_(model);
    context.Report("done", 1.0);
    return result;
  }

 private:
  const std::string_view name_;
  const std::string_view description_;
  Assignment (*const rule_)(const Model&);
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
  return std::make_unique<RulePartitioner>(
      "single_device", "Every op on the fastest (then largest) device, except where constraints forbid it.",
      &SingleDeviceAssignment);
}
std::unique_ptr<Partitioner> MakeRoundRobinPartitioner() {
  return std::make_unique<RulePartitioner>(
      "round_robin", "The k-th op in topological order on device k mod D (constraints honoured).",
      &RoundRobinAssignment);
}

}  // namespace placement::engine
