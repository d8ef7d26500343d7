#include "service/engine/pardnn/cluster_mapping.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "service/engine/pardnn/fenwick_tree.h"
#include "service/engine/partition/placement_rules.h"
#include "service/engine/repair/range_max_tree.h"
#include "service/engine/sim/placement_score.h"

namespace placement::engine::pardnn {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
// MappingOptions::ignore_memory's budget: more than any graph's bytes, with room to add to it.
constexpr int64_t kUnlimitedBudget = int64_t{1} << 62;

class Mapper {
 public:
  Mapper(const Model& model, const SlicingCosts& costs, const LinearClusters& clusters,
         const MappingOptions& options, const SolveContext& context)
      : model_(model),
        costs_(costs),
        clusters_(clusters),
        options_(options),
        context_(context),
        rules_(model),
        g_(clusters.topo),
        n_(model.num_ops()),
        devices_(model.num_devices()) {}

  absl::StatusOr<ClusterMapping> Run();

 private:
  struct Choice {
    DeviceId device = kNone;
    int64_t overflow = 0;  // estimated bytes beyond the device's capacity that placing here adds
    double penalty = kInfinity;
    int64_t current_overflow = 0;
    double current_penalty = kInfinity;
  };

  int32_t UnitOf(OpId v) const {  // v: op id
    const int32_t g = model_.colocation_group[v];
    return g != kNone ? g : model_.num_groups() + v;
  }
  int64_t OpTime(int32_t pos, DeviceId d) const {
    return ScaledComputeNs(compute_by_pos_[pos], model_.speed[d]);
  }
  void BuildMembers();
  absl::Status MatchPrimaries();
  // Memory-bound graphs whose critical path (cluster 0) does not fit one device: one cluster per unit
  // of the path, with the parameters it reads first; the first stays on the path's device, the others
  // are mapped like secondaries, before them and in path order, with the memory timeline in view.
  void ChunkCriticalPath();
  // The other way (MappingOptions::chunk_critical_path false): contiguous pieces anchored on devices
  // in rank order, each filled to the share of memory the whole graph needs (or, with
  // segment_with_parameters, each carrying the parameters it reads, sized by its device's share of
  // the path's whole footprint, with backward ops folded onto their activations' pieces).
  // `parameter_footprint`: CriticalPathParameterFootprint() when segment_with_parameters, else 0.
  void SegmentCriticalPath(const std::vector<DeviceId>& by_rank, DeviceId first,
                           int64_t parameter_footprint, std::vector<uint8_t>* taken);
  int64_t UnitFootprint(int32_t pos) const;
  // The footprint of the parameter units (persistent bytes) that critical-path ops read, off the path.
  int64_t CriticalPathParameterFootprint() const;
  // What the memory estimate may fill on device d: its capacity, scaled by the caller's calibration
  // (unlimited with ignore_memory).
  int64_t Budget(DeviceId d) const {
    if (options_.ignore_memory) return kUnlimitedBudget;
    const double scale = static_cast<size_t>(d) < options_.capacity_scale.size()
                             ? options_.capacity_scale[d]
                             : 1.0;
    return static_cast<int64_t>(scale * static_cast<double>(model_.capacity_bytes[d]));
  }
  absl::Status SplitForConstraints();
  void PrepareSpans();
  void PrepareLinks();
  bool ClusterAllowed(int32_t c, DeviceId d) const {
    for (int32_t i = restricted_offset_[c]; i < restricted_offset_[c + 1]; ++i) {
      if (!rules_.Allowed(restricted_ops_[i], d)) return false;
    }
    return true;
  }
  // Every cluster but the critical path (primary 0, the anchor) has a communication row and may move
  // in the improvement pass: the other primaries too, so that a path whose transfers cost more than
  // its parallelism gains can join its neighbours (the reference never revisits primaries).
  bool HasRow(int32_t c) const { return c > 0; }
  int64_t* Row(int32_t c) { return table_.data() + static_cast<size_t>(c - 1) * devices_; }
  // Communication of cluster c with placed ops, per device (into scratch when not tabled).
  const int64_t* CommRow(int32_t c);
  void Place(int32_t c, DeviceId d);
  void Unplace(int32_t c);
  // improve = false: the first placement; true: the improvement pass (see Evaluate).
  Choice Evaluate(int32_t c, bool improve = false);
  struct Option {
    bool allowed = false;
    int64_t overflow = 0;
    double busy = 0.0, queue = 0.0, comm = 0.0;
  };

  const Model& model_;
  const SlicingCosts& costs_;
  const LinearClusters& clusters_;
  const MappingOptions& options_;
  const SolveContext& context_;
  PlacementRules rules_;
  // Everything per op below is indexed by topological position (g_.pos_of / g_.op_at convert), so
  // that walking a chain and its edges touches nearby memory.
  const TopoGraph& g_;
  const int32_t n_;
  const int32_t devices_;

  std::vector<int32_t> cl_;  // cluster per position (after colocation pulls and splits)
  std::vector<int64_t> compute_by_pos_;
  int32_t num_clusters_ = 0;
  int32_t num_primaries_ = 0;
  std::vector<int32_t> member_offset_;
  std::vector<int32_t> member_ops_;  // positions
  std::vector<uint8_t> op_restricted_;  // by position: the op's unit has a pin or a kind restriction
  std::vector<int32_t> restricted_offset_;  // per cluster: one op (id) per restricted unit
  std::vector<OpId> restricted_ops_;
  std::vector<DeviceId> primary_device_;
  // Clusters fixed on a device by stage 1 (primaries, pieces of the critical path); kNone = free.
  std::vector<DeviceId> anchor_device_;
  std::vector<DeviceId> cluster_device_;
  std::vector<DeviceId> pos_device_;  // device of each position's cluster, kNone until placed
  // Memory estimate: persistent bytes + half the output bytes per op (an output lives for part of
  // the step), per cluster and per device as placed.
  std::vector<int64_t> op_footprint_;
  std::vector<int64_t> cluster_footprint_;
  std::vector<int64_t> device_footprint_;
  // Clusters mapped before every other secondary, in id order (the chunks of the critical path).
  std::vector<uint8_t> mapped_first_;

  // ---- Time-resolved memory estimate (only when memory can bind: memory_timeline_) ----
  // Per device a range-add / range-max tree over the spans' slots. What the mapping puts on a device
  // holds memory over its lifetime on the axis: persistent bytes all along, temp bytes while it runs,
  // its output from its start to the finish of its last consumer (wherever that is: conservative), and
  // a copy of every input that comes from another device, from the producer's finish to the finish of
  // the last consumer there (one copy per producer and device).
  struct MemoryCharge {
    DeviceId device;
    int32_t from, until;  // slots [from, until)
    int64_t bytes;
    int64_t copy_key;     // producer position x devices + device for a received copy, else -1
  };
  void BuildMemoryCharges(int32_t c, DeviceId k);
  void AddMemory(int32_t c, DeviceId k);  // charges c on k (Place)
  void RemoveMemory(int32_t c);           // takes c's charges back (Unplace)
  void ApplyCharges(const std::vector<MemoryCharge>& charges, int sign);
  // Estimated bytes beyond the budgets that placing c on k adds (summed over the devices it touches).
  int64_t TimelineOverflow(int32_t c, DeviceId k);
  bool memory_timeline_ = false;
  std::vector<RangeAddMaxTree> memory_;
  std::vector<int32_t> start_slot_, finish_slot_, life_end_slot_;  // by position
  std::vector<int64_t> cluster_bytes_bound_;  // per cluster: the most it can add to one device
  absl::flat_hash_map<int64_t, int32_t> copy_until_;  // charged received copies: key -> end slot
  absl::flat_hash_map<int64_t, std::pair<int32_t, int64_t>> copy_scratch_;  // key -> (end, bytes)
  std::vector<MemoryCharge> charges_;
  std::vector<std::vector<MemoryCharge>> placed_charges_;  // per cluster, as applied by Place
  std::vector<int64_t> overflow_before_;  // per device, scratch
  std::vector<int32_t> device_rank_;  // 0 = fastest and cheapest to talk to

