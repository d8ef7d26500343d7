#include "service/engine/repair/memory_repair.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "service/engine/partition/placement_rules.h"
#include "service/engine/repair/range_max_tree.h"
#include "service/engine/sim/placement_score.h"
#include "service/engine/sim/simulator.h"

namespace placement::engine {
namespace {

using Kind = MemoryInterval::Kind;
constexpr int64_t kInf = std::numeric_limits<int64_t>::max() / 4;

// One tentative change of a device's memory timeline.
struct Charge {
  DeviceId device;
  int64_t from_ns;
  int64_t until_ns;
  int64_t bytes;  // signed
};

struct Candidate {
  int32_t unit;
  int64_t freed_bytes;  // at the examined peak
  double cost_key;      // estimated cost per useful byte (smaller is better)
};

struct HeapEntry {
  double key;
  int64_t freed_bytes;
  int32_t unit;
  int32_t index;    // into the candidate list
  int32_t version;  // stale when the candidate was re-keyed since
};

// Max-heap comparator that puts the smallest key (then most bytes, then smallest unit) on top.
bool HeapLater(const HeapEntry& a, const HeapEntry& b) {
  if (a.key != b.key) return a.key > b.key;
  if (a.freed_bytes != b.freed_bytes) return a.freed_bytes < b.freed_bytes;
  return a.unit > b.unit;
}

class Repairer {
 public:
  Repairer(const Model& model, const SolveContext& context, const RepairOptions& options)
      : model_(model),
        context_(context),
        options_(options),
        rules_(model),
        sim_(model),
        num_units_(model.num_groups() + model.num_ops()) {}

  RepairOutcome Run(Assignment& assignment);

 private:
  int32_t UnitOf(OpId v) const {
    const int32_t g = model_.colocation_group[v];
    return g != kNone ? g : model_.num_groups() + v;
  }
  // Finish of op v's copy m in the last simulation (m = 0 for a once op).
  int64_t FinishOf(OpId v, int32_t m) const {
    return result_->finish_ns[static_cast<size_t>(model_.is_once(v) ? 0 : m) * model_.num_ops() + v];
  }
  // True when consumer c still needs, after t, a tensor of microbatch m (m < 0: of a once producer, so
  // any copy of c may hold it).
  bool HoldsAfter(OpId c, int32_t m, int64_t t) const {
    if (m >= 0 || model_.is_once(c)) return FinishOf(c, std::max(0, m)) > t;
    for (int32_t k = 0; k < model_.plan.microbatches; ++k) {
      if (FinishOf(c, k) > t) return true;
    }
    return false;
  }
  template <typename F>
  void ForEachMember(int32_t unit, F&& f) const {
    if (unit < model_.num_groups()) {
      for (int32_t i = model_.group_offset[unit]; i < model_.group_offset[unit + 1]; ++i) {
        f(model_.group_member[i]);
      }
    } else {
      f(unit - model_.num_groups());
    }
  }
  OpId FirstMember(int32_t unit) const {
    return unit < model_.num_groups() ? model_.group_member[model_.group_offset[unit]]
                                      : unit - model_.num_groups();
  }

  // Per-round indexing of the simulated schedule and its memory intervals.
  void IndexRound(const SimResult& result, const Assignment& assignment);
  // Slot whose time piece contains t (conservative start of a charge).
  int32_t SlotContaining(DeviceId d, int64_t t) const {
    const std::vector<int64_t>& times = slot_time_[d];
    const auto it = std::upper_bound(times.begin(), times.end(), t);
    return it == times.begin() ? 0 : static_cast<int32_t>(it - times.begin()) - 1;
  }
  // First slot at or after t (exclusive end of a charge).
  int32_t SlotFrom(DeviceId d, int64_t t) const {
    const std::vector<int64_t>& times = slot_time_[d];
    return static_cast<int32_t>(std::lower_bound(times.begin(), times.end(), t) - times.begin());
  }
  void Apply(const Charge& c, int sign) {
    if (c.until_ns <= c.from_ns || c.bytes == 0) return;
    trees_[c.device].Add(SlotContaining(c.device, c.from_ns), SlotFrom(c.device, c.until_ns),
                         sign * c.bytes);
  }
  // Time device d is busy within [a, b) in the simulated schedule.
  int64_t BusyWithin(DeviceId d, int64_t a, int64_t b) const;
  // Slack of v in the simulated schedule, minus the delay earlier moves of this round already put on
  // it (so a batch does not spend the same slack twice).
  int64_t Slack(OpId v) const {
    return std::max<int64_t>(
        0, makespan_ - (result_->start_ns[v] + result_->bottom_level_ns[v]) - slack_used_[v]);
  }

