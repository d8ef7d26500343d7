#include "service/engine/baselines/placement_units.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace placement::engine::baselines {
namespace {

uint64_t KindsPresent(const Model& model) {
  uint64_t present = 0;
  for (DeviceId d = 0; d < model.num_devices(); ++d) {
    const int32_t kind = model.device_kind[d];
    if (kind >= 0 && kind < 64) present |= uint64_t{1} << kind;
  }
  return present;
}

// True when (pin, mask) leaves at least one device.
bool Satisfiable(const Model& model, DeviceId pin, uint64_t mask, uint64_t kinds_present) {
  if (pin != kNone) return mask == 0 || ((mask >> model.device_kind[pin]) & 1) != 0;
  return mask == 0 || (mask & kinds_present) != 0;
}

}  // namespace

DeviceId PlacementUnits::FirstAllowed(const Model& model, int32_t unit) const {
  if (pin[unit] != kNone && any_device[unit] == 0) return pin[unit];
  for (DeviceId d = 0; d < model.num_devices(); ++d) {
    if (Allowed(model, unit, d)) return d;
  }
  return 0;  // unreachable: BuildPlacementUnits guarantees a device
}

PlacementUnits BuildPlacementUnits(const Model& model) {
  PlacementUnits units;
  const OpId n = model.num_ops();
  units.unit_of_op.assign(n, kNone);
  std::vector<int32_t> unit_of_group(model.num_groups(), kNone);
  int32_t num_units = 0;
  for (OpId v = 0; v < n; ++v) {
    const int32_t group = model.colocation_group[v];
    if (group == kNone) {
      units.unit_of_op[v] = num_units++;
    } else {
      if (unit_of_group[group] == kNone) unit_of_group[group] = num_units++;
      units.unit_of_op[v] = unit_of_group[group];
    }
  }
  units.offset.assign(num_units + 1, 0);
  for (OpId v = 0; v < n; ++v) ++units.offset[units.unit_of_op[v] + 1];
  for (int32_t u = 0; u < num_units; ++u) units.offset[u + 1] += units.offset[u];
  units.member.resize(n);
  {
    std::vector<int32_t> fill(units.offset.begin(), units.offset.end() - 1);
    for (OpId v = 0; v < n; ++v) units.member[fill[units.unit_of_op[v]]++] = v;
  }

  units.pin.assign(num_units, kNone);
  units.kind_mask.assign(num_units, 0);
  units.any_device.assign(num_units, 0);
  units.compute_ns.assign(num_units, 0);
  units.persistent_bytes.assign(num_units, 0);
  const uint64_t kinds_present = KindsPresent(model);
  for (int32_t u = 0; u < num_units; ++u) {
    DeviceId pin = kNone;
    uint64_t mask = 0;
    bool contradictory = false;
    for (int32_t i = units.begin(u); i < units.end(u); ++i) {
      const OpId v = units.member[i];
      units.compute_ns[u] += model.compute_ns[v];
      units.persistent_bytes[u] += model.persistent_bytes[v];
      const DeviceId op_pin = model.pinned_device[v];
      if (op_pin != kNone) {
        if (pin != kNone && pin != op_pin) contradictory = true;
        if (pin == kNone) pin = op_pin;
      }
      const uint64_t op_mask = model.allowed_kind_mask[v];
      if (op_mask != 0) {
        if (mask != 0 && (mask & op_mask) == 0) contradictory = true;
        mask = mask == 0 ? op_mask : (mask & op_mask);
      }
    }
    if (!contradictory && Satisfiable(model, pin, mask, kinds_present)) {
      units.pin[u] = pin;
      units.kind_mask[u] = mask;
      continue;
    }
    // Nothing satisfies every member: honour the first member, so that at least it is placed right.
    const OpId first = units.member[units.begin(u)];
    pin = model.pinned_device[first];
    mask = model.allowed_kind_mask[first];
    if (Satisfiable(model, pin, mask, kinds_present)) {
      units.pin[u] = pin;
      units.kind_mask[u] = mask;
    } else {
      units.any_device[u] = 1;
    }
  }
  return units;
}