  std::vector<int64_t> tl_, bl_;
  std::vector<int64_t> axis_start_, axis_finish_;  // the spans' time axis, by position
  std::vector<int64_t> slot_time_;
  int32_t num_slots_ = 1;
  // Bucketed slots (more distinct levels than MappingOptions::max_time_slots): each slot's width in ns;
  // 0 where slots are the distinct levels themselves.
  double bucket_ns_ = 0.0;
  // Where the critical path bounds the step and memory cannot bind: finer slots, and a window counts
  // only its share of the buckets it partly covers (MappingOptions::max_time_slots_where_the_path_bounds).
  bool path_bound_ = false;
  bool memory_can_bind_ = false;  // MemoryCanBind(model_)
  std::vector<int32_t> slot_of_;
  std::vector<int64_t> compute_sum_;  // per cluster, compute_ns
  std::vector<int64_t> own_load_;     // per cluster, load added to its device's tree
  std::vector<int32_t> begin_slot_, end_slot_;
  std::vector<int64_t> window_ns_;
  std::vector<int64_t> window_start_ns_;  // per cluster, on the spans' time axis
  std::vector<double> max_level_;     // per cluster: max weighted level (processing order)

  DeviceSlotLoads loads_;
  bool dense_ = true;
  std::vector<int64_t> table_;
  std::vector<int64_t> row_scratch_;
  // Per device: the largest delay beyond slack of an edge to it (CommRow, when slack_row_).
  std::vector<int64_t> delay_scratch_;
  bool slack_row_ = false;
  bool slack_queue_ = false;
  bool critical_bound_ = false;
  DeviceId critical_device_ = kNone;
  int64_t critical_ns_ = 0;
  std::vector<double> link_factor_;  // devices x devices: pair's transfer time / mean transfer time
  std::vector<int64_t> load_scratch_;
  std::vector<int64_t> first_bucket_scratch_, last_bucket_scratch_;  // per device (Evaluate, buckets)
  std::vector<Option> options_scratch_;
  std::vector<DeviceId> nonzero_scratch_;
};

void Mapper::BuildMembers() {
  member_offset_.assign(num_clusters_ + 1, 0);
  for (int32_t i = 0; i < n_; ++i) ++member_offset_[cl_[i] + 1];
  for (int32_t c = 0; c < num_clusters_; ++c) member_offset_[c + 1] += member_offset_[c];
  member_ops_.resize(n_);
  std::vector<int32_t> fill(member_offset_.begin(), member_offset_.end() - 1);
  // Keep the path order of the slicing where it still applies.
  for (const OpId v : clusters_.ops) {
    const int32_t pos = g_.pos_of[v];
    member_ops_[fill[cl_[pos]]++] = pos;
  }

  // One representative op per restricted unit of each cluster.
  restricted_offset_.assign(num_clusters_ + 1, 0);
  restricted_ops_.clear();
  std::vector<uint8_t> seen(model_.num_groups(), 0);
  for (int32_t c = 0; c < num_clusters_; ++c) {
    for (int32_t i = member_offset_[c]; i < member_offset_[c + 1]; ++i) {
      const int32_t pos = member_ops_[i];
      if (!op_restricted_[pos]) continue;
      const OpId v = g_.op_at[pos];
      const int32_t g = model_.colocation_group[v];
      if (g != kNone) {
        if (seen[g]) continue;
        seen[g] = 1;
      }
      restricted_ops_.push_back(v);
    }
    restricted_offset_[c + 1] = static_cast<int32_t>(restricted_ops_.size());
  }
  for (int32_t c = 0; c < num_clusters_; ++c) {
    for (int32_t i = restricted_offset_[c]; i < restricted_offset_[c + 1]; ++i) {
      const int32_t g = model_.colocation_group[restricted_ops_[i]];
      if (g != kNone) seen[g] = 0;
    }
  }
}

absl::Status Mapper::MatchPrimaries() {
  // Device order: fastest first, then cheapest mean link to the others, then id.
  int64_t total_bytes = 0;
  for (EdgeId e = 0; e < model_.num_edges(); ++e) total_bytes += model_.out_bytes[e];
  const int64_t typical_bytes = model_.num_edges() > 0 ? total_bytes / model_.num_edges() : 0;
  std::vector<double> link_cost(devices_, 0.0);
  for (DeviceId a = 0; a < devices_; ++a) {
    for (DeviceId b = 0; b < devices_; ++b) {
      if (a != b) link_cost[a] += static_cast<double>(model_.TransferNs(a, b, typical_bytes));
    }
  }
  std::vector<DeviceId> by_rank(devices_);
  for (DeviceId d = 0; d < devices_; ++d) by_rank[d] = d;
  std::sort(by_rank.begin(), by_rank.end(), [&](DeviceId a, DeviceId b) {
    if (model_.speed[a] != model_.speed[b]) return model_.speed[a] > model_.speed[b];
    if (link_cost[a] != link_cost[b]) return link_cost[a] < link_cost[b];
    return a < b;
  });
  device_rank_.assign(devices_, 0);
  for (int32_t r = 0; r < devices_; ++r) device_rank_[by_rank[r]] = r;

  // Heaviest primary first; each takes the device that allows most of its work, then the best ranked.
  std::vector<int64_t> work(num_primaries_, 0);
  for (int32_t p = 0; p < num_primaries_; ++p) {
    for (int32_t i = member_offset_[p]; i < member_offset_[p + 1]; ++i) {
      work[p] += g_.op_ns[member_ops_[i]];
    }
  }
  std::vector<int32_t> order(num_primaries_);
  for (int32_t p = 0; p < num_primaries_; ++p) order[p] = p;
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return work[a] != work[b] ? work[a] > work[b] : a < b;
  });
  primary_device_.assign(num_primaries_, kNone);
  anchor_device_.assign(num_clusters_, kNone);
  std::vector<uint8_t> taken(devices_, 0);
  auto best_device_for = [&](int32_t p) {
    DeviceId best = kNone;
    int64_t best_allowed = -1;
    for (const DeviceId d : by_rank) {
      if (taken[d]) continue;
      int64_t allowed = work[p];
      for (int32_t i = member_offset_[p]; i < member_offset_[p + 1]; ++i) {
        const int32_t pos = member_ops_[i];
        if (op_restricted_[pos] && !rules_.Allowed(g_.op_at[pos], d)) allowed -= g_.op_ns[pos];
      }
      if (allowed > best_allowed) {
        best = d;
        best_allowed = allowed;
      }
    }
    return best;
  };
  // The critical path first: the best device, or contiguous pieces over several when its memory does
  // not fit one (ParDNN assumes it does; memory-bound training graphs are chains that do not).
  if (num_primaries_ > 0 && member_offset_[0] != member_offset_[1]) {
    const DeviceId first = best_device_for(0);
    int64_t footprint = 0;
    for (int32_t i = member_offset_[0]; i < member_offset_[1]; ++i) {
      footprint += op_footprint_[member_ops_[i]];
    }
    // Segmented with its parameters, the path must also hold what it reads.
    const int64_t parameter_footprint = options_.segment_with_parameters && !options_.chunk_critical_path
                                            ? CriticalPathParameterFootprint()
                                            : 0;
    footprint += parameter_footprint;
    primary_device_[0] = first;
    if (footprint > Budget(first) && devices_ > 1 && !options_.chunk_critical_path) {
      SegmentCriticalPath(by_rank, first, parameter_footprint, &taken);
    } else {
      anchor_device_[0] = first;
      taken[first] = 1;
      if (footprint > Budget(first) && devices_ > 1) ChunkCriticalPath();
    }
  }
  for (const int32_t p : order) {
    if (p == 0 || member_offset_[p] == member_offset_[p + 1]) continue;  // emptied by pulls
    const DeviceId best = best_device_for(p);
    if (best == kNone) break;  // every device is taken: the rest are mapped like secondaries
    taken[best] = 1;
    primary_device_[p] = best;
    anchor_device_[p] = best;
  }
  return absl::OkStatus();
}