  // Tries to bring device d under its capacity; returns the number of ops moved.
  int32_t FixDevice(DeviceId d, Assignment& assignment);
  // Units holding bytes on d at time t with the bytes each would free there.
  void CollectCandidates(DeviceId d, int64_t t, const Assignment& assignment);
  // Estimated makespan increase (ns) and created transfer time of moving `unit` from `from` to `to`.
  // With `delays`, also lists the estimated delay of each op it touches.
  void EstimateMove(int32_t unit, DeviceId from, DeviceId to, const Assignment& assignment,
                    int64_t* impact_ns, int64_t* transfer_ns,
                    std::vector<std::pair<OpId, int64_t>>* delays = nullptr) const;
  // The memory charges of moving `unit` from `from` to `to` (removals negative).
  void BuildCharges(int32_t unit, DeviceId from, DeviceId to, const Assignment& assignment,
                    std::vector<Charge>* charges);
  // What the charges in charges_ can do to the peaks, without touching the trees.
  struct ChargeBounds {
    bool to_only_adds = true;  // no charge lowers `to`'s timeline
    int64_t removed_from = 0;  // bytes the charges take off `from` at most, at any one time
  };
  ChargeBounds BoundCharges(DeviceId from, DeviceId to) const {
    ChargeBounds bounds;
    for (const Charge& ch : charges_) {
      if (ch.until_ns <= ch.from_ns || ch.bytes == 0) continue;  // Apply skips these
      if (ch.device == to && ch.bytes < 0) bounds.to_only_adds = false;
      if (ch.device == from && ch.bytes < 0) bounds.removed_from -= ch.bytes;
    }
    return bounds;
  }
  // EstimateMove's cost of moving `unit` from `from` to `to`, from the cache when still valid.
  double MoveCost(int32_t unit, DeviceId from, DeviceId to, const Assignment& assignment);
  // Drops the cached costs a move of `unit` can change: those of the units next to its members (their
  // producers' and consumers' devices changed) and of the units that read the slack of an op the move
  // delayed (the op's own unit and its producers').
  void InvalidateAround(int32_t unit, const std::vector<std::pair<OpId, int64_t>>& delays);
  // What moving `unit` anywhere can take off its device at most, this round: its own buffers, its
  // producers' outputs and their received copies (independent of where the neighbours are).
  struct UnitBound {
    bool only_adds = true;   // every own buffer has non-negative bytes (charges on a target only add)
    int64_t removable = 0;   // bytes
  };
  const UnitBound& BoundUnit(int32_t unit);
  bool UnitMovable(int32_t unit) const { return rules_.FixedDevice(FirstMember(unit)) == kNone; }

  void ReportProgress(double fraction, int64_t best) const {
    context_.Report(options_.progress_stage,
                    options_.progress_from + (options_.progress_to - options_.progress_from) *
                                                 std::clamp(fraction, 0.0, 1.0),
                    best);
  }

  const Model& model_;
  const SolveContext& context_;
  const RepairOptions& options_;
  PlacementRules rules_;
  Simulator sim_;
  const int32_t num_units_;

  // ---- Per round ----
  const SimResult* result_ = nullptr;
  int64_t makespan_ = 0;
  std::vector<int64_t> interval_offset_;   // by device, CSR into interval_index_
  std::vector<int32_t> interval_index_;
  std::vector<int64_t> own_offset_;        // by op: its own (persistent/temp/output) intervals
  std::vector<int32_t> own_index_;
  std::vector<int64_t> received_offset_;   // by producer: its received copies
  std::vector<int32_t> received_index_;
  std::vector<int64_t> output_until_;      // by op: end of its output buffer (finish if none)
  std::vector<std::vector<int64_t>> slot_time_;  // by device: sorted distinct interval starts
  std::vector<RangeAddMaxTree> trees_;
  std::vector<int64_t> busy_offset_;       // by device, CSR into busy_op_
  std::vector<OpId> busy_op_;              // ops of each device by start time
  std::vector<int64_t> busy_prefix_;       // prefix sums of their durations (same indexing, +1)