void CompleteAssignment(const Model& model, const PlacementUnits& units, Assignment& assignment) {
  const DeviceId num_devices = model.num_devices();
  std::vector<double> load(num_devices, 0.0);
  std::vector<DeviceId> unit_device(units.num_units(), kNone);
  for (OpId v = 0; v < model.num_ops(); ++v) {
    if (assignment[v] == kNone) continue;
    load[assignment[v]] += static_cast<double>(model.compute_ns[v]) / model.speed[assignment[v]];
    unit_device[units.unit_of_op[v]] = assignment[v];
  }
  for (OpId v : model.topo_order) {
    if (assignment[v] != kNone) continue;
    const int32_t u = units.unit_of_op[v];
    DeviceId chosen = unit_device[u];
    if (chosen == kNone) {
      int64_t heaviest = -1;
      for (EdgeId e = model.in_begin(v); e < model.in_end(v); ++e) {
        const DeviceId d = assignment[model.in_src[e]];
        if (d != kNone && model.in_bytes[e] > heaviest && units.Allowed(model, u, d)) {
          heaviest = model.in_bytes[e];
          chosen = d;
        }
      }
    }
    if (chosen == kNone) {
      double best = std::numeric_limits<double>::infinity();
      for (DeviceId d = 0; d < num_devices; ++d) {
        if (units.Allowed(model, u, d) && load[d] < best) {
          best = load[d];
          chosen = d;
        }
      }
    }
    assignment[v] = chosen;
    unit_device[u] = chosen;
    load[chosen] += static_cast<double>(model.compute_ns[v]) / model.speed[chosen];
  }
}

void CandidateDevices(const Model& model, const PlacementUnits& units, OpId v, DeviceId fixed,
                      const std::vector<DeviceId>& device_of, std::vector<DeviceId>& out) {
  out.clear();
  if (fixed != kNone) {
    out.push_back(fixed);
    return;
  }
  const int32_t u = units.unit_of_op[v];
  const DeviceId n = model.num_devices();
  if (n <= kFullScanDevices) {
    for (DeviceId d = 0; d < n; ++d) {
      if (units.Allowed(model, u, d)) out.push_back(d);
    }
    return;
  }
  if (units.pin[u] != kNone && units.any_device[u] == 0) {
    out.push_back(units.pin[u]);
    return;
  }
  auto add = [&](DeviceId d) {
    if (!units.Allowed(model, u, d)) return;
    for (DeviceId seen : out) {
      if (seen == d) return;
    }
    out.push_back(d);
  };
  for (EdgeId e = model.in_begin(v); e < model.in_end(v); ++e) {
    const DeviceId d = device_of[model.in_src[e]];
    if (d != kNone) add(d);
  }
  const DeviceId start = static_cast<DeviceId>((static_cast<int64_t>(v) * kFullScanDevices) % n);
  for (int32_t i = 0; i < kFullScanDevices; ++i) add(static_cast<DeviceId>((start + i) % n));
  if (out.empty()) {
    // Kinds that the window misses: every allowed device (rare, and bounded by D).
    for (DeviceId d = 0; d < n; ++d) {
      if (units.Allowed(model, u, d)) out.push_back(d);
    }
  }
  if (out.empty()) out.push_back(units.FirstAllowed(model, u));
  std::sort(out.begin(), out.end());
}

int64_t MeanOpTimeNs(const Model& model, const PlacementUnits& units, OpId op) {
  const int32_t u = units.unit_of_op[op];
  int64_t sum = 0;
  int32_t count = 0;
  for (DeviceId d = 0; d < model.num_devices(); ++d) {
    if (!units.Allowed(model, u, d)) continue;
    sum += model.OpTimeNs(op, d);
    ++count;
  }
  return count == 0 ? model.compute_ns[op] : sum / count;
}

MeanLinkCost::MeanLinkCost(const Model& model) {
  const DeviceId n = model.num_devices();
  if (n < 2) return;
  single_device_ = false;
  double latency = 0.0;
  double ns_per_byte = 0.0;
  for (DeviceId a = 0; a < n; ++a) {
    for (DeviceId b = 0; b < n; ++b) {
      if (a == b) continue;
      const LinkCost& link = model.Link(a, b);
      latency += static_cast<double>(link.latency_ns);
      ns_per_byte += 1e9 / static_cast<double>(std::max<int64_t>(1, link.bandwidth_bytes_per_second));
    }
  }
  const double pairs = static_cast<double>(n) * (n - 1);
  mean_latency_ns_ = latency / pairs;
  mean_ns_per_byte_ = ns_per_byte / pairs;
}

int64_t MeanLinkCost::TransferNs(int64_t bytes) const {
  if (single_device_) return 0;
  return std::llround(mean_latency_ns_ + mean_ns_per_byte_ * static_cast<double>(bytes));
}

std::optional<PartitionResult> NothingToPlace(const Model& model) {
  if (model.num_ops() > 0 && model.num_devices() > 0) return std::nullopt;
  PartitionResult none;
  none.assignment.assign(model.num_ops(), kNone);
  return none;
}

}  // namespace placement::engine::baselines