int64_t Mapper::UnitFootprint(int32_t pos) const {
  const int32_t g = model_.colocation_group[g_.op_at[pos]];
  if (g == kNone) return op_footprint_[pos];
  int64_t sum = 0;
  for (int32_t i = model_.group_offset[g]; i < model_.group_offset[g + 1]; ++i) {
    sum += op_footprint_[g_.pos_of[model_.group_member[i]]];
  }
  return sum;
}

int64_t Mapper::CriticalPathParameterFootprint() const {
  // Units holding persistent bytes that ops of the critical path read, each once, unless on the path.
  std::vector<uint8_t> counted_group(model_.num_groups(), 0);
  std::vector<uint8_t> counted_op(n_, 0);
  int64_t footprint = 0;
  for (const OpId v : clusters_.Ops(0)) {
    const int32_t pos = g_.pos_of[v];
    for (int64_t e = g_.in_offset[pos]; e < g_.in_offset[pos + 1]; ++e) {
      const int32_t p = g_.in_src[e];
      if (cl_[p] == 0 || model_.persistent_bytes[g_.op_at[p]] == 0) continue;
      const int32_t pg = model_.colocation_group[g_.op_at[p]];
      uint8_t& seen = pg != kNone ? counted_group[pg] : counted_op[p];
      if (seen) continue;
      seen = 1;
      footprint += UnitFootprint(p);
    }
  }
  return footprint;
}

void Mapper::ChunkCriticalPath() {
  // Every unit of the path (an op, or its colocation group) becomes a cluster of its own, with the
  // units holding persistent bytes (parameters and their optimizer state) that it reads first. Mapped
  // in path order with the memory timeline in view, consecutive units stay on a device while they fit
  // (their transfers pull them together) and the next one goes where it fits: a memory-bound chain is
  // cut into a few contiguous stretches, and the backward op that reads an activation follows it to
  // its device (the activation's edge pulls it there), which is where that memory is already held.
  std::vector<uint8_t> pulled(model_.num_groups(), 0);
  std::vector<uint8_t> pulled_op(n_, 0);
  const int32_t first_chunk = num_clusters_;
  bool first_unit = true;
  auto move_unit = [&](int32_t pos, int32_t to) {
    const int32_t g = model_.colocation_group[g_.op_at[pos]];
    if (g == kNone) {
      cl_[pos] = to;
      return;
    }
    for (int32_t i = model_.group_offset[g]; i < model_.group_offset[g + 1]; ++i) {
      cl_[g_.pos_of[model_.group_member[i]]] = to;
    }
  };
  for (const OpId v : clusters_.Ops(0)) {
    const int32_t pos = g_.pos_of[v];
    if (cl_[pos] != 0) continue;  // moved with a unit already
    const int32_t g = model_.colocation_group[v];
    if (g != kNone) {
      if (pulled[g]) continue;
      pulled[g] = 1;
    }
    // The first unit stays in cluster 0, on the critical path's device.
    const int32_t chunk = first_unit ? 0 : num_clusters_++;
    if (!first_unit) anchor_device_.push_back(kNone);
    first_unit = false;
    for (int64_t e = g_.in_offset[pos]; e < g_.in_offset[pos + 1]; ++e) {
      const int32_t p = g_.in_src[e];
      const OpId pv = g_.op_at[p];
      if (model_.persistent_bytes[pv] == 0) continue;
      const int32_t pg = model_.colocation_group[pv];
      uint8_t& seen = pg != kNone ? pulled[pg] : pulled_op[p];
      if (seen) continue;
      seen = 1;
      move_unit(p, chunk);
    }
    move_unit(pos, chunk);
  }
  mapped_first_.assign(num_clusters_, 0);
  for (int32_t c = first_chunk; c < num_clusters_; ++c) mapped_first_[c] = 1;
  BuildMembers();
}

void Mapper::SegmentCriticalPath(const std::vector<DeviceId>& by_rank, DeviceId first,
                                 int64_t parameter_footprint, std::vector<uint8_t>* taken) {
  // Pieces are filled to the share of memory the whole graph needs (at least half of a device), so
  // the rest of the graph still finds room next to them.
  double total_footprint = 0.0, total_capacity = 0.0;
  for (int32_t i = 0; i < n_; ++i) total_footprint += static_cast<double>(op_footprint_[i]);
  for (DeviceId d = 0; d < devices_; ++d) total_capacity += static_cast<double>(Budget(d));
  const double fill =
      std::clamp(total_capacity > 0 ? total_footprint / total_capacity : 1.0, 0.5, 1.0);
  std::vector<DeviceId> devices = {first};
  for (const DeviceId d : by_rank) {
    if (d != first && !(*taken)[d]) devices.push_back(d);
  }
  std::vector<uint8_t> seen_group(model_.num_groups(), 0);
  size_t piece = 0;
  anchor_device_[0] = devices[0];
  (*taken)[devices[0]] = 1;
  // segment_with_parameters: every piece takes the share of the path's whole footprint (its ops and
  // the parameters they read) that its device's budget is of all budgets, not a device's fill.
  const bool with_parameters = options_.segment_with_parameters;
  double path_footprint = 0.0;
  if (with_parameters) {
    for (const OpId v : clusters_.Ops(0)) {
      path_footprint += static_cast<double>(op_footprint_[g_.pos_of[v]]);
    }
    path_footprint += static_cast<double>(parameter_footprint);
  }
  std::vector<int32_t> piece_cluster = {0};
  std::vector<int64_t> piece_footprint = {0};
  std::vector<int32_t> piece_of_pos(with_parameters ? n_ : 0, -1);
  std::vector<int32_t> parameters;  // of the current unit
  int32_t previous_pos = -1;
  auto move_unit = [&](int32_t pos, size_t to) {
    const int32_t g = model_.colocation_group[g_.op_at[pos]];
    const int32_t begin = g == kNone ? 0 : model_.group_offset[g];
    const int32_t end = g == kNone ? 1 : model_.group_offset[g + 1];
    for (int32_t i = begin; i < end; ++i) {
      const int32_t m = g == kNone ? pos : g_.pos_of[model_.group_member[i]];
      cl_[m] = piece_cluster[to];
      if (with_parameters) piece_of_pos[m] = static_cast<int32_t>(to);
    }
  };
  for (const OpId v : clusters_.Ops(0)) {
    const int32_t pos = g_.pos_of[v];
    if (cl_[pos] != 0) continue;  // already moved with its group
    if (with_parameters && piece_of_pos[pos] >= 0) continue;  // moved to the first piece with a group
    const int32_t g = model_.colocation_group[v];
    if (g != kNone) {
      if (seen_group[g]) continue;
      seen_group[g] = 1;
    }
    int64_t unit = UnitFootprint(pos);
    size_t to = piece;
    bool follows = false;
    parameters.clear();
    if (with_parameters) {
      // The parameters it reads first come with it (a parameter read from another device is held
      // there twice and sent every step).
      for (int64_t e = g_.in_offset[pos]; e < g_.in_offset[pos + 1]; ++e) {
        const int32_t p = g_.in_src[e];
        if (model_.persistent_bytes[g_.op_at[p]] == 0 || piece_of_pos[p] >= 0) continue;
        const int32_t pg = model_.colocation_group[g_.op_at[p]];
        if (pg != kNone) {
          if (seen_group[pg]) continue;
          seen_group[pg] = 1;
        }
        piece_of_pos[p] = static_cast<int32_t>(piece);  // claimed; moved below
        parameters.push_back(p);
        unit += UnitFootprint(p);
      }
      // A unit whose largest input (other than the path's previous unit) comes from an earlier piece
      // goes there: a backward op joins the forward op whose activation it reads, so the training
      // step is folded onto its pieces instead of sending every activation on.
      int64_t largest = 0;
      for (int64_t e = g_.in_offset[pos]; e < g_.in_offset[pos + 1]; ++e) {
        const int32_t p = g_.in_src[e];
        if (p == previous_pos || piece_of_pos[p] < 0 || g_.in_bytes[e] <= largest) continue;
        if (model_.persistent_bytes[g_.op_at[p]] > 0) continue;  // parameters follow, not lead
        largest = g_.in_bytes[e];
        to = static_cast<size_t>(piece_of_pos[p]);
      }
      follows = largest > 0 && to != piece;
    }
    if (!follows) {
      const double limit =
          with_parameters
              ? path_footprint * static_cast<double>(Budget(devices[piece])) / std::max(total_capacity, 1.0)
              : fill * static_cast<double>(Budget(devices[piece]));
      if (piece_footprint[piece] > 0 && piece + 1 < devices.size() &&
          static_cast<double>(piece_footprint[piece] + unit) > limit) {
        ++piece;
        piece_cluster.push_back(num_clusters_++);
        piece_footprint.push_back(0);
        anchor_device_.push_back(devices[piece]);
        (*taken)[devices[piece]] = 1;
      }
      to = piece;
    }
    piece_footprint[to] += unit;
    move_unit(pos, to);
    for (const int32_t p : parameters) move_unit(p, to);
    previous_pos = pos;
  }
  // Group members that joined cluster 0 from elsewhere went with their group above; anything else in
  // cluster 0 that is not on the path stays with the first piece.
  BuildMembers();
}

