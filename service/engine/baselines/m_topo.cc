#include "service/engine/baselines/m_topo.h"

#include <algorithm>
#include <optional>
#include <cstdint>
#include <vector>

#include "service/engine/baselines/placement_units.h"

namespace placement::engine {
namespace {

using baselines::PlacementUnits;
using baselines::SaturatingAdd;

class MTopoPartitioner final : public Partitioner {
 public:
  std::string_view name() const override { return "m_topo"; }
  std::string_view version() const override { return "1"; }
  std::string_view description() const override {
    return "Baechi m-TOPO: topological order, devices filled one after another up to an even share of "
           "the static memory (persistent + output + temp per op)";
  }

  absl::StatusOr<PartitionResult> Partition(const Model& model,
                                            const SolveContext& context) const override {
    if (std::optional<PartitionResult> none = baselines::NothingToPlace(model)) return *std::move(none);
    PartitionResult result;
    const OpId num_ops = model.num_ops();
    const DeviceId num_devices = model.num_devices();
    result.assignment.assign(num_ops, kNone);

    const PlacementUnits units = baselines::BuildPlacementUnits(model);
    const int32_t num_units = units.num_units();
    // Static memory of a unit: everything its members may ever hold, all at once (Baechi's model).
    std::vector<int64_t> unit_memory(num_units, 0);
    int64_t total_memory = 0;
    int64_t largest_unit = 0;
    for (int32_t u = 0; u < num_units; ++u) {
      int64_t memory = 0;
      for (int32_t i = units.begin(u); i < units.end(u); ++i) {
        const OpId v = units.member[i];
        memory = SaturatingAdd(memory, model.persistent_bytes[v]);
        memory = SaturatingAdd(memory, model.output_bytes[v]);
        memory = SaturatingAdd(memory, model.temp_bytes[v]);
      }
      unit_memory[u] = memory;
      total_memory = SaturatingAdd(total_memory, memory);
      largest_unit = std::max(largest_unit, memory);
    }
    // The uniform variant: an even share (by capacity) plus the largest unit, so that a device is never
    // closed just because one big unit straddles its share.
    double total_capacity = 0.0;
    for (DeviceId d = 0; d < num_devices; ++d) total_capacity += static_cast<double>(model.capacity_bytes[d]);
    std::vector<int64_t> limit(num_devices);
    for (DeviceId d = 0; d < num_devices; ++d) {
      const double share =
          total_capacity > 0.0
              ? static_cast<double>(total_memory) * static_cast<double>(model.capacity_bytes[d]) /
                    total_capacity
              : 0.0;
      const double soft = std::min(share + static_cast<double>(largest_unit), 9.0e18);
      limit[d] = std::min(model.capacity_bytes[d], static_cast<int64_t>(soft));
    }

    std::vector<int64_t> used(num_devices, 0);
    std::vector<DeviceId> unit_device(num_units, kNone);
    DeviceId current = 0;
    baselines::StopChecker stop(context, "m_topo", 4096);
    for (int32_t index = 0; index < num_ops; ++index) {
      if (stop.Step(static_cast<double>(index) / num_ops)) break;
      const OpId v = model.topo_order[index];
      const int32_t u = units.unit_of_op[v];
      if (unit_device[u] != kNone) {
        result.assignment[v] = unit_device[u];
        continue;
      }
      const int64_t need = unit_memory[u];
      DeviceId chosen = kNone;
      bool within_share = false;
      for (DeviceId d = current; d < num_devices; ++d) {
        if (units.Allowed(model, u, d) && used[d] <= limit[d] - need) {
          chosen = d;
          within_share = true;
          break;
        }
      }
      if (chosen == kNone) {
        // Past the shares: any allowed device whose real capacity still holds the unit.
        for (DeviceId d = 0; d < num_devices; ++d) {
          if (units.Allowed(model, u, d) && used[d] <= model.capacity_bytes[d] - need) {
            chosen = d;
            break;
          }
        }
      }
      if (chosen == kNone) {
        // Nothing fits: the allowed device with the most room (the overflow is the simulator's to report).
        int64_t best_room = INT64_MIN;
        for (DeviceId d = 0; d < num_devices; ++d) {
          if (!units.Allowed(model, u, d)) continue;
          const int64_t room = model.capacity_bytes[d] - used[d];
          if (room > best_room) {
            best_room = room;
            chosen = d;
          }
        }
      }
      // Only a free unit closes devices: a pinned op far ahead must not strand the ones in between.
      if (within_share && !units.Constrained(u) && chosen > current) current = chosen;
      unit_device[u] = chosen;
      used[chosen] = SaturatingAdd(used[chosen], need);
      result.assignment[v] = chosen;
    }
    if (stop.stopped()) {
      result.time_limited = true;
      baselines::CompleteAssignment(model, units, result.assignment);
    }
    return result;
  }
};

}  // namespace

std::unique_ptr<Partitioner> MakeMTopoPartitioner() { return std::make_unique<MTopoPartitioner>(); }

}  // namespace placement::engine