  // ---- Scratch ----
  std::vector<int32_t> unit_stamp_;
  std::vector<int32_t> unit_candidate_;
  // Per candidate index: the move that last re-keyed it, so a move re-keys each neighbour once even
  // when a big colocation group touches it through thousands of edges.
  std::vector<int64_t> candidate_rekeyed_at_;
  int64_t moves_in_scan_ = 0;
  std::vector<int32_t> unit_moved_round_;
  std::vector<DeviceId> unit_left_device_;
  std::vector<int32_t> op_stamp_;
  int32_t stamp_ = 0;
  int32_t round_ = 0;
  // Work done, for RepairOutcome.
  int64_t move_estimates_ = 0;
  int64_t room_checks_ = 0;
  std::vector<Candidate> candidates_;
  std::vector<HeapEntry> heap_;
  std::vector<int32_t> candidate_version_;
  std::vector<int64_t> slack_used_;
  // Estimated move costs (EstimateMove's impact + weighted transfer) per unit and target, valid while
  // nothing EstimateMove reads for that unit has changed: a scan re-keys up to thousands of candidates
  // and usually moves one, so most estimates are the same as in the previous scan. Slots are handed out
  // on first use within a round (cost_slot_ indexes cost_pool_ in steps of num_devices); a move drops
  // the entries it can change (InvalidateAround). Exact: a valid entry equals a fresh estimate.
  std::vector<int32_t> cost_epoch_;   // by unit: the epoch its entries were computed in
  std::vector<int64_t> cost_slot_;    // by unit: offset into cost_pool_ (valid with cost_epoch_)
  std::vector<DeviceId> cost_from_;   // by unit: the device the entries move it from
  std::vector<double> cost_pool_;     // NaN: not computed yet
  std::vector<UnitBound> unit_bound_;        // by unit, valid when unit_bound_epoch_ is this round's
  std::vector<int32_t> unit_bound_epoch_;
  int32_t cost_round_epoch_ = 0;      // bumped by IndexRound (new schedule, slack, busy lists)
  std::vector<std::pair<OpId, int64_t>> delays_;
  std::vector<Charge> charges_;
  std::vector<int64_t> values_;
  int32_t moves_ = 0;
  bool stuck_ = false;
};

void Repairer::IndexRound(const SimResult& result, const Assignment& assignment) {
  result_ = &result;
  makespan_ = result.makespan_ns;
  slack_used_.assign(model_.num_ops(), 0);
  ++cost_round_epoch_;
  cost_pool_.clear();
  const int32_t n = model_.num_ops();
  const int32_t devices = model_.num_devices();
  const std::vector<MemoryInterval>& intervals = result.memory_intervals;
  const int32_t count = static_cast<int32_t>(intervals.size());

  // Counting sorts: intervals by device, own intervals by op, received copies by producer.
  interval_offset_.assign(devices + 1, 0);
  own_offset_.assign(n + 1, 0);
  received_offset_.assign(n + 1, 0);
  for (const MemoryInterval& iv : intervals) {
    ++interval_offset_[iv.device + 1];
    if (iv.kind == Kind::kReceived) {
      ++received_offset_[iv.op + 1];
    } else {
      ++own_offset_[iv.op + 1];
    }
  }
  for (int32_t d = 0; d < devices; ++d) interval_offset_[d + 1] += interval_offset_[d];
  for (int32_t v = 0; v < n; ++v) {
    own_offset_[v + 1] += own_offset_[v];
    received_offset_[v + 1] += received_offset_[v];
  }
  interval_index_.resize(count);
  own_index_.resize(own_offset_[n]);
  received_index_.resize(received_offset_[n]);
  {
    std::vector<int64_t> fill_device(interval_offset_.begin(), interval_offset_.end() - 1);
    std::vector<int64_t> fill_own(own_offset_.begin(), own_offset_.end() - 1);
    std::vector<int64_t> fill_received(received_offset_.begin(), received_offset_.end() - 1);
    for (int32_t i = 0; i < count; ++i) {
      const MemoryInterval& iv = intervals[i];
      interval_index_[fill_device[iv.device]++] = i;
      if (iv.kind == Kind::kReceived) {
        received_index_[fill_received[iv.op]++] = i;
      } else {
        own_index_[fill_own[iv.op]++] = i;
      }
    }
  }
  output_until_.assign(result.finish_ns.begin(), result.finish_ns.end());
  for (const MemoryInterval& iv : intervals) {
    if (iv.kind == Kind::kOutput) output_until_[iv.op] = std::max(output_until_[iv.op], iv.until_ns);
  }

  // Timelines: slots at the distinct interval starts (the peak of a piecewise-constant function whose
  // rises all happen at interval starts is attained at one of them), plus time 0.
  slot_time_.resize(devices);
  trees_.resize(devices);
  for (DeviceId d = 0; d < devices; ++d) {
    std::vector<int64_t>& times = slot_time_[d];
    times.clear();
    times.push_back(0);
    for (int64_t k = interval_offset_[d]; k < interval_offset_[d + 1]; ++k) {
      times.push_back(intervals[interval_index_[k]].from_ns);
    }
    std::sort(times.begin(), times.end());
    times.erase(std::unique(times.begin(), times.end()), times.end());
    values_.assign(times.size() + 1, 0);
    for (int64_t k = interval_offset_[d]; k < interval_offset_[d + 1]; ++k) {
      const MemoryInterval& iv = intervals[interval_index_[k]];
      if (iv.until_ns <= iv.from_ns) continue;
      values_[SlotContaining(d, iv.from_ns)] += iv.bytes;
      values_[SlotFrom(d, iv.until_ns)] -= iv.bytes;
    }
    for (size_t s = 1; s < values_.size(); ++s) values_[s] += values_[s - 1];
    values_.pop_back();
    trees_[d].Build(values_);
  }

  // Busy lists for the queueing estimate.
  busy_offset_.assign(devices + 1, 0);
  for (OpId v = 0; v < n; ++v) ++busy_offset_[assignment[v] + 1];
  for (int32_t d = 0; d < devices; ++d) busy_offset_[d + 1] += busy_offset_[d];
  busy_op_.resize(n);
  {
    std::vector<int64_t> fill(busy_offset_.begin(), busy_offset_.end() - 1);
    for (OpId v = 0; v < n; ++v) busy_op_[fill[assignment[v]]++] = v;
  }
  busy_prefix_.assign(n + devices, 0);
  for (DeviceId d = 0; d < devices; ++d) {
    auto begin = busy_op_.begin() + busy_offset_[d];
    auto end = busy_op_.begin() + busy_offset_[d + 1];
    std::sort(begin, end, [&](OpId a, OpId b) {
      return result.start_ns[a] != result.start_ns[b] ? result.start_ns[a] < result.start_ns[b]
                                                      : a < b;
    });
    // busy_prefix_ for device d lives at [busy_offset_[d] + d, busy_offset_[d + 1] + d].
    const int64_t base = busy_offset_[d] + d;
    busy_prefix_[base] = 0;
    for (int64_t k = busy_offset_[d]; k < busy_offset_[d + 1]; ++k) {
      const OpId v = busy_op_[k];
      busy_prefix_[base + (k - busy_offset_[d]) + 1] =
          busy_prefix_[base + (k - busy_offset_[d])] + (result.finish_ns[v] - result.start_ns[v]);
    }
  }
}

int64_t Repairer::BusyWithin(DeviceId d, int64_t a, int64_t b) const {
  if (b <= a) return 0;
  const int64_t lo = busy_offset_[d], hi = busy_offset_[d + 1];
  if (lo == hi) return 0;
  const SimResult& r = *result_;
  // Ops on one device never overlap, so both start and finish are sorted along busy_op_.
  int64_t first = std::partition_point(busy_op_.begin() + lo, busy_op_.begin() + hi,
                                       [&](OpId v) { return r.finish_ns[v] <= a; }) -
                  busy_op_.begin();
  int64_t last = std::partition_point(busy_op_.begin() + first, busy_op_.begin() + hi,
                                      [&](OpId v) { return r.start_ns[v] < b; }) -
                 busy_op_.begin();
  if (first >= last) return 0;
  const int64_t base = lo + d;
  int64_t busy = busy_prefix_[base + (last - lo)] - busy_prefix_[base + (first - lo)];
  const OpId head = busy_op_[first];
  const OpId tail = busy_op_[last - 1];
  busy -= std::max<int64_t>(0, a - r.start_ns[head]);
  busy -= std::max<int64_t>(0, r.finish_ns[tail] - b);
  return std::max<int64_t>(0, busy);
}

void Repairer::EstimateMove(int32_t unit, DeviceId from, DeviceId to, const Assignment& assignment,
                            int64_t* impact_ns, int64_t* transfer_ns,
                            std::vector<std::pair<OpId, int64_t>>* delays) const {
  const SimResult& r = *result_;
  int64_t impact = 0, transfer = 0;
  ForEachMember(unit, [&](OpId u) {
    // Inputs: an input that was local (or on another link) now arrives over the link to `to`.
    int64_t ready = r.start_ns[u];
    for (EdgeId e = model_.in_begin(u); e < model_.in_end(u); ++e) {
      const OpId p = model_.in_src[e];
      if (UnitOf(p) == unit) continue;
      const DeviceId dp = assignment[p];
      const int64_t xfer = model_.TransferNs(dp, to, model_.in_bytes[e]);
      if (dp != from) transfer -= model_.TransferNs(dp, from, model_.in_bytes[e]);
      transfer += xfer;
      ready = std::max(ready, r.finish_ns[p] + xfer);
    }
    const int64_t new_time = model_.OpTimeNs(u, to);
    const int64_t queue = BusyWithin(to, ready, ready + new_time);
    const int64_t finish_delay =
        std::max<int64_t>(0, ready + queue + new_time - r.finish_ns[u]);
    impact = std::max(impact, finish_delay - Slack(u));
    if (delays != nullptr && finish_delay > 0) delays->emplace_back(u, finish_delay);
    // Outputs: consumers left behind (or elsewhere) now receive over the link from `to`.
    for (EdgeId e = model_.out_begin(u); e < model_.out_end(u); ++e) {
      const OpId c = model_.out_dst[e];
      if (UnitOf(c) == unit) continue;
      const DeviceId dc = assignment[c];
      const int64_t xfer = model_.TransferNs(to, dc, model_.out_bytes[e]);
      if (dc != from) transfer -= model_.TransferNs(from, dc, model_.out_bytes[e]);
      transfer += xfer;
      const int64_t arrival = r.finish_ns[u] + finish_delay + xfer;
      impact = std::max(impact, arrival - r.start_ns[c] - Slack(c));
      if (delays != nullptr && arrival > r.start_ns[c]) delays->emplace_back(c, arrival - r.start_ns[c]);
    }
  });
  *impact_ns = std::max<int64_t>(0, impact);
  *transfer_ns = std::max<int64_t>(0, transfer);
}

double Repairer::MoveCost(int32_t unit, DeviceId from, DeviceId to, const Assignment& assignment) {
  const int32_t devices = model_.num_devices();
  if (cost_epoch_[unit] != cost_round_epoch_ || cost_from_[unit] != from) {
    cost_epoch_[unit] = cost_round_epoch_;
    cost_from_[unit] = from;
    cost_slot_[unit] = static_cast<int64_t>(cost_pool_.size());
    cost_pool_.resize(cost_pool_.size() + devices, std::numeric_limits<double>::quiet_NaN());
  }
  double& cost = cost_pool_[cost_slot_[unit] + to];
  if (std::isnan(cost) || !options_.reuse_move_estimates) {  // NaN: not computed since the last change
    int64_t impact, transfer;
    EstimateMove(unit, from, to, assignment, &impact, &transfer);
    ++move_estimates_;
    cost = static_cast<double>(impact) + options_.transfer_weight * static_cast<double>(transfer);
  }
  return cost;
}

const Repairer::UnitBound& Repairer::BoundUnit(int32_t unit) {
  UnitBound& bound = unit_bound_[unit];
  if (unit_bound_epoch_[unit] == cost_round_epoch_) return bound;
  unit_bound_epoch_[unit] = cost_round_epoch_;
  bound = UnitBound();
  const std::vector<MemoryInterval>& intervals = result_->memory_intervals;
  ForEachMember(unit, [&](OpId u) {
    for (int64_t k = own_offset_[u]; k < own_offset_[u + 1]; ++k) {
      const int64_t bytes = intervals[own_index_[k]].bytes;
      if (bytes < 0) bound.only_adds = false;
      bound.removable += std::max<int64_t>(0, bytes);
    }
    // A producer shared by several members is counted once per edge: an over-estimate, still a bound.
    for (EdgeId e = model_.in_begin(u); e < model_.in_end(u); ++e) {
      const OpId p = model_.in_src[e];
      if (UnitOf(p) == unit) continue;
      bound.removable += std::max<int64_t>(0, model_.output_bytes[p]);
      for (int64_t k = received_offset_[p]; k < received_offset_[p + 1]; ++k) {
        bound.removable += std::max<int64_t>(0, intervals[received_index_[k]].bytes);
      }
    }
  });
  return bound;
}

void Repairer::InvalidateAround(int32_t unit,
                                const std::vector<std::pair<OpId, int64_t>>& delays) {
  auto drop = [&](OpId v) { cost_epoch_[UnitOf(v)] = -1; };
  ForEachMember(unit, [&](OpId u) {
    drop(u);
    for (EdgeId e = model_.out_begin(u); e < model_.out_end(u); ++e) drop(model_.out_dst[e]);
    for (EdgeId e = model_.in_begin(u); e < model_.in_end(u); ++e) drop(model_.in_src[e]);
  });
  for (const auto& [op, delay] : delays) {
    drop(op);
    for (EdgeId e = model_.in_begin(op); e < model_.in_end(op); ++e) drop(model_.in_src[e]);
  }
}

void Repairer::BuildCharges(int32_t unit, DeviceId from, DeviceId to, const Assignment& assignment,
                            std::vector<Charge>* charges) {
  charges->clear();
  const SimResult& r = *result_;
  const std::vector<MemoryInterval>& intervals = r.memory_intervals;
  ++stamp_;  // marks producers already charged on `to`
  ForEachMember(unit, [&](OpId u) {
    // Its own buffers leave `from` and appear on `to` over the same times.
    for (int64_t k = own_offset_[u]; k < own_offset_[u + 1]; ++k) {
      const MemoryInterval& iv = intervals[own_index_[k]];
      charges->push_back({from, iv.from_ns, iv.until_ns, -iv.bytes});
      charges->push_back({to, iv.from_ns, iv.until_ns, iv.bytes});
    }
    // Consumers left on `from` now need a received copy there.
    int64_t left_bytes = 0;
    int64_t left_until = 0;
    for (EdgeId e = model_.out_begin(u); e < model_.out_end(u); ++e) {
      const OpId c = model_.out_dst[e];
      if (assignment[c] != from || UnitOf(c) == unit) continue;
      left_bytes = std::max(left_bytes, model_.out_bytes[e]);
      left_until = std::max(left_until, r.finish_ns[c]);
    }
    if (left_bytes > 0) {
      charges->push_back({from, r.finish_ns[u] + model_.TransferNs(to, from, left_bytes),
                          left_until, left_bytes});
    }
    // Inputs: the producer's buffer on `from` (its output, or the copy received there) is now held
    // only by the consumers that stay, so it ends earlier or goes away; `to` needs a copy unless it
    // already holds the producer's output.
    for (EdgeId e = model_.in_begin(u); e < model_.in_end(u); ++e) {
      const OpId p = model_.in_src[e];
      if (UnitOf(p) == unit || op_stamp_[p] == stamp_) continue;
      op_stamp_[p] = stamp_;
      const DeviceId dp = assignment[p];
      bool other_on_to = false;
      int64_t bytes_to = 0, until_to = 0;
      int64_t other_last_on_from = 0;            // last finish of consumers staying on `from`
      int64_t transfers_end = r.finish_ns[p];    // last arrival of p's transfers after the move
      for (EdgeId f = model_.out_begin(p); f < model_.out_end(p); ++f) {
        const OpId c = model_.out_dst[f];
        if (UnitOf(c) == unit) {
          bytes_to = std::max(bytes_to, model_.out_bytes[f]);
          until_to = std::max(until_to, r.finish_ns[c]);
          continue;
        }
        const DeviceId dc = assignment[c];
        if (dc == from) other_last_on_from = std::max(other_last_on_from, r.finish_ns[c]);
        if (dc == to) other_on_to = true;
        if (dc != dp) {
          transfers_end = std::max(
              transfers_end, r.finish_ns[p] + model_.TransferNs(dp, dc, model_.out_bytes[f]));
        }
      }
      if (dp == from) {
        // p's own output on `from`: held by the staying consumers and until its transfers arrive.
        if (dp != to) {
          transfers_end =
              std::max(transfers_end, r.finish_ns[p] + model_.TransferNs(dp, to, bytes_to));
        }
        const int64_t new_until = std::max(other_last_on_from, transfers_end);
        if (new_until < output_until_[p]) {
          charges->push_back({from, new_until, output_until_[p], -model_.output_bytes[p]});
        }
      } else {
        for (int64_t k = received_offset_[p]; k < received_offset_[p + 1]; ++k) {
          const MemoryInterval& iv = intervals[received_index_[k]];
          if (iv.device != from) continue;
          const int64_t new_until = std::max(iv.from_ns, other_last_on_from);
          if (new_until < iv.until_ns) {
            charges->push_back({from, new_until, iv.until_ns, -iv.bytes});
          }
        }
      }
      if (dp != to && !other_on_to && bytes_to > 0) {
        charges->push_back(
            {to, r.finish_ns[p] + model_.TransferNs(dp, to, bytes_to), until_to, bytes_to});
      }
    }
  });
}

void Repairer::CollectCandidates(DeviceId d, int64_t t, const Assignment& assignment) {
  candidates_.clear();
  ++stamp_;
  const int32_t unit_stamp = stamp_;
  const std::vector<MemoryInterval>& intervals = result_->memory_intervals;
  auto credit = [&](int32_t unit, int64_t bytes) {
    if (unit_moved_round_[unit] == round_ || !UnitMovable(unit)) return;
    if (unit_stamp_[unit] != unit_stamp) {
      unit_stamp_[unit] = unit_stamp;
      unit_candidate_[unit] = static_cast<int32_t>(candidates_.size());
      candidates_.push_back({unit, 0, 0.0});
    }
    candidates_[unit_candidate_[unit]].freed_bytes += bytes;
  };
  for (int64_t k = interval_offset_[d]; k < interval_offset_[d + 1]; ++k) {
    const MemoryInterval& iv = intervals[interval_index_[k]];
    if (!(iv.from_ns <= t && t < iv.until_ns) || iv.bytes <= 0) continue;
    // Intervals of ops already moved away this round no longer count here.
    if (iv.kind != Kind::kReceived && assignment[iv.op] != d) continue;
    switch (iv.kind) {
      case Kind::kPersistent:
      case Kind::kTemp:
      case Kind::kAccumulation:  // a gradient producer's accumulation buffer goes with it
        credit(UnitOf(iv.op), iv.bytes);
        break;
      case Kind::kOutput:
      case Kind::kReceived: {
        // A tensor is freed at t when every consumer on d that still needs it after t (its holders)
        // leaves; for an output before its producer finished, the producer itself is the holder.
        // Credit the unit when the holders form one unit.
        const bool own_output = iv.kind == Kind::kOutput;
        int32_t only = kNone;
        bool single = true;
        // With a training plan the interval is one copy's (its consumers' copies of the same
        // microbatch hold it), or, for a once producer, every copy of its consumers may hold it.
        if (own_output && t < FinishOf(iv.op, std::max(0, iv.microbatch))) {
          only = UnitOf(iv.op);
        } else {
          for (EdgeId e = model_.out_begin(iv.op); e < model_.out_end(iv.op) && single; ++e) {
            const OpId c = model_.out_dst[e];
            if (assignment[c] != d || !HoldsAfter(c, iv.microbatch, t)) continue;
            const int32_t unit = UnitOf(c);
            if (only == kNone) {
              only = unit;
            } else if (only != unit) {
              single = false;
            }
          }
          // An output held only by its own unit's consumers (or by transfers) goes with the producer.
          if (own_output && single && (only == kNone || only == UnitOf(iv.op))) {
            only = UnitOf(iv.op);
          }
        }
        if (single && only != kNone) credit(only, iv.bytes);
        break;
      }
    }
  }
}

int32_t Repairer::FixDevice(DeviceId d, Assignment& assignment) {
  const int64_t capacity = model_.capacity_bytes[d];
  const int32_t devices = model_.num_devices();
  int32_t moved = 0;
  for (int32_t scan = 0; scan < options_.max_peak_scans_per_device; ++scan) {
    if (trees_[d].Max() <= capacity || context_.ShouldStop()) break;
    const int32_t slot = trees_[d].ArgMax();
    const int64_t t = slot_time_[d][slot];
    CollectCandidates(d, t, assignment);
    if (candidates_.empty()) break;
    // On huge graphs thousands of units hold bytes at a peak; the ones holding the most are where a
    // few moves can help, so only they are costed.
    if (static_cast<int64_t>(candidates_.size()) > options_.max_candidates_per_scan) {
      std::nth_element(candidates_.begin(), candidates_.begin() + options_.max_candidates_per_scan,
                       candidates_.end(), [](const Candidate& a, const Candidate& b) {
                         return a.freed_bytes != b.freed_bytes ? a.freed_bytes > b.freed_bytes
                                                               : a.unit < b.unit;
                       });
      for (size_t i = options_.max_candidates_per_scan; i < candidates_.size(); ++i) {
        unit_stamp_[candidates_[i].unit] = 0;  // no longer a candidate of this scan
      }
      candidates_.resize(options_.max_candidates_per_scan);
      for (size_t i = 0; i < candidates_.size(); ++i) {
        unit_candidate_[candidates_[i].unit] = static_cast<int32_t>(i);
      }
    }
    const int64_t need = trees_[d].At(slot) - capacity;
    // Order by (estimated increase + weighted transfer time) per useful byte, best target ignoring
    // room. A heap with versions: after each move the keys of the moved unit's neighbours are
    // recomputed (a neighbour that follows it creates fewer transfers), so the batch grows contiguous
    // regions instead of scattering single units.
    auto key_of = [&](const Candidate& c, int64_t still_needed) {
      double best = std::numeric_limits<double>::infinity();
      for (DeviceId to = 0; to < devices; ++to) {
        if (to == d || !rules_.Allowed(FirstMember(c.unit), to)) continue;
        best = std::min(best, MoveCost(c.unit, d, to, assignment));
      }
      const double useful =
          static_cast<double>(std::max<int64_t>(1, std::min(c.freed_bytes, still_needed)));
      return (best + 1.0) / useful;
    };
    heap_.clear();
    candidate_version_.assign(candidates_.size(), 0);
    for (size_t i = 0; i < candidates_.size(); ++i) {
      candidates_[i].cost_key = key_of(candidates_[i], need);
      heap_.push_back({candidates_[i].cost_key, candidates_[i].freed_bytes, candidates_[i].unit,
                       static_cast<int32_t>(i), 0});
    }
    std::make_heap(heap_.begin(), heap_.end(), HeapLater);
    bool moved_here = false;
    bool forced = false;
    const int32_t scan_stamp = stamp_;  // CollectCandidates' stamp marks this scan's candidates
    candidate_rekeyed_at_.assign(candidates_.size(), -1);
    moves_in_scan_ = 0;
    while (!heap_.empty()) {
      // A scan of a huge peak can cost many moves: the deadline is checked inside it too.
      if (context_.ShouldStop()) break;
      std::pop_heap(heap_.begin(), heap_.end(), HeapLater);
      const HeapEntry top = heap_.back();
      heap_.pop_back();
      if (top.version != candidate_version_[top.index]) continue;  // re-keyed since
      const Candidate& c = candidates_[top.index];
      if (unit_moved_round_[c.unit] == round_) continue;
      if (trees_[d].At(slot) <= capacity || c.freed_bytes <= 0) break;
      // Best target: one with room (least estimated increase, then most room, then lowest id); if
      // none has room, the move that lowers the total overflow the most (a later step fixes the
      // target), so full devices do not block each other.
      DeviceId best_to = kNone;
      double best_cost = std::numeric_limits<double>::infinity();
      int64_t best_room = 0;
      DeviceId spill_to = kNone;
      int64_t spill_delta = 0;
      DeviceId force_to = kNone;  // most room left, even if none: see below
      int64_t force_room = std::numeric_limits<int64_t>::min();
      const int64_t over_from = std::max<int64_t>(0, trees_[d].Max() - capacity);
      for (DeviceId to = 0; to < devices; ++to) {
        if (to == d || !rules_.Allowed(FirstMember(c.unit), to)) continue;
        // Tabu: no moving straight back to where the unit left recently (stops ping-pong).
        if (unit_left_device_[c.unit] == to &&
            round_ - unit_moved_round_[c.unit] <= options_.tabu_rounds) {
          continue;
        }
        const double cost = MoveCost(c.unit, d, to, assignment);
        if (cost > best_cost) continue;
        const int64_t cap_to = model_.capacity_bytes[to];
        const int64_t over_to = std::max<int64_t>(0, trees_[to].Max() - cap_to);
        const int64_t fill_to =
            static_cast<int64_t>(options_.target_fill * static_cast<double>(cap_to));
        // Most tries on a nearly full target end with no room and no lower overflow; bounds (no tree
        // update) rule those out exactly, which is most of the work on large graphs. When the unit's
        // buffers are all non-negative, charges on `to` only add bytes, so its peak cannot fall;
        // `from`'s peak falls by at most the bytes removed there, which the unit's removable bytes
        // bound before its charges are even built, and the charges themselves bound after. A target
        // that surely has no room can still be a spill (a lower total overflow) or, in a stuck round,
        // the forced move's target: only the first is bounded here, so stuck rounds check them all.
        const bool may_bound = options_.bound_room_checks && !(stuck_ && !forced);
        // `to_peak_at_least`: a lower bound of `to`'s peak after the move, above fill_to.
        auto surely_useless = [&](int64_t to_peak_at_least, int64_t removed_from) {
          const int64_t delta_at_least =
              (to_peak_at_least - fill_to) - over_to +
              std::max<int64_t>(0, trees_[d].Max() - removed_from - capacity) - over_from;
          return best_to != kNone || delta_at_least >= spill_delta;
        };
        if (may_bound && trees_[to].Max() > fill_to) {
          const UnitBound& unit_bound = BoundUnit(c.unit);
          if (unit_bound.only_adds && surely_useless(trees_[to].Max(), unit_bound.removable)) {
            continue;
          }
        }
        BuildCharges(c.unit, d, to, assignment, &charges_);
        if (may_bound) {
          // With the charges known, `to`'s peak after is at least each added interval's bytes on top of
          // the most its range holds now (range queries, no updates).
          const ChargeBounds bounds = BoundCharges(d, to);
          if (bounds.to_only_adds) {
            int64_t to_peak = trees_[to].Max();
            for (const Charge& ch : charges_) {
              if (ch.device != to || ch.until_ns <= ch.from_ns || ch.bytes <= 0) continue;
              to_peak = std::max(to_peak, trees_[to].RangeMax(SlotContaining(to, ch.from_ns),
                                                              SlotFrom(to, ch.until_ns)) +
                                              ch.bytes);
              if (to_peak > fill_to && surely_useless(to_peak, bounds.removed_from)) break;
            }
            if (to_peak > fill_to && surely_useless(to_peak, bounds.removed_from)) continue;
          }
        }
        ++room_checks_;
        // The target's side first: the source's side only matters for a spill (no room and no
        // target with room yet), so it is charged only then.
        for (const Charge& ch : charges_) {
          if (ch.device == to) Apply(ch, +1);
        }
        // Room is judged against a slightly lower fill than the capacity: the re-simulation after the
        // batch shifts the schedule (new transfers delay ops, buffers live longer), and a target
        // filled to the brim overflows next round.
        const int64_t room = fill_to - trees_[to].Max();
        int64_t delta = 0;
        if (room < 0 && best_to == kNone) {
          for (const Charge& ch : charges_) {
            if (ch.device != to) Apply(ch, +1);
          }
          delta = std::max<int64_t>(0, -room) - over_to +
                  std::max<int64_t>(0, trees_[d].Max() - capacity) - over_from;
          for (const Charge& ch : charges_) {
            if (ch.device != to) Apply(ch, -1);
          }
        }
        for (const Charge& ch : charges_) {
          if (ch.device == to) Apply(ch, -1);
        }
        if (room < 0) {
          if (best_to == kNone && delta < spill_delta) {
            spill_to = to;
            spill_delta = delta;
          }
          if (room > force_room) {
            force_to = to;
            force_room = room;
          }
          continue;
        }
        if (cost < best_cost || room > best_room) {
          best_to = to;
          best_cost = cost;
          best_room = room;
        }
      }
      if (best_to == kNone) best_to = spill_to;
      // Stuck (every device is full where this unit would go): one forced move per device and round,
      // to the device with the most room, lets the next rounds reshuffle; the best assignment seen is
      // kept, so this can only help.
      if (best_to == kNone && !forced && force_to != kNone && stuck_) {
        best_to = force_to;
        forced = true;
      }
      if (best_to == kNone) continue;
      BuildCharges(c.unit, d, best_to, assignment, &charges_);
      for (const Charge& ch : charges_) Apply(ch, +1);
      {
        int64_t impact, transfer;
        delays_.clear();
        EstimateMove(c.unit, d, best_to, assignment, &impact, &transfer, &delays_);
        for (const auto& [op, delay] : delays_) slack_used_[op] += delay;
      }
      ForEachMember(c.unit, [&](OpId u) {
        assignment[u] = best_to;
        ++moved;
      });
      InvalidateAround(c.unit, delays_);
      unit_moved_round_[c.unit] = round_;
      unit_left_device_[c.unit] = d;
      moved_here = true;
      // Re-key the candidates next to the moved unit.
      const int64_t still_needed = trees_[d].At(slot) - capacity;
      const int32_t moved_unit = c.unit;
      const int64_t this_move = moves_in_scan_++;
      ForEachMember(moved_unit, [&](OpId u) {
        auto rekey = [&](OpId y) {
          const int32_t w = UnitOf(y);
          if (w == moved_unit || unit_stamp_[w] != scan_stamp || unit_moved_round_[w] == round_) {
            return;
          }
          const int32_t index = unit_candidate_[w];
          if (candidate_rekeyed_at_[index] == this_move) return;
          candidate_rekeyed_at_[index] = this_move;
          Candidate& other = candidates_[index];
          other.cost_key = key_of(other, still_needed);
          heap_.push_back({other.cost_key, other.freed_bytes, other.unit, index,
                           ++candidate_version_[index]});
          std::push_heap(heap_.begin(), heap_.end(), HeapLater);
        };
        for (EdgeId e = model_.out_begin(u); e < model_.out_end(u); ++e) rekey(model_.out_dst[e]);
        for (EdgeId e = model_.in_begin(u); e < model_.in_end(u); ++e) rekey(model_.in_src[e]);
      });
    }
    if (!moved_here) break;
  }
  return moved;
}

RepairOutcome Repairer::Run(Assignment& assignment) {
  RepairOutcome outcome;
  const int32_t devices = model_.num_devices();
  unit_stamp_.assign(num_units_, 0);
  unit_candidate_.assign(num_units_, 0);
  unit_moved_round_.assign(num_units_, -1000000);
  unit_left_device_.assign(num_units_, kNone);
  op_stamp_.assign(model_.num_ops(), 0);
  cost_epoch_.assign(num_units_, -1);
  cost_slot_.assign(num_units_, 0);
  cost_from_.assign(num_units_, kNone);
  unit_bound_.assign(num_units_, UnitBound());
  unit_bound_epoch_.assign(num_units_, -1);

  SimOptions sim_options;
  sim_options.compute_memory = true;
  sim_options.record_memory_intervals = true;

  Assignment best = assignment;
  PlacementScore best_score{kInf, kInf};  // worse than any simulated assignment
  std::string best_reason;
  int32_t stalled = 0;
  for (round_ = 0; round_ < options_.max_rounds; ++round_) {
    if (round_ > 0 && context_.ShouldStop()) {
      outcome.time_limited = true;
      break;
    }
    const SimResult& result = sim_.Run(assignment, sim_options);
    const PlacementScore score = ScoreSimulation(model_, result);
    int64_t worst = 0;
    DeviceId worst_device = kNone;
    for (DeviceId d = 0; d < devices; ++d) {
      const int64_t over = result.peak_memory_bytes[d] - model_.capacity_bytes[d];
      if (over > worst) {
        worst = over;
        worst_device = d;
      }
    }
    ++outcome.rounds;
    if (score.BetterThan(best_score)) {
      stalled = score.overflow_bytes < best_score.overflow_bytes ? 0 : stalled + 1;
      best = assignment;
      best_score = score;
      best_reason.clear();
      if (worst_device != kNone) {
        best_reason = absl::StrFormat(
            "device \"%s\" is %d bytes short at t=%d ns (peak %d bytes > capacity %d bytes)",
            model_.device_name[worst_device], worst, result.peak_time_ns[worst_device],
            result.peak_memory_bytes[worst_device], model_.capacity_bytes[worst_device]);
      }
    } else {
      ++stalled;
    }
    ReportProgress(static_cast<double>(round_ + 1) / options_.max_rounds,
                   best_score.Fits() ? best_score.makespan_ns : 0);
    if (score.Fits() || stalled >= options_.max_stalled_rounds) break;

    IndexRound(result, assignment);
    std::vector<DeviceId> order;
    for (DeviceId d = 0; d < devices; ++d) {
      if (result.peak_memory_bytes[d] > model_.capacity_bytes[d]) order.push_back(d);
    }
    std::sort(order.begin(), order.end(), [&](DeviceId a, DeviceId b) {
      const int64_t oa = result.peak_memory_bytes[a] - model_.capacity_bytes[a];
      const int64_t ob = result.peak_memory_bytes[b] - model_.capacity_bytes[b];
      return oa != ob ? oa > ob : a < b;
    });
    int32_t moved = 0;
    stuck_ = false;
    for (DeviceId d : order) moved += FixDevice(d, assignment);
    if (moved == 0 && !context_.ShouldStop()) {
      // Nothing fits anywhere as it is: allow forced moves once.
      stuck_ = true;
      IndexRound(result, assignment);
      for (DeviceId d : order) moved += FixDevice(d, assignment);
    }
    outcome.moves += moved;
    if (moved == 0) {
      outcome.time_limited = context_.ShouldStop();
      break;
    }
  }
  assignment = best;
  outcome.fits = best_score.Fits();
  outcome.overflow_bytes = best_score.overflow_bytes;
  outcome.makespan_ns = best_score.makespan_ns;
  outcome.move_estimates = move_estimates_;
  outcome.room_checks = room_checks_;
  if (!outcome.fits) outcome.reason = best_reason;
  return outcome;
}

}  // namespace

RepairOutcome RepairMemory(const Model& model, const SolveContext& context,
                           Assignment& assignment) {
  return RepairMemory(model, context, RepairOptions(), assignment);
}

RepairOutcome RepairMemory(const Model& model, const SolveContext& context,
                           const RepairOptions& options, Assignment& assignment) {
  if (MemoryCannotFit(model)) {
    // No move can make it fit (placement_score.h): the assignment is scored as it is.
    Simulator simulator(model);
    const SimResult& simulated = simulator.Run(assignment);
    const PlacementScore score = ScoreSimulation(model, simulated);
    RepairOutcome outcome;
    outcome.fits = score.Fits();
    outcome.overflow_bytes = score.overflow_bytes;
    outcome.makespan_ns = score.makespan_ns;
    outcome.reason = kNoPlacementFitsReason;
    return outcome;
  }
  Repairer repairer(model, context, options);
  return repairer.Run(assignment);
}

RepairOutcome RepairFewRounds(const Model& model, const SolveContext& context, int32_t max_rounds,
                              Assignment& assignment) {
  RepairOptions repair;
  repair.max_rounds = max_rounds;
  repair.max_stalled_rounds = 2;
  repair.progress_from = repair.progress_to = -1.0;  // silent
  SolveContext quiet = context;
  quiet.on_progress = nullptr;
  return RepairMemory(model, quiet, repair, assignment);
}

}  // namespace placement::engine