absl::Status Mapper::SplitForConstraints() {
  // Units that cannot go where their cluster must go become clusters of their own.
  std::vector<int32_t> unit_new_cluster;  // indexed by unit, lazily sized
  unit_new_cluster.assign(model_.num_groups() + n_, kNone);
  int32_t next = num_clusters_;
  auto split_unit = [&](OpId v) {
    const int32_t u = UnitOf(v);
    if (unit_new_cluster[u] == kNone) unit_new_cluster[u] = next++;
    const int32_t g = model_.colocation_group[v];
    if (g == kNone) {
      cl_[g_.pos_of[v]] = unit_new_cluster[u];
    } else {
      for (int32_t i = model_.group_offset[g]; i < model_.group_offset[g + 1]; ++i) {
        cl_[g_.pos_of[model_.group_member[i]]] = unit_new_cluster[u];
      }
    }
  };
  for (int32_t c = 0; c < num_clusters_; ++c) {
    if (restricted_offset_[c] == restricted_offset_[c + 1]) continue;
    if (anchor_device_[c] != kNone) {
      const DeviceId d = anchor_device_[c];
      for (int32_t i = restricted_offset_[c]; i < restricted_offset_[c + 1]; ++i) {
        const OpId v = restricted_ops_[i];
        if (d == kNone || !rules_.Allowed(v, d)) split_unit(v);
      }
      continue;
    }
    bool some_device = false;
    for (DeviceId d = 0; d < devices_ && !some_device; ++d) some_device = ClusterAllowed(c, d);
    if (!some_device) {
      for (int32_t i = restricted_offset_[c]; i < restricted_offset_[c + 1]; ++i) {
        split_unit(restricted_ops_[i]);
      }
    }
  }
  if (next != num_clusters_) {
    num_clusters_ = next;
    anchor_device_.resize(num_clusters_, kNone);
    BuildMembers();
  }
  // Every restricted unit must have some device.
  for (int32_t c = 0; c < num_clusters_; ++c) {
    if (anchor_device_[c] != kNone || restricted_offset_[c] == restricted_offset_[c + 1]) continue;
    bool some_device = false;
    for (DeviceId d = 0; d < devices_ && !some_device; ++d) some_device = ClusterAllowed(c, d);
    if (!some_device) {
      const OpId v = restricted_ops_[restricted_offset_[c]];
      const int32_t g = model_.colocation_group[v];
      return absl::InvalidArgumentError(
          g != kNone ? absl::StrCat("colocation group \"", model_.group_name[g],
                                    "\" has no device allowed for all its members")
                     : absl::StrCat("op \"", model_.op_name[v], "\" has no allowed device"));
    }
  }
  return absl::OkStatus();
}

