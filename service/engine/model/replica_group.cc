#include "service/engine/model/replica_group.h"

#include <cstdlib>
#include <vector>

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

Model DeviceSubset(const Model& model, const std::vector<DeviceId>& devices) {
  Model sub = model;
  const int32_t n = static_cast<int32_t>(devices.size());
  sub.device_name.clear();
  sub.device_kind.clear();
  sub.device_node.clear();
  sub.memory_bytes.clear();
  sub.capacity_bytes.clear();
  sub.speed.clear();
  for (const DeviceId d : devices) {
    sub.device_name.push_back(model.device_name[d]);
    sub.device_kind.push_back(model.device_kind[d]);
    sub.device_node.push_back(model.device_node[d]);
    sub.memory_bytes.push_back(model.memory_bytes[d]);
    sub.capacity_bytes.push_back(model.capacity_bytes[d]);
    sub.speed.push_back(model.speed[d]);
  }
  sub.link.assign(static_cast<size_t>(n) * n, LinkCost());
  for (int32_t a = 0; a < n; ++a) {
    for (int32_t b = 0; b < n; ++b) {
      sub.link[static_cast<size_t>(a) * n + b] = model.Link(devices[a], devices[b]);
    }
  }
  return sub;
}

Model ReplicaGroupModel(const Model& model, int32_t data_parallel) {
  const int32_t n = model.num_devices();
  if (data_parallel < 1 || n % data_parallel != 0) std::abort();  // callers validate D first
  const int32_t g = n / data_parallel;
  std::vector<DeviceId> first(g);
  for (DeviceId d = 0; d < g; ++d) first[d] = d;
  // One copy of the model either way (the ops' arrays are most of it).
  Model group = data_parallel == 1 ? model : DeviceSubset(model, first);
  group.plan.data_parallel = data_parallel;
  group.cluster_devices = n;
  group.ring_link.clear();
  if (data_parallel == 1) return group;
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
