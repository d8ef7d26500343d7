#include "service/engine/stages/chain_problem.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <tuple>

namespace placement::engine::stages {
namespace {

using baselines::PlacementUnits;

bool IsSource(const Model& model, OpId v) { return model.in_begin(v) == model.in_end(v); }

// Primary ops define the order: per-microbatch ops with an input or with work of their own (layers,
// not parameters or updates).
bool IsPrimary(const Model& model, OpId v) {
  return !model.is_once(v) && (!IsSource(model, v) || model.compute_ns[v] > 0);
}

// Per op: the longest path from a source to it (depth) and from it to a sink (height), in edges.
struct OpLevels {
  std::vector<int32_t> depth, height;
};

OpLevels LevelsOf(const Model& model) {
  OpLevels levels;
  levels.depth.assign(model.num_ops(), 0);
  levels.height.assign(model.num_ops(), 0);
  for (const OpId v : model.topo_order) {
    for (EdgeId e = model.out_begin(v); e < model.out_end(v); ++e) {
      levels.depth[model.out_dst[e]] = std::max(levels.depth[model.out_dst[e]], levels.depth[v] + 1);
    }
  }
  for (auto it = model.topo_order.rbegin(); it != model.topo_order.rend(); ++it) {
    for (EdgeId e = model.out_begin(*it); e < model.out_end(*it); ++e) {
      levels.height[*it] = std::max(levels.height[*it], levels.height[model.out_dst[e]] + 1);
    }
  }
  return levels;
}

// Per op: its key in `order` (see the header): levels as late as possible (`late`), or as soon.
std::vector<int64_t> OpKeys(const Model& model, OrderKind order, bool late) {
  const OpId n = model.num_ops();
  const OpLevels levels = LevelsOf(model);
  const std::vector<int32_t>& depth = levels.depth;
  const std::vector<int32_t>& height = levels.height;
  int32_t longest = 0;
  for (OpId v = 0; v < n; ++v) longest = std::max(longest, height[v]);
  std::vector<int64_t> key(n);
  for (OpId v = 0; v < n; ++v) {
    const int64_t level = late ? longest - height[v] : depth[v];
    key[v] = order == OrderKind::kLevels ? level : std::min<int64_t>(level, height[v]);
  }
  // Sources (parameters, weight transposes, inputs; once or not) take their first primary consumer's
  // key: a weight read by a deep layer belongs to that layer, not to the start of the order.
  for (OpId v = 0; v < n; ++v) {
    if (!IsSource(model, v)) continue;
    int64_t first = std::numeric_limits<int64_t>::max();
    for (EdgeId e = model.out_begin(v); e < model.out_end(v); ++e) {
      if (IsPrimary(model, model.out_dst[e])) first = std::min(first, key[model.out_dst[e]]);
    }
    if (first != std::numeric_limits<int64_t>::max()) key[v] = first;
  }
  // Once ops with inputs follow their source inputs (the parameters they update), else their inputs;
  // in topological order, so inputs that are once ops are settled first.
  for (const OpId v : model.topo_order) {
    if (!model.is_once(v) || IsSource(model, v)) continue;
    int64_t from_sources = std::numeric_limits<int64_t>::max();
    int64_t from_inputs = std::numeric_limits<int64_t>::max();
    for (EdgeId e = model.in_begin(v); e < model.in_end(v); ++e) {
      const OpId u = model.in_src[e];
      from_inputs = std::min(from_inputs, key[u]);
      if (IsSource(model, u)) from_sources = std::min(from_sources, key[u]);
    }
    key[v] = from_sources != std::numeric_limits<int64_t>::max() ? from_sources : from_inputs;
  }
  return key;
}

// Per op: what it weighs in a stage: M copies of a per-microbatch op, one of a once op (+1 so that a
// block of free ops still counts).
int64_t StepWeight(const Model& model, OpId v) {
  const int64_t copies = model.is_once(v) ? 1 : std::max(1, model.plan.microbatches);
  return baselines::SaturatingAdd(model.compute_ns[v] > std::numeric_limits<int64_t>::max() / copies
                                      ? std::numeric_limits<int64_t>::max()
                                      : model.compute_ns[v] * copies,
                                  1);
}

}  // namespace

ChainElements BuildChainElements(const Model& model, const PlacementUnits& units, OrderKind order,
                                 int32_t max_elements) {
  ChainElements chain;
  chain.order = order;
  const std::vector<int64_t> op_key = OpKeys(model, order, /*late=*/true);
  const int32_t num_units = units.num_units();
  std::vector<int64_t> unit_key(num_units);
  std::vector<int64_t> unit_weight(num_units, 0);
  std::vector<uint8_t> unit_primary(num_units, 0);
  for (int32_t u = 0; u < num_units; ++u) {
    int64_t primary = std::numeric_limits<int64_t>::max(), any = std::numeric_limits<int64_t>::max();
    for (int32_t i = units.begin(u); i < units.end(u); ++i) {
      const OpId v = units.member[i];
      any = std::min(any, op_key[v]);
      if (IsPrimary(model, v)) primary = std::min(primary, op_key[v]);
      unit_weight[u] = baselines::SaturatingAdd(unit_weight[u], StepWeight(model, v));
    }
    unit_key[u] = primary != std::numeric_limits<int64_t>::max() ? primary : any;
    unit_primary[u] = primary != std::numeric_limits<int64_t>::max();
  }
  chain.unit_order.resize(num_units);
  for (int32_t u = 0; u < num_units; ++u) chain.unit_order[u] = u;
  std::sort(chain.unit_order.begin(), chain.unit_order.end(), [&](int32_t a, int32_t b) {
    // Within a key, units with primary members first: the others ride with them.
    const int ka = unit_primary[a] ? 0 : 1, kb = unit_primary[b] ? 0 : 1;
    return std::tie(unit_key[a], ka, a) < std::tie(unit_key[b], kb, b);
  });

  // Blocks of about equal weight: a block closes when the next piece would take it past twice the mean
  // share (so there are at most about max_elements of them). A piece is a whole key group in the folded
  // order (a layer's forward and backward work belong together), a primary unit and the units without
  // primary members sorted after it in the level order (parameters and updates ride with a layer).
  __int128 total = 0;
  for (int32_t u = 0; u < num_units; ++u) total += unit_weight[u];
  const __int128 limit = std::max<__int128>(1, 2 * total / std::max(1, max_elements));
  const bool whole_groups = order == OrderKind::kFolded;
  chain.element_of_unit.assign(num_units, 0);
  int32_t element = -1;
  __int128 filled = 0;
  for (int32_t first = 0; first < num_units;) {
    int32_t last = first + 1;
    __int128 piece = unit_weight[chain.unit_order[first]];
    while (last < num_units) {
      const int32_t u = chain.unit_order[last];
      const bool same_group = unit_key[u] == unit_key[chain.unit_order[first]];
      if (whole_groups ? !same_group : (unit_primary[u] || !same_group)) break;
      piece += unit_weight[u];
      ++last;
    }
    if (element < 0 || (filled > 0 && filled + piece > limit)) {
      ++element;
      filled = 0;
    }
    for (int32_t i = first; i < last; ++i) chain.element_of_unit[chain.unit_order[i]] = element;
    filled += piece;
    first = last;
  }
  chain.num_elements = element + 1;
  return chain;
}

ChainElements BuildAnchoredElements(const Model& model, const PlacementUnits& units) {
  const OpLevels levels = LevelsOf(model);
  const std::vector<int32_t>& depth = levels.depth;
  const std::vector<int32_t>& height = levels.height;
  auto forward = [&](OpId v) { return IsPrimary(model, v) && depth[v] <= height[v]; };
  const std::vector<int64_t> key = OpKeys(model, OrderKind::kLevels, /*late=*/true);
  const int32_t num_units = units.num_units();
  std::vector<int64_t> unit_key(num_units, std::numeric_limits<int64_t>::max());
  std::vector<int32_t> anchored;
  for (int32_t u = 0; u < num_units; ++u) {
    for (int32_t i = units.begin(u); i < units.end(u); ++i) {
      if (forward(units.member[i])) unit_key[u] = std::min(unit_key[u], key[units.member[i]]);
    }
    if (unit_key[u] != std::numeric_limits<int64_t>::max()) anchored.push_back(u);
  }
  std::sort(anchored.begin(), anchored.end(),
            [&](int32_t a, int32_t b) { return std::tie(unit_key[a], a) < std::tie(unit_key[b], b); });
  ChainElements chain;
  chain.order = OrderKind::kLevels;
  chain.element_of_unit.assign(num_units, -1);
  for (size_t i = 0; i < anchored.size(); ++i) chain.element_of_unit[anchored[i]] = static_cast<int32_t>(i);
  chain.num_elements = static_cast<int32_t>(anchored.size());
  if (chain.num_elements == 0) {
    chain.num_elements = 1;
    std::fill(chain.element_of_unit.begin(), chain.element_of_unit.end(), 0);
  }
  auto element_of = [&](OpId v) { return chain.element_of_unit[units.unit_of_op[v]]; };
  // Riders, in topological order: the latest element of a forward op they read (a saved activation),
  // else the latest element of any settled input.
  for (const OpId v : model.topo_order) {
    const int32_t u = units.unit_of_op[v];
    if (chain.element_of_unit[u] >= 0) continue;
    int32_t from_forward = -1, from_any = -1;
    for (EdgeId e = model.in_begin(v); e < model.in_end(v); ++e) {
      const OpId p = model.in_src[e];
      const int32_t element = element_of(p);
      if (element < 0) continue;
      from_any = std::max(from_any, element);
      if (forward(p)) from_forward = std::max(from_forward, element);
    }
    chain.element_of_unit[u] = from_forward >= 0 ? from_forward : from_any;
  }
  // What is left (parameters, sources): the earliest element of a consumer, else the first.
  for (auto it = model.topo_order.rbegin(); it != model.topo_order.rend(); ++it) {
    const int32_t u = units.unit_of_op[*it];
    if (chain.element_of_unit[u] >= 0) continue;
    int32_t first = std::numeric_limits<int32_t>::max();
    for (EdgeId e = model.out_begin(*it); e < model.out_end(*it); ++e) {
      const int32_t element = element_of(model.out_dst[e]);
      if (element >= 0) first = std::min(first, element);
    }
    chain.element_of_unit[u] = first != std::numeric_limits<int32_t>::max() ? first : 0;
  }
  chain.unit_order.resize(num_units);
  for (int32_t u = 0; u < num_units; ++u) chain.unit_order[u] = u;
  std::stable_sort(chain.unit_order.begin(), chain.unit_order.end(), [&](int32_t a, int32_t b) {
    return chain.element_of_unit[a] < chain.element_of_unit[b];
  });
  return chain;
}

int64_t OrderSpan(const Model& model, OrderKind order) {
  // On levels as soon as possible: as late as possible stretches the edges out of ops with short tails
  // (every op of a wide random DAG), which says nothing about a mirrored backward pass.
  const std::vector<int64_t> key = OpKeys(model, order, /*late=*/false);
  int64_t span = 0;
  for (OpId v = 0; v < model.num_ops(); ++v) {
    for (EdgeId e = model.out_begin(v); e < model.out_end(v); ++e) {
      span = baselines::SaturatingAdd(span, std::abs(key[v] - key[model.out_dst[e]]));
    }
  }
  return span;
}

std::vector<DeviceClass> GroupDevices(const Model& model, const PlacementUnits& units,
                                      const std::vector<DeviceId>& device_chain) {
  std::vector<uint8_t> pinned_to(model.num_devices(), 0);
  for (int32_t u = 0; u < units.num_units(); ++u) {
    if (units.pin[u] != kNone && units.any_device[u] == 0) pinned_to[units.pin[u]] = 1;
  }
  std::vector<DeviceClass> classes;
  for (const DeviceId d : device_chain) {
    DeviceClass* same = nullptr;
    if (!pinned_to[d]) {
      for (DeviceClass& c : classes) {
        const DeviceId r = c.representative;
        if (!pinned_to[r] && model.speed[r] == model.speed[d] &&
            model.capacity_bytes[r] == model.capacity_bytes[d] &&
            model.device_kind[r] == model.device_kind[d]) {
          same = &c;
          break;
        }
      }
    }
    if (same == nullptr) {
      classes.push_back(DeviceClass{{}, d});
      same = &classes.back();
    }
    same->devices.push_back(d);
  }
  return classes;
}

std::vector<DeviceClass> OneClassPerDevice(const std::vector<DeviceId>& device_chain) {
  std::vector<DeviceClass> classes;
  for (const DeviceId d : device_chain) {
    if (static_cast<int32_t>(classes.size()) == kMaxClasses) break;
    classes.push_back(DeviceClass{{d}, d});
  }
  return classes;
}

ChainProblem::ChainProblem(const Model& model, const PlacementUnits& units, const ChainElements& chain,
                           const std::vector<DeviceId>& device_chain)
    : model_(model), units_(units), chain_(chain) {
  const int32_t n = chain.num_elements;
  const OpId num_ops = model.num_ops();
  const int64_t copies = std::max(1, model.plan.microbatches);
  std::vector<int32_t> element_of_op(num_ops);
  for (OpId v = 0; v < num_ops; ++v) element_of_op[v] = chain.element_of_unit[units.unit_of_op[v]];

  // The reference link: the mean latency and the mean time per byte of the chain's neighbour links.
  LinkCost reference{1'000'000'000, 0};
  if (device_chain.size() >= 2) {
    long double seconds_per_byte = 0, latency = 0;
    const size_t pairs = device_chain.size() - 1;
    for (size_t i = 0; i + 1 < device_chain.size(); ++i) {
      const LinkCost& link = model.Link(device_chain[i], device_chain[i + 1]);
      seconds_per_byte += 1.0L / static_cast<long double>(link.bandwidth_bytes_per_second);
      latency += static_cast<long double>(link.latency_ns);
    }
    reference.bandwidth_bytes_per_second = std::max<int64_t>(
        1, static_cast<int64_t>(std::llround(static_cast<long double>(pairs) / seconds_per_byte)));
    reference.latency_ns = static_cast<int64_t>(std::llround(latency / pairs));
  }

  // Raw totals, in 128 bits; everything timed is shifted right when the sums could overflow int64.
  std::vector<__int128> compute(n, 0);
  persistent_.assign(n, 0);
  activations_.assign(n, 0);
  accumulation_.assign(n, 0);
  __int128 total = 0;
  for (OpId v = 0; v < num_ops; ++v) {
    const int32_t e = element_of_op[v];
    const __int128 work = static_cast<__int128>(model.compute_ns[v]) * (model.is_once(v) ? 1 : copies);
    compute[e] += work;
    total += work;
    persistent_[e] = baselines::SaturatingAdd(persistent_[e], model.persistent_bytes[v]);
    if (model.is_once(v) || model.out_begin(v) == model.out_end(v)) continue;
    activations_[e] = baselines::SaturatingAdd(activations_[e], model.output_bytes[v]);
    bool gradient_producer = false;
    for (EdgeId k = model.out_begin(v); k < model.out_end(v) && !gradient_producer; ++k) {
      gradient_producer = model.is_once(model.out_dst[k]);
    }
    if (gradient_producer) accumulation_[e] = baselines::SaturatingAdd(accumulation_[e], model.output_bytes[v]);
  }
  struct RawSender {
    int32_t element;
    __int128 cost;
    int32_t first, last;  // range in `consumers`
  };
  std::vector<RawSender> senders;
  std::vector<int32_t> consumers;
  std::vector<int32_t> scratch;
  for (OpId v = 0; v < num_ops; ++v) {
    const int32_t e = element_of_op[v];
    scratch.clear();
    int64_t bytes = -1;
    for (EdgeId k = model.out_begin(v); k < model.out_end(v); ++k) {
      const int32_t other = element_of_op[model.out_dst[k]];
      if (other == e) continue;
      scratch.push_back(other);
      bytes = std::max(bytes, model.out_bytes[k]);
    }
    if (scratch.empty()) continue;
    std::sort(scratch.begin(), scratch.end());
    scratch.erase(std::unique(scratch.begin(), scratch.end()), scratch.end());
    const __int128 cost =
        static_cast<__int128>(TransferDurationNs(reference, bytes)) * (model.is_once(v) ? 1 : copies);
    senders.push_back({e, cost, static_cast<int32_t>(consumers.size()),
                       static_cast<int32_t>(consumers.size() + scratch.size())});
    consumers.insert(consumers.end(), scratch.begin(), scratch.end());
    // Charged on both sides of every crossing: at most (1 + consumers) times.
    total += cost * static_cast<__int128>(1 + scratch.size());
  }
  int shift = 0;
  while ((total >> shift) > (static_cast<__int128>(1) << 60)) ++shift;

  problem_.Resize(n, 1);
  for (int32_t e = 0; e < n; ++e) problem_.compute[e] = static_cast<int64_t>(compute[e] >> shift);
  for (const RawSender& s : senders) {
    problem_.sender_element.push_back(s.element);
    problem_.sender_cost.push_back(static_cast<int64_t>(s.cost >> shift));
    for (int32_t k = s.first; k < s.last; ++k) problem_.sender_consumer.push_back(consumers[k]);
    problem_.sender_consumer_offset.push_back(static_cast<int32_t>(problem_.sender_consumer.size()));
  }
  problem_.Finish();
}

void ChainProblem::SetPredecessors() {
  const int32_t n = chain_.num_elements;
  std::vector<std::vector<int32_t>> preds(n);
  for (OpId v = 0; v < model_.num_ops(); ++v) {
    const int32_t from = chain_.element_of_unit[units_.unit_of_op[v]];
    for (EdgeId k = model_.out_begin(v); k < model_.out_end(v); ++k) {
      const int32_t to = chain_.element_of_unit[units_.unit_of_op[model_.out_dst[k]]];
      if (from < to) preds[to].push_back(from);
    }
  }
  problem_.pred.clear();
  problem_.pred_offset.assign(static_cast<size_t>(n) + 1, 0);
  for (int32_t e = 0; e < n; ++e) {
    std::sort(preds[e].begin(), preds[e].end());
    preds[e].erase(std::unique(preds[e].begin(), preds[e].end()), preds[e].end());
    problem_.pred.insert(problem_.pred.end(), preds[e].begin(), preds[e].end());
    problem_.pred_offset[e + 1] = static_cast<int32_t>(problem_.pred.size());
  }
}

void ChainProblem::Configure(const CostModel& cost, const std::vector<DeviceClass>& classes) {
  const int32_t n = chain_.num_elements;
  problem_.classes.clear();
  for (const DeviceClass& c : classes) {
    StageClass stage_class;
    stage_class.count = static_cast<int32_t>(c.devices.size());
    stage_class.speed = model_.speed[c.representative];
    stage_class.charges_transfers = cost.charge_transfers;
    stage_class.capacity =
        cost.memory ? static_cast<int64_t>(std::floor(static_cast<long double>(
                          model_.capacity_bytes[c.representative]) * cost.capacity_share))
                    : std::numeric_limits<int64_t>::max();
    problem_.classes.push_back(stage_class);
  }
  // Element memory, each capped so that no sum of them overflows (a capped element fits nowhere
  // anyway unless memory is unlimited).
  const int64_t cap = std::numeric_limits<int64_t>::max() / 2 / std::max(1, n);
  for (int32_t e = 0; e < n; ++e) {
    __int128 bytes = static_cast<__int128>(persistent_[e]) + accumulation_[e] +
                     static_cast<__int128>(activations_[e]) * std::max(0, cost.in_flight);
    problem_.memory[e] = static_cast<int64_t>(std::min<__int128>(bytes, cap));
    problem_.forbidden_classes[e] = 0;
  }
  for (int32_t u = 0; u < units_.num_units() && cost.constraints; ++u) {
    if (!units_.Constrained(u)) continue;
    const int32_t e = chain_.element_of_unit[u];
    for (int32_t c = 0; c < static_cast<int32_t>(classes.size()); ++c) {
      if (!units_.Allowed(model_, u, classes[c].representative)) {
        problem_.forbidden_classes[e] |= uint64_t{1} << c;
      }
    }
  }
}

}  // namespace placement::engine::stages