void Mapper::PrepareSpans() {
  ComputePositionLevels(g_, cl_, &tl_, &bl_, options_.span_comm_weight);
  {
    // Slack exists only where the critical path, not the devices' total capacity, bounds the step.
    double work = 0.0, speed = 0.0;
    for (int32_t i = 0; i < n_; ++i) work += static_cast<double>(g_.op_ns[i]);
    for (DeviceId d = 0; d < devices_; ++d) speed += model_.speed[d] / costs_.mean_speed;
    int64_t cp = 0;
    for (int32_t i = 0; i < n_; ++i) cp = std::max(cp, tl_[i] + bl_[i]);
    critical_bound_ = static_cast<double>(cp) >= work / std::max(1e-9, speed);
  }
  path_bound_ = critical_bound_ && !memory_can_bind_;
  // The time axis: the levels above, or a simulated schedule's times when the caller gives one.
  axis_start_.resize(n_);
  axis_finish_.resize(n_);
  const bool retimed = options_.schedule_start_ns != nullptr && options_.schedule_finish_ns != nullptr;
  for (int32_t i = 0; i < n_; ++i) {
    axis_start_[i] = retimed ? (*options_.schedule_start_ns)[g_.op_at[i]] : tl_[i];
    axis_finish_[i] = retimed ? (*options_.schedule_finish_ns)[g_.op_at[i]] : tl_[i] + g_.op_ns[i];
  }
  // Time slots of the Fenwick trees: the distinct top levels, or (on large graphs) at most
  // options_.max_time_slots equal buckets of the stage-1 schedule, so that K trees stay small enough
  // for the cache; a span then covers whole buckets (a slightly wider window).
  int64_t graph_end = 0;
  for (int32_t i = 0; i < n_; ++i) graph_end = std::max(graph_end, axis_finish_[i]);
  slot_time_.clear();
  const int64_t max_slots =
      path_bound_ ? std::max(options_.max_time_slots,
                             std::min(options_.max_time_slots_where_the_path_bounds,
                                      options_.max_fine_load_entries / std::max(1, devices_)))
                  : options_.max_time_slots;
  if (n_ <= 4 * max_slots) {  // else there are too many distinct levels anyway
    slot_time_.assign(axis_start_.begin(), axis_start_.end());
    std::sort(slot_time_.begin(), slot_time_.end());
    slot_time_.erase(std::unique(slot_time_.begin(), slot_time_.end()), slot_time_.end());
  }
  const bool exact = !slot_time_.empty() &&
                     static_cast<int64_t>(slot_time_.size()) <= max_slots;
  const int64_t buckets = exact ? static_cast<int64_t>(slot_time_.size()) : max_slots;
  num_slots_ = static_cast<int32_t>(std::max<int64_t>(1, buckets));
  const double per_ns = static_cast<double>(num_slots_) / static_cast<double>(graph_end + 1);
  bucket_ns_ = exact ? 0.0 : 1.0 / per_ns;
  auto bucket = [&](int64_t t) {
    return static_cast<int32_t>(
        std::clamp<int64_t>(static_cast<int64_t>(static_cast<double>(t) * per_ns), 0, num_slots_ - 1));
  };
  // First slot of a window starting at t, and the end slot of a window ending (exclusive) at t.
  auto slot_at = [&](int64_t t) {
    if (exact) {
      return static_cast<int32_t>(std::lower_bound(slot_time_.begin(), slot_time_.end(), t) -
                                  slot_time_.begin());
    }
    return bucket(t);
  };
  auto slot_end = [&](int64_t t) {
    if (exact) return slot_at(t);
    return t <= 0 ? 0 : bucket(t - 1) + 1;
  };
  slot_of_.resize(n_);
  for (int32_t i = 0; i < n_; ++i) slot_of_[i] = slot_at(axis_start_[i]);
  compute_sum_.assign(num_clusters_, 0);
  own_load_.assign(num_clusters_, 0);
  begin_slot_.assign(num_clusters_, 0);
  end_slot_.assign(num_clusters_, 0);
  window_ns_.assign(num_clusters_, 0);
  window_start_ns_.assign(num_clusters_, 0);
  max_level_.assign(num_clusters_, 0.0);
  for (int32_t c = 0; c < num_clusters_; ++c) {
    int64_t start = std::numeric_limits<int64_t>::max();
    int64_t end = 0, last_finish = 0;
    bool has_outside_child = false;
    for (int32_t i = member_offset_[c]; i < member_offset_[c + 1]; ++i) {
      const int32_t v = member_ops_[i];
      compute_sum_[c] += compute_by_pos_[v];
      max_level_[c] = std::max(max_level_[c], static_cast<double>(tl_[v] + bl_[v]));
      // Earliest start: after the latest parent has finished (reference §8.8: max, not min).
      int64_t parents_done = 0;
      for (int64_t e = g_.in_offset[v]; e < g_.in_offset[v + 1]; ++e) {
        const int32_t p = g_.in_src[e];
        parents_done = std::max(parents_done, axis_finish_[p]);
      }
      start = std::min(start, parents_done);
      last_finish = std::max(last_finish, axis_finish_[v]);
      // Deadline: the earliest start of an outside child.
      int64_t child_start = std::numeric_limits<int64_t>::max();
      for (int64_t e = g_.out_offset[v]; e < g_.out_offset[v + 1]; ++e) {
        const int32_t ch = g_.out_dst[e];
        if (cl_[ch] != c) child_start = std::min(child_start, axis_start_[ch]);
      }
      if (child_start != std::numeric_limits<int64_t>::max()) {
        has_outside_child = true;
        end = std::max(end, child_start);
      }
    }
    if (member_offset_[c] == member_offset_[c + 1]) start = 0;
    if (!has_outside_child) end = graph_end;
    end = std::max(end, last_finish);
    begin_slot_[c] = slot_at(start);
    end_slot_[c] = std::max(begin_slot_[c], slot_end(end));
    window_ns_[c] = std::max<int64_t>(0, end - start);
    window_start_ns_[c] = start;
  }
  if (!memory_timeline_) return;
  // Memory lifetimes on the same axis: an output from its op's start to its last consumer's finish.
  start_slot_.resize(n_);
  finish_slot_.resize(n_);
  life_end_slot_.resize(n_);
  for (int32_t i = 0; i < n_; ++i) {
    int64_t last = axis_finish_[i];
    for (int64_t e = g_.out_offset[i]; e < g_.out_offset[i + 1]; ++e) {
      last = std::max(last, axis_finish_[g_.out_dst[e]]);
    }
    start_slot_[i] = slot_at(axis_start_[i]);
    finish_slot_[i] = std::max(start_slot_[i], slot_end(axis_finish_[i]));
    life_end_slot_[i] = std::max(finish_slot_[i], slot_end(last));
    // An op that ends at its own start still holds its output at that slot.
    if (life_end_slot_[i] == start_slot_[i]) life_end_slot_[i] = std::min(num_slots_, start_slot_[i] + 1);
  }
}

void Mapper::PrepareLinks() {
  // link_factor(j, k) scales the mean-link edge times of the table to the (j, k) link.
  int64_t total_bytes = 0;
  for (EdgeId e = 0; e < model_.num_edges(); ++e) total_bytes += model_.out_bytes[e];
  const int64_t typical = model_.num_edges() > 0 ? total_bytes / model_.num_edges() : 0;
  double mean = 0.0;
  int64_t pairs = 0;
  for (DeviceId a = 0; a < devices_; ++a) {
    for (DeviceId b = 0; b < devices_; ++b) {
      if (a == b) continue;
      mean += static_cast<double>(model_.TransferNs(a, b, typical));
      ++pairs;
    }
  }
  mean = pairs > 0 ? mean / pairs : 0.0;
  link_factor_.assign(static_cast<size_t>(devices_) * devices_, 1.0);
  for (DeviceId a = 0; a < devices_; ++a) {
    for (DeviceId b = 0; b < devices_; ++b) {
      double f = 0.0;
      if (a != b) f = mean > 0 ? static_cast<double>(model_.TransferNs(a, b, typical)) / mean : 1.0;
      link_factor_[static_cast<size_t>(a) * devices_ + b] = f;
    }
  }
}

const int64_t* Mapper::CommRow(int32_t c) {
  if (dense_) return Row(c);
  std::fill(row_scratch_.begin(), row_scratch_.end(), 0);
  if (slack_row_) std::fill(delay_scratch_.begin(), delay_scratch_.end(), 0);
  // An edge's transfer delays the step only by what exceeds the slack of the longest path through it
  // (on the compute-only axis, where that path is tl(src) + time(src) + bl(dst)).
  auto delay = [&](int32_t from, int32_t to, int64_t ns) {
    return std::max<int64_t>(0, ns - (critical_ns_ - (tl_[from] + g_.op_ns[from] + bl_[to])));
  };
  for (int32_t i = member_offset_[c]; i < member_offset_[c + 1]; ++i) {
    const int32_t v = member_ops_[i];
    // pos_device_ (not cluster_device_[cl_[y]]): neighbours' positions are close to v's, cluster
    // ids are not, and this loop is the mapping's hot spot on large graphs.
    for (int64_t e = g_.out_offset[v]; e < g_.out_offset[v + 1]; ++e) {
      const int32_t y = g_.out_dst[e];
      const DeviceId d = pos_device_[y];
      if (d != kNone && cl_[y] != c) {
        row_scratch_[d] += g_.out_ns[e];
        if (slack_row_) delay_scratch_[d] = std::max(delay_scratch_[d], delay(v, y, g_.out_ns[e]));
      }
    }
    for (int64_t e = g_.in_offset[v]; e < g_.in_offset[v + 1]; ++e) {
      const int32_t y = g_.in_src[e];
      const DeviceId d = pos_device_[y];
      if (d != kNone && cl_[y] != c) {
        row_scratch_[d] += g_.in_ns[e];
        if (slack_row_) delay_scratch_[d] = std::max(delay_scratch_[d], delay(y, v, g_.in_ns[e]));
      }
    }
  }
  return row_scratch_.data();
}

