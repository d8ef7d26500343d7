#include "service/engine/model/replica_group.h"

#include <cstdlib>

namespace placement::engine {

LinkCost RingLink(const Model& model, int32_t data_parallel, DeviceId device) {
  const int32_t group_size = model.num_devices() / data_parallel;
  LinkCost slowest;
  bool first = true;
  for (int32_t k = 0; k < data_parallel; ++k) {
    const DeviceId a = device + k * group_size;
    const DeviceId b = device + ((k + 1) % data_parallel) * group_size;
    if (a == b) continue;
    const LinkCost& link = model.Link(a, b);
    if (first || link.bandwidth_bytes_per_second < slowest.bandwidth_bytes_per_second ||
        (link.bandwidth_bytes_per_second == slowest.bandwidth_bytes_per_second &&
         link.latency_ns > slowest.latency_ns)) {
      slowest = link;
      first = false;
    }
  }
  return slowest;
}

Model ReplicaGroupModel(const Model& model, int32_t data_parallel) {
  const int32_t n = model.num_devices();
  if (data_parallel < 1 || n % data_parallel != 0) std::abort();  // callers validate D first
  Model group = model;
  group.plan.data_parallel = data_parallel;
  group.cluster_devices = n;
  if (data_parallel == 1) {
    group.ring_link.clear();
    return group;
  }
  const int32_t g = n / data_parallel;
  group.device_name.resize(g);
  group.device_kind.resize(g);
  group.device_node.resize(g);
  group.memory_bytes.resize(g);
  group.capacity_bytes.resize(g);
  group.speed.resize(g);
  group.link.assign(static_cast<size_t>(g) * g, LinkCost());
  for (DeviceId a = 0; a < g; ++a) {
    for (DeviceId b = 0; b < g; ++b) {
      group.link[static_cast<size_t>(a) * g + b] = model.Link(a, b);
    }
  }
  group.ring_link.resize(g);
  for (DeviceId d = 0; d < g; ++d) group.ring_link[d] = RingLink(model, data_parallel, d);
  return group;
}

std::vector<int32_t> ReplicaCountsToTry(const Model& model) {
  const int32_t n = model.num_devices();
  if (model.plan.data_parallel > 0) return {model.plan.data_parallel};
  std::vector<int32_t> counts;
  for (int32_t replicas = 1; replicas <= n; ++replicas) {
    if (n % replicas != 0) continue;
    const int32_t group_size = n / replicas;
    uint64_t group_kinds = 0;
    for (DeviceId d = 0; d < group_size; ++d) group_kinds |= uint64_t{1} << model.device_kind[d];
    bool fits = true;
    for (OpId v = 0; v < model.num_ops() && fits; ++v) {
      const DeviceId pin = model.pinned_device[v];
      const uint64_t mask = model.allowed_kind_mask[v];
      fits = (pin == kNone || pin < group_size) && (mask == 0 || (mask & group_kinds) != 0);
    }
    if (fits) counts.push_back(replicas);
  }
  return counts;
}

}  // namespace placement::engine