void Mapper::BuildMemoryCharges(int32_t c, DeviceId k) {
  charges_.clear();
  copy_scratch_.clear();
  auto copy = [&](int32_t producer, DeviceId device, int32_t until, int64_t bytes) {
    auto [it, inserted] = copy_scratch_.try_emplace(static_cast<int64_t>(producer) * devices_ + device,
                                                    until, bytes);
    if (!inserted) {
      it->second.first = std::max(it->second.first, until);
      it->second.second = std::max(it->second.second, bytes);
    }
  };
  for (int32_t i = member_offset_[c]; i < member_offset_[c + 1]; ++i) {
    const int32_t v = member_ops_[i];
    const OpId op = g_.op_at[v];
    if (model_.persistent_bytes[op] > 0) {
      charges_.push_back({k, 0, num_slots_, model_.persistent_bytes[op], -1});
    }
    if (model_.temp_bytes[op] > 0) {
      charges_.push_back({k, start_slot_[v], finish_slot_[v], model_.temp_bytes[op], -1});
    }
    if (model_.output_bytes[op] > 0) {
      charges_.push_back({k, start_slot_[v], life_end_slot_[v], model_.output_bytes[op], -1});
    }
    for (int64_t e = g_.in_offset[v]; e < g_.in_offset[v + 1]; ++e) {
      const int32_t p = g_.in_src[e];
      const DeviceId dp = pos_device_[p];
      if (dp == kNone || dp == k || cl_[p] == c) continue;
      copy(p, k, finish_slot_[v], g_.in_bytes[e]);
    }
    for (int64_t e = g_.out_offset[v]; e < g_.out_offset[v + 1]; ++e) {
      const int32_t y = g_.out_dst[e];
      const DeviceId dy = pos_device_[y];
      if (dy == kNone || dy == k || cl_[y] == c) continue;
      copy(v, dy, finish_slot_[y], g_.out_bytes[e]);
    }
  }
  for (const auto& [key, entry] : copy_scratch_) {
    const int32_t producer = static_cast<int32_t>(key / devices_);
    const DeviceId device = static_cast<DeviceId>(key % devices_);
    int32_t from = finish_slot_[producer];
    const auto it = copy_until_.find(key);
    if (it != copy_until_.end()) from = std::max(from, it->second);
    if (entry.first > from && entry.second > 0) {
      charges_.push_back({device, from, entry.first, entry.second, key});
    }
  }
}

void Mapper::ApplyCharges(const std::vector<MemoryCharge>& charges, int sign) {
  for (const MemoryCharge& ch : charges) memory_[ch.device].Add(ch.from, ch.until, sign * ch.bytes);
}

void Mapper::AddMemory(int32_t c, DeviceId k) {
  BuildMemoryCharges(c, k);
  ApplyCharges(charges_, +1);
  for (const MemoryCharge& ch : charges_) {
    if (ch.copy_key >= 0) copy_until_[ch.copy_key] = std::max(copy_until_[ch.copy_key], ch.until);
  }
  placed_charges_[c] = charges_;
}

void Mapper::RemoveMemory(int32_t c) {
  std::vector<MemoryCharge>& charges = placed_charges_[c];
  ApplyCharges(charges, -1);
  for (const MemoryCharge& ch : charges) {
    if (ch.copy_key < 0) continue;
    auto it = copy_until_.find(ch.copy_key);
    if (it != copy_until_.end() && it->second == ch.until) it->second = ch.from;
  }
  charges.clear();
}

int64_t Mapper::TimelineOverflow(int32_t c, DeviceId k) {
  // Cheap exit: nothing c could add reaches any budget.
  bool may_overflow = false;
  for (DeviceId d = 0; d < devices_ && !may_overflow; ++d) {
    may_overflow = memory_[d].Max() + cluster_bytes_bound_[c] > Budget(d);
  }
  if (!may_overflow) return 0;
  BuildMemoryCharges(c, k);
  for (const MemoryCharge& ch : charges_) overflow_before_[ch.device] = -1;
  for (const MemoryCharge& ch : charges_) {
    if (overflow_before_[ch.device] < 0) {
      overflow_before_[ch.device] = std::max<int64_t>(0, memory_[ch.device].Max() - Budget(ch.device));
    }
  }
  ApplyCharges(charges_, +1);
  int64_t added = 0;
  for (const MemoryCharge& ch : charges_) {
    if (overflow_before_[ch.device] < 0) continue;
    added += std::max<int64_t>(0, memory_[ch.device].Max() - Budget(ch.device)) - overflow_before_[ch.device];
    overflow_before_[ch.device] = -1;  // counted
  }
  ApplyCharges(charges_, -1);
  return added;
}

void Mapper::Place(int32_t c, DeviceId d) {
  if (memory_timeline_) AddMemory(c, d);
  cluster_device_[c] = d;
  device_footprint_[d] += cluster_footprint_[c];
  int64_t load = 0;
  for (int32_t i = member_offset_[c]; i < member_offset_[c + 1]; ++i) {
    const int32_t v = member_ops_[i];
    pos_device_[v] = d;
    const int64_t t = OpTime(v, d);
    load += t;
    loads_.Add(d, slot_of_[v], t);
    if (!dense_) continue;
    for (int64_t e = g_.out_offset[v]; e < g_.out_offset[v + 1]; ++e) {
      const int32_t other = cl_[g_.out_dst[e]];
      if (other != c && HasRow(other)) Row(other)[d] += g_.out_ns[e];
    }
    for (int64_t e = g_.in_offset[v]; e < g_.in_offset[v + 1]; ++e) {
      const int32_t other = cl_[g_.in_src[e]];
      if (other != c && HasRow(other)) Row(other)[d] += g_.in_ns[e];
    }
  }
  own_load_[c] = load;
}

void Mapper::Unplace(int32_t c) {
  const DeviceId d = cluster_device_[c];
  for (int32_t i = member_offset_[c]; i < member_offset_[c + 1]; ++i) {
    const int32_t v = member_ops_[i];
    pos_device_[v] = kNone;
    loads_.Add(d, slot_of_[v], -OpTime(v, d));
    if (!dense_) continue;
    for (int64_t e = g_.out_offset[v]; e < g_.out_offset[v + 1]; ++e) {
      const int32_t other = cl_[g_.out_dst[e]];
      if (other != c && HasRow(other)) Row(other)[d] -= g_.out_ns[e];
    }
    for (int64_t e = g_.in_offset[v]; e < g_.in_offset[v + 1]; ++e) {
      const int32_t other = cl_[g_.in_src[e]];
      if (other != c && HasRow(other)) Row(other)[d] -= g_.in_ns[e];
    }
  }
  own_load_[c] = 0;
  device_footprint_[d] -= cluster_footprint_[c];
  cluster_device_[c] = kNone;
  if (memory_timeline_) RemoveMemory(c);
}

Mapper::Choice Mapper::Evaluate(int32_t c, bool improve) {
  Choice choice;
  const DeviceId current = cluster_device_[c];
  loads_.RangeSums(begin_slot_[c], end_slot_[c], load_scratch_.data());
  if (current != kNone) load_scratch_[current] -= own_load_[c];
  if (path_bound_ && bucket_ns_ > 0.0 && end_slot_[c] > begin_slot_[c]) {
    // The first and last buckets a window touches count only the part of them it covers (the load
    // spread evenly inside a bucket), not all of their load: on a 30K-op training step 8,192 buckets
    // were ~150 µs wide, and a 22 µs attention view beside a critical path busy every µs saw ~150 µs
    // of queue on the path's device — more than its two transfers cost — and left it, on the step's
    // path. (Where the path bounds the step; MappingOptions::max_time_slots_where_the_path_bounds.)
    const int32_t first = begin_slot_[c], last = end_slot_[c] - 1;
    const double start = static_cast<double>(window_start_ns_[c]);
    const double end = start + static_cast<double>(window_ns_[c]);
    const auto uncovered = [&](int32_t slot) {
      const double from = static_cast<double>(slot) * bucket_ns_, to = from + bucket_ns_;
      const double inside = std::max(0.0, std::min(to, end) - std::max(from, start));
      return std::clamp(1.0 - inside / bucket_ns_, 0.0, 1.0);
    };
    const double drop_first = uncovered(first);
    const double drop_last = last != first ? uncovered(last) : 0.0;
    if (drop_first > 0.0 || drop_last > 0.0) {
      loads_.RangeSums(first, first + 1, first_bucket_scratch_.data());
      if (drop_last > 0.0) loads_.RangeSums(last, last + 1, last_bucket_scratch_.data());
      for (DeviceId k = 0; k < devices_; ++k) {
        double outside = drop_first * static_cast<double>(first_bucket_scratch_[k]);
        if (drop_last > 0.0) outside += drop_last * static_cast<double>(last_bucket_scratch_[k]);
        // At least nothing: c's own load, taken out above, may have been in those buckets.
        load_scratch_[k] = std::max<int64_t>(0, load_scratch_[k] - static_cast<int64_t>(std::llround(outside)));
      }
    }
  }
  const int64_t* row = CommRow(c);
  nonzero_scratch_.clear();
  for (DeviceId j = 0; j < devices_; ++j) {
    if (row[j] != 0) nonzero_scratch_.push_back(j);
  }
  const double window = static_cast<double>(window_ns_[c]);
  // The timeline is judged without c's own charges (put back below).
  if (memory_timeline_ && current != kNone) RemoveMemory(c);
  // Per device: the estimated memory overflow it adds, the queueing beyond the window, the transfers.
  for (DeviceId k = 0; k < devices_; ++k) {
    Option& o = options_scratch_[k];
    o.allowed = ClusterAllowed(c, k);
    if (!o.allowed) continue;
    if (memory_timeline_) {
      o.overflow = TimelineOverflow(c, k);
    } else {
      const int64_t used = device_footprint_[k] - (k == current ? cluster_footprint_[c] : 0);
      const int64_t capacity = Budget(k);
      o.overflow = std::max<int64_t>(0, used + cluster_footprint_[c] - capacity) -
                   std::max<int64_t>(0, used - capacity);
    }
    const double work = static_cast<double>(compute_sum_[c]) / model_.speed[k];
    o.busy = static_cast<double>(load_scratch_[k]) + work;
    o.queue = std::max(0.0, o.busy - window);
    if (slack_queue_ && k != critical_device_) {
      // Off the critical path's device, queueing first uses up the cluster's slack.
      o.queue = std::max(0.0, o.queue - static_cast<double>(critical_ns_) + max_level_[c]);
    }
    o.comm = 0.0;
    const double* factor = link_factor_.data() + static_cast<size_t>(k);
    if (slack_row_ && !dense_) {
      // Transfers into and out of a cluster overlap: the worst delay beyond slack, not their sum.
      for (const DeviceId j : nonzero_scratch_) {
        if (j != k) {
          o.comm = std::max(o.comm, static_cast<double>(delay_scratch_[j]) *
                                        factor[static_cast<size_t>(j) * devices_]);
        }
      }
    } else {
      for (const DeviceId j : nonzero_scratch_) {
        if (j != k) o.comm += static_cast<double>(row[j]) * factor[static_cast<size_t>(j) * devices_];
      }
    }
  }
  if (memory_timeline_ && current != kNone) AddMemory(c, current);
  if (current != kNone) {
    choice.current_overflow = options_scratch_[current].overflow;
    choice.current_penalty =
        options_.load_weight * options_scratch_[current].queue + options_scratch_[current].comm;
  }
  // First placement: least (memory overflow, queueing + transfers). Improvement: least transfers
  // among the devices that queue and overflow no more than the current one; the cut then shrinks with
  // every move, so the worklist cannot cycle.
  int64_t best_row = 0;
  double best_key = kInfinity, best_busy = 0.0;
  for (DeviceId k = 0; k < devices_; ++k) {
    const Option& o = options_scratch_[k];
    if (!o.allowed) continue;
    double key;
    if (improve) {
      const Option& cur = options_scratch_[current];
      if (k != current && (o.overflow > cur.overflow || o.queue > cur.queue)) continue;
      key = o.comm;
    } else {
      key = options_.load_weight * o.queue + o.comm;
    }
    // Ties: keep communication local, then the less busy device, then the better ranked one.
    const bool better =
        choice.device == kNone || o.overflow < choice.overflow ||
        (o.overflow == choice.overflow &&
         (key < best_key ||
          (key == best_key &&
           (row[k] > best_row ||
            (row[k] == best_row &&
             (o.busy < best_busy ||
              (o.busy == best_busy && device_rank_[k] < device_rank_[choice.device])))))));
    if (improve && o.overflow != choice.overflow && choice.device != kNone) {
      // In improvement mode overflow never exceeds the current one; compare on the key only.
      if (!(key < best_key)) continue;
    } else if (!better) {
      continue;
    }
    choice.device = k;
    choice.overflow = o.overflow;
    choice.penalty = key;
    best_key = key;
    best_row = row[k];
    best_busy = o.busy;
  }
  if (improve && current != kNone) choice.current_penalty = options_scratch_[current].comm;
  return choice;
}

absl::StatusOr<ClusterMapping> Mapper::Run() {
  ClusterMapping out;
  // Units with a pin or a kind restriction (groups: any member).
  op_restricted_.assign(n_, 0);
  compute_by_pos_.resize(n_);
  op_footprint_.resize(n_);
  cl_.resize(n_);
  for (int32_t i = 0; i < n_; ++i) {
    const OpId v = g_.op_at[i];
    op_restricted_[i] = model_.pinned_device[v] != kNone || model_.allowed_kind_mask[v] != 0;
    compute_by_pos_[i] = model_.compute_ns[v];
    op_footprint_[i] = model_.persistent_bytes[v] + model_.output_bytes[v] / 2;
    cl_[i] = clusters_.cluster_of[v];
  }
  for (int32_t g = 0; g < model_.num_groups(); ++g) {
    uint8_t any = 0;
    for (int32_t i = model_.group_offset[g]; i < model_.group_offset[g + 1]; ++i) {
      any |= op_restricted_[g_.pos_of[model_.group_member[i]]];
    }
    for (int32_t i = model_.group_offset[g]; i < model_.group_offset[g + 1]; ++i) {
      op_restricted_[g_.pos_of[model_.group_member[i]]] = any;
    }
  }

  // 1. Colocation groups into one cluster each: the cluster holding most of the group's work (ties:
  // the lowest id, i.e. a primary before a secondary). Not simply the lowest id: a group spanning the
  // graph (an RNN layer's cells with their weight update) would drag everything onto the critical
  // path's device.
  num_clusters_ = clusters_.num_clusters();
  num_primaries_ = clusters_.num_primaries;
  std::vector<std::pair<int32_t, int64_t>> shares;  // (cluster, work) of one group's members
  for (int32_t g = 0; g < model_.num_groups(); ++g) {
    shares.clear();
    for (int32_t i = model_.group_offset[g]; i < model_.group_offset[g + 1]; ++i) {
      const int32_t pos = g_.pos_of[model_.group_member[i]];
      shares.emplace_back(cl_[pos], g_.op_ns[pos] + 1);  // +1: zero-time members still count
    }
    std::sort(shares.begin(), shares.end());
    int32_t target = shares[0].first;
    int64_t best = -1;
    for (size_t i = 0; i < shares.size();) {
      size_t j = i;
      int64_t sum = 0;
      for (; j < shares.size() && shares[j].first == shares[i].first; ++j) sum += shares[j].second;
      if (sum > best) {
        best = sum;
        target = shares[i].first;
      }
      i = j;
    }
    for (int32_t i = model_.group_offset[g]; i < model_.group_offset[g + 1]; ++i) {
      cl_[g_.pos_of[model_.group_member[i]]] = target;
    }
  }
  BuildMembers();

  // Memory can bind only when the whole graph's bytes exceed some device's budget; then the mapping
  // keeps a time-resolved estimate (memory_timeline_), else its static one never overflows anyway.
  {
    int64_t total = 0;
    for (OpId v = 0; v < n_; ++v) {
      total += model_.persistent_bytes[v] + model_.output_bytes[v] + model_.temp_bytes[v];
    }
    for (DeviceId d = 0; d < devices_; ++d) memory_timeline_ |= total > Budget(d);
    memory_timeline_ &= options_.memory_timeline && devices_ > 1;
    // Where memory binds, the families, the work balance and the memory stage were measured with 8,192
    // whole buckets; the finer slots and the share changed them for the worse there (a 20K-op
    // transformer step at K = 2 and 0.45 of its peak no longer fit within 30 s; K = 8 +1.1 %), so
    // both are kept to steps where memory cannot bind (path_bound_).
    memory_can_bind_ = MemoryCanBind(model_);
  }

  // 2. Primaries onto devices (the critical path cut into chunks when it does not fit); constraint
  // splits.
  absl::Status status = MatchPrimaries();
  if (!status.ok()) return status;
  status = SplitForConstraints();
  if (!status.ok()) return status;
  cluster_device_.assign(num_clusters_, kNone);
  pos_device_.assign(n_, kNone);
  cluster_footprint_.assign(num_clusters_, 0);
  for (int32_t i = 0; i < n_; ++i) cluster_footprint_[cl_[i]] += op_footprint_[i];
  device_footprint_.assign(devices_, 0);

  mapped_first_.resize(num_clusters_, 0);

  // 3. Levels, spans, loads, communication table, memory timelines.
  PrepareSpans();
  if (memory_timeline_) {
    memory_.resize(devices_);
    const std::vector<int64_t> zeros(num_slots_, 0);
    for (DeviceId d = 0; d < devices_; ++d) memory_[d].Build(zeros);
    placed_charges_.assign(num_clusters_, {});
    overflow_before_.assign(devices_, -1);
    cluster_bytes_bound_.assign(num_clusters_, 0);
    for (int32_t i = 0; i < n_; ++i) {
      const OpId v = g_.op_at[i];
      int64_t bound = model_.persistent_bytes[v] + model_.output_bytes[v] + model_.temp_bytes[v];
      for (int64_t e = g_.in_offset[i]; e < g_.in_offset[i + 1]; ++e) bound += g_.in_bytes[e];
      for (int64_t e = g_.out_offset[i]; e < g_.out_offset[i + 1]; ++e) bound += g_.out_bytes[e];
      cluster_bytes_bound_[cl_[i]] += bound;
    }
  }
  PrepareLinks();
  loads_.Reset(devices_, num_slots_);
  load_scratch_.assign(devices_, 0);
  first_bucket_scratch_.assign(devices_, 0);
  last_bucket_scratch_.assign(devices_, 0);
  options_scratch_.assign(devices_, Option());
  row_scratch_.assign(devices_, 0);
  delay_scratch_.assign(devices_, 0);
  slack_row_ = options_.slack_aware && (critical_bound_ || options_.slack_beyond_critical_bound);
  slack_queue_ = slack_row_;
  critical_device_ = anchor_device_[0];
  critical_ns_ = 0;
  for (int32_t i = 0; i < n_; ++i) critical_ns_ = std::max(critical_ns_, tl_[i] + bl_[i]);
  // The first pass computes communication rows on demand (each cluster is evaluated once); the table
  // is built for the improvement pass, where clusters are re-evaluated after their neighbours move.
  dense_ = false;

  // Anchored clusters first; the critical path and its pieces never move, the other primaries may
  // (only the improvement pass moves them).
  std::vector<uint8_t> movable(num_clusters_, 1);
  for (int32_t c = 0; c < num_clusters_; ++c) {
    if (anchor_device_[c] == kNone || member_offset_[c] == member_offset_[c + 1]) continue;
    Place(c, anchor_device_[c]);
    movable[c] = c > 0 && c < num_primaries_;
  }
  std::vector<int32_t> order;
  order.reserve(num_clusters_);
  for (int32_t c = 0; c < num_clusters_; ++c) {
    if (anchor_device_[c] == kNone && member_offset_[c] != member_offset_[c + 1]) order.push_back(c);
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    if (mapped_first_[a] != mapped_first_[b]) return mapped_first_[a] > mapped_first_[b];
    return max_level_[a] != max_level_[b] ? max_level_[a] > max_level_[b] : a < b;
  });
  out.num_secondaries = static_cast<int32_t>(order.size());

  // 4. Each secondary onto the device with the least estimated delay (that has memory left).
  for (size_t i = 0; i < order.size(); ++i) {
    const int32_t c = order[i];
    Place(c, Evaluate(c).device);
    if ((i & 4095) == 4095) context_.Report("mapping", 0.1 + 0.05 * i / order.size());
  }

  // 5. Worklist improvement: re-evaluate with every neighbour placed; re-queue neighbours of moves.
  const int64_t rows = std::max(0, num_clusters_ - 1);
  if (options_.improvement_evaluations_per_cluster > 0 && options_.max_improvement_evaluations > 0 &&
      rows * devices_ <= options_.max_dense_table_entries) {
    dense_ = true;
    table_.assign(static_cast<size_t>(rows) * devices_, 0);
    for (int32_t v = 0; v < n_; ++v) {
      for (int64_t e = g_.out_offset[v]; e < g_.out_offset[v + 1]; ++e) {
        const int32_t y = g_.out_dst[e];
        const int32_t cv = cl_[v], cy = cl_[y];
        if (cv == cy) continue;
        if (HasRow(cv)) Row(cv)[pos_device_[y]] += g_.out_ns[e];
        if (HasRow(cy)) Row(cy)[pos_device_[v]] += g_.out_ns[e];
      }
    }
  }
  std::deque<int32_t> work;
  std::vector<uint8_t> queued(num_clusters_, 0);
  for (int32_t c = 0; c < num_clusters_; ++c) {
    if (anchor_device_[c] != kNone && movable[c] && cluster_device_[c] != kNone) work.push_back(c);
  }
  work.insert(work.end(), order.begin(), order.end());
  for (const int32_t c : work) queued[c] = 1;
  const int64_t budget =
      std::min(options_.max_improvement_evaluations,
               static_cast<int64_t>(options_.improvement_evaluations_per_cluster *
                                    static_cast<double>(work.size())));
  int64_t evaluations = 0;
  while (!work.empty() && evaluations < budget) {
    if ((evaluations & 1023) == 0 && context_.ShouldStop()) {
      out.time_limited = true;
      break;
    }
    const int32_t c = work.front();
    work.pop_front();
    queued[c] = 0;
    ++evaluations;
    const Choice choice = Evaluate(c, /*improve=*/true);
    const double margin =
        std::max(1.0, options_.min_relative_gain * static_cast<double>(compute_sum_[c]));
    if (choice.device == kNone || choice.device == cluster_device_[c] ||
        choice.penalty >= choice.current_penalty - margin) {
      continue;
    }
    Unplace(c);
    Place(c, choice.device);
    ++out.improvement_moves;
    for (int32_t i = member_offset_[c]; i < member_offset_[c + 1]; ++i) {
      const int32_t v = member_ops_[i];
      auto enqueue = [&](int32_t y) {
        const int32_t other = cl_[y];
        if (other != c && movable[other] && !queued[other]) {
          queued[other] = 1;
          work.push_back(other);
        }
      };
      for (int64_t e = g_.out_offset[v]; e < g_.out_offset[v + 1]; ++e) enqueue(g_.out_dst[e]);
      for (int64_t e = g_.in_offset[v]; e < g_.in_offset[v + 1]; ++e) enqueue(g_.in_src[e]);
    }
  }

  out.assignment.resize(n_);
  for (int32_t i = 0; i < n_; ++i) out.assignment[g_.op_at[i]] = cluster_device_[cl_[i]];
  out.primary_device = primary_device_;
  out.memory_timeline = memory_timeline_;
  out.critical_path_bounds_step = critical_bound_;
  return out;
}

}  // namespace

absl::StatusOr<ClusterMapping> MapClustersToDevices(const Model& model, const SlicingCosts& costs,
                                                    const LinearClusters& clusters,
                                                    const MappingOptions& options,
                                                    const SolveContext& context) {
  Mapper mapper(model, costs, clusters, options, context);
  return mapper.Run();
}

}  // namespace placement::engine::pardnn
