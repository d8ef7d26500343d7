#include "service/engine/pardnn/cluster_mapping.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "service/engine/pardnn/fenwick_tree.h"
#include "service/engine/partition/placement_rules.h"

namespace placement::engine::pardnn {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

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
        n_(model.num_ops()),
        devices_(model.num_devices()) {}

  absl::StatusOr<ClusterMapping> Run();

 private:
  struct Choice {
    DeviceId device = kNone;
    double penalty = kInfinity;
    double current_penalty = kInfinity;
  };

  int32_t UnitOf(OpId v) const {
    const int32_t g = model_.colocation_group[v];
    return g != kNone ? g : model_.num_groups() + v;
  }
  void BuildMembers();
  absl::Status MatchPrimaries();
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
  Choice Evaluate(int32_t c);

  const Model& model_;
  const SlicingCosts& costs_;
  const LinearClusters& clusters_;
  const MappingOptions& options_;
  const SolveContext& context_;
  PlacementRules rules_;
  const int32_t n_;
  const int32_t devices_;

  std::vector<int32_t> cl_;  // cluster per op (after colocation pulls and splits)
  int32_t num_clusters_ = 0;
  int32_t num_primaries_ = 0;
  std::vector<int32_t> member_offset_;
  std::vector<OpId> member_ops_;
  std::vector<uint8_t> op_restricted_;  // the op's unit has a pin or a kind restriction
  std::vector<int32_t> restricted_offset_;  // per cluster: one op per restricted unit
  std::vector<OpId> restricted_ops_;
  std::vector<DeviceId> primary_device_;
  std::vector<DeviceId> cluster_device_;
  std::vector<int32_t> device_rank_;  // 0 = fastest and cheapest to talk to

  std::vector<int64_t> tl_, bl_;
  std::vector<int64_t> slot_time_;
  std::vector<int32_t> slot_of_;
  std::vector<int64_t> compute_sum_;  // per cluster, compute_ns
  std::vector<int64_t> own_load_;     // per cluster, load added to its device's tree
  std::vector<int32_t> begin_slot_, end_slot_;
  std::vector<int64_t> window_ns_;
  std::vector<double> max_level_;     // per cluster: max weighted level (processing order)

  DeviceSlotLoads loads_;
  bool dense_ = true;
  std::vector<int64_t> table_;
  std::vector<int64_t> row_scratch_;
  std::vector<double> link_factor_;  // devices x devices: pair's transfer time / mean transfer time
  std::vector<int64_t> load_scratch_;
  std::vector<DeviceId> nonzero_scratch_;
};

void Mapper::BuildMembers() {
  member_offset_.assign(num_clusters_ + 1, 0);
  for (OpId v = 0; v < n_; ++v) ++member_offset_[cl_[v] + 1];
  for (int32_t c = 0; c < num_clusters_; ++c) member_offset_[c + 1] += member_offset_[c];
  member_ops_.resize(n_);
  std::vector<int32_t> fill(member_offset_.begin(), member_offset_.end() - 1);
  // Keep the path order of the slicing where it still applies.
  for (const OpId v : clusters_.ops) member_ops_[fill[cl_[v]]++] = v;

  // One representative op per restricted unit of each cluster.
  restricted_offset_.assign(num_clusters_ + 1, 0);
  restricted_ops_.clear();
  std::vector<uint8_t> seen(model_.num_groups(), 0);
  for (int32_t c = 0; c < num_clusters_; ++c) {
    for (int32_t i = member_offset_[c]; i < member_offset_[c + 1]; ++i) {
      const OpId v = member_ops_[i];
      if (!op_restricted_[v]) continue;
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
      work[p] += costs_.op_ns[member_ops_[i]];
    }
  }
  std::vector<int32_t> order(num_primaries_);
  for (int32_t p = 0; p < num_primaries_; ++p) order[p] = p;
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return work[a] != work[b] ? work[a] > work[b] : a < b;
  });
  primary_device_.assign(num_primaries_, kNone);
  std::vector<uint8_t> taken(devices_, 0);
  for (const int32_t p : order) {
    if (member_offset_[p] == member_offset_[p + 1]) continue;  // emptied by colocation pulls
    DeviceId best = kNone;
    int64_t best_allowed = -1;
    for (const DeviceId d : by_rank) {
      if (taken[d]) continue;
      int64_t allowed = work[p];
      for (int32_t i = member_offset_[p]; i < member_offset_[p + 1]; ++i) {
        const OpId v = member_ops_[i];
        if (op_restricted_[v] && !rules_.Allowed(v, d)) allowed -= costs_.op_ns[v];
      }
      if (allowed > best_allowed) {
        best = d;
        best_allowed = allowed;
      }
    }
    if (best == kNone) break;  // more primaries than devices cannot happen; be safe
    taken[best] = 1;
    primary_device_[p] = best;
  }
  return absl::OkStatus();
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
      cl_[v] = unit_new_cluster[u];
    } else {
      for (int32_t i = model_.group_offset[g]; i < model_.group_offset[g + 1]; ++i) {
        cl_[model_.group_member[i]] = unit_new_cluster[u];
      }
    }
  };
  for (int32_t c = 0; c < num_clusters_; ++c) {
    if (restricted_offset_[c] == restricted_offset_[c + 1]) continue;
    if (c < num_primaries_) {
      const DeviceId d = primary_device_[c];
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
    BuildMembers();
  }
  // Every restricted unit must have some device.
  for (int32_t c = 0; c < num_clusters_; ++c) {
    if (c < num_primaries_ || restricted_offset_[c] == restricted_offset_[c + 1]) continue;
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
  ComputeClusteredLevels(model_, costs_, cl_, &tl_, &bl_);
  slot_time_.assign(tl_.begin(), tl_.end());
  std::sort(slot_time_.begin(), slot_time_.end());
  slot_time_.erase(std::unique(slot_time_.begin(), slot_time_.end()), slot_time_.end());
  slot_of_.resize(n_);
  int64_t graph_end = 0;
  for (OpId v = 0; v < n_; ++v) {
    slot_of_[v] = static_cast<int32_t>(
        std::lower_bound(slot_time_.begin(), slot_time_.end(), tl_[v]) - slot_time_.begin());
    graph_end = std::max(graph_end, tl_[v] + costs_.op_ns[v]);
  }
  auto slot_at = [&](int64_t t) {
    return static_cast<int32_t>(std::lower_bound(slot_time_.begin(), slot_time_.end(), t) -
                                slot_time_.begin());
  };
  compute_sum_.assign(num_clusters_, 0);
  own_load_.assign(num_clusters_, 0);
  begin_slot_.assign(num_clusters_, 0);
  end_slot_.assign(num_clusters_, 0);
  window_ns_.assign(num_clusters_, 0);
  max_level_.assign(num_clusters_, 0.0);
  for (int32_t c = 0; c < num_clusters_; ++c) {
    int64_t start = std::numeric_limits<int64_t>::max();
    int64_t end = 0, last_finish = 0;
    bool has_outside_child = false;
    for (int32_t i = member_offset_[c]; i < member_offset_[c + 1]; ++i) {
      const OpId v = member_ops_[i];
      compute_sum_[c] += model_.compute_ns[v];
      max_level_[c] = std::max(max_level_[c], static_cast<double>(tl_[v] + bl_[v]));
      // Earliest start: after the latest parent has finished (reference §8.8: max, not min).
      int64_t parents_done = 0;
      for (EdgeId e = model_.in_begin(v); e < model_.in_end(v); ++e) {
        const OpId p = model_.in_src[e];
        parents_done = std::max(parents_done, tl_[p] + costs_.op_ns[p]);
      }
      start = std::min(start, parents_done);
      last_finish = std::max(last_finish, tl_[v] + costs_.op_ns[v]);
      // Deadline: the earliest start of an outside child.
      int64_t child_start = std::numeric_limits<int64_t>::max();
      for (EdgeId e = model_.out_begin(v); e < model_.out_end(v); ++e) {
        const OpId ch = model_.out_dst[e];
        if (cl_[ch] != c) child_start = std::min(child_start, tl_[ch]);
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
    end_slot_[c] = slot_at(end);
    window_ns_[c] = std::max<int64_t>(0, end - start);
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
  for (int32_t i = member_offset_[c]; i < member_offset_[c + 1]; ++i) {
    const OpId v = member_ops_[i];
    for (EdgeId e = model_.out_begin(v); e < model_.out_end(v); ++e) {
      const OpId y = model_.out_dst[e];
      if (cl_[y] != c && cluster_device_[cl_[y]] != kNone) {
        row_scratch_[cluster_device_[cl_[y]]] += costs_.out_edge_ns[e];
      }
    }
    for (EdgeId e = model_.in_begin(v); e < model_.in_end(v); ++e) {
      const OpId y = model_.in_src[e];
      if (cl_[y] != c && cluster_device_[cl_[y]] != kNone) {
        row_scratch_[cluster_device_[cl_[y]]] += costs_.in_edge_ns[e];
      }
    }
  }
  return row_scratch_.data();
}

void Mapper::Place(int32_t c, DeviceId d) {
  cluster_device_[c] = d;
  int64_t load = 0;
  for (int32_t i = member_offset_[c]; i < member_offset_[c + 1]; ++i) {
    const OpId v = member_ops_[i];
    const int64_t t = model_.OpTimeNs(v, d);
    load += t;
    loads_.Add(d, slot_of_[v], t);
    if (!dense_) continue;
    for (EdgeId e = model_.out_begin(v); e < model_.out_end(v); ++e) {
      const int32_t other = cl_[model_.out_dst[e]];
      if (other != c && HasRow(other)) Row(other)[d] += costs_.out_edge_ns[e];
    }
    for (EdgeId e = model_.in_begin(v); e < model_.in_end(v); ++e) {
      const int32_t other = cl_[model_.in_src[e]];
      if (other != c && HasRow(other)) Row(other)[d] += costs_.in_edge_ns[e];
    }
  }
  own_load_[c] = load;
}

void Mapper::Unplace(int32_t c) {
  const DeviceId d = cluster_device_[c];
  for (int32_t i = member_offset_[c]; i < member_offset_[c + 1]; ++i) {
    const OpId v = member_ops_[i];
    loads_.Add(d, slot_of_[v], -model_.OpTimeNs(v, d));
    if (!dense_) continue;
    for (EdgeId e = model_.out_begin(v); e < model_.out_end(v); ++e) {
      const int32_t other = cl_[model_.out_dst[e]];
      if (other != c && HasRow(other)) Row(other)[d] -= costs_.out_edge_ns[e];
    }
    for (EdgeId e = model_.in_begin(v); e < model_.in_end(v); ++e) {
      const int32_t other = cl_[model_.in_src[e]];
      if (other != c && HasRow(other)) Row(other)[d] -= costs_.in_edge_ns[e];
    }
  }
  own_load_[c] = 0;
  cluster_device_[c] = kNone;
}

Mapper::Choice Mapper::Evaluate(int32_t c) {
  Choice choice;
  const DeviceId current = cluster_device_[c];
  loads_.RangeSums(begin_slot_[c], end_slot_[c], load_scratch_.data());
  if (current != kNone) load_scratch_[current] -= own_load_[c];
  const int64_t* row = CommRow(c);
  nonzero_scratch_.clear();
  for (DeviceId j = 0; j < devices_; ++j) {
    if (row[j] != 0) nonzero_scratch_.push_back(j);
  }
  const double window = static_cast<double>(window_ns_[c]);
  int64_t best_row = 0;
  double best_busy = 0.0;
  for (DeviceId k = 0; k < devices_; ++k) {
    if (!ClusterAllowed(c, k)) continue;
    const double work = static_cast<double>(compute_sum_[c]) / model_.speed[k];
    const double busy = static_cast<double>(load_scratch_[k]) + work;
    double penalty = std::max(0.0, busy - window);
    const double* factor = link_factor_.data() + static_cast<size_t>(k);
    for (const DeviceId j : nonzero_scratch_) {
      if (j != k) penalty += static_cast<double>(row[j]) * factor[static_cast<size_t>(j) * devices_];
    }
    if (k == current) choice.current_penalty = penalty;
    // Ties: keep communication local, then the less busy device, then the better ranked one.
    const bool better =
        choice.device == kNone || penalty < choice.penalty ||
        (penalty == choice.penalty &&
         (row[k] > best_row ||
          (row[k] == best_row &&
           (busy < best_busy ||
            (busy == best_busy && device_rank_[k] < device_rank_[choice.device])))));
    if (better) {
      choice.device = k;
      choice.penalty = penalty;
      best_row = row[k];
      best_busy = busy;
    }
  }
  return choice;
}

absl::StatusOr<ClusterMapping> Mapper::Run() {
  ClusterMapping out;
  // Units with a pin or a kind restriction (groups: any member).
  op_restricted_.assign(n_, 0);
  for (OpId v = 0; v < n_; ++v) {
    op_restricted_[v] = model_.pinned_device[v] != kNone || model_.allowed_kind_mask[v] != 0;
  }
  for (int32_t g = 0; g < model_.num_groups(); ++g) {
    uint8_t any = 0;
    for (int32_t i = model_.group_offset[g]; i < model_.group_offset[g + 1]; ++i) {
      any |= op_restricted_[model_.group_member[i]];
    }
    for (int32_t i = model_.group_offset[g]; i < model_.group_offset[g + 1]; ++i) {
      op_restricted_[model_.group_member[i]] = any;
    }
  }

  // 1. Colocation groups into one cluster each: the lowest id holding a member.
  cl_ = clusters_.cluster_of;
  num_clusters_ = clusters_.num_clusters();
  num_primaries_ = clusters_.num_primaries;
  for (int32_t g = 0; g < model_.num_groups(); ++g) {
    int32_t target = std::numeric_limits<int32_t>::max();
    for (int32_t i = model_.group_offset[g]; i < model_.group_offset[g + 1]; ++i) {
      target = std::min(target, cl_[model_.group_member[i]]);
    }
    for (int32_t i = model_.group_offset[g]; i < model_.group_offset[g + 1]; ++i) {
      cl_[model_.group_member[i]] = target;
    }
  }
  BuildMembers();

  // 2. Primaries onto devices; constraint splits.
  absl::Status status = MatchPrimaries();
  if (!status.ok()) return status;
  status = SplitForConstraints();
  if (!status.ok()) return status;
  cluster_device_.assign(num_clusters_, kNone);

  // 3. Levels, spans, loads, communication table.
  PrepareSpans();
  PrepareLinks();
  loads_.Reset(devices_, static_cast<int32_t>(slot_time_.size()));
  load_scratch_.assign(devices_, 0);
  row_scratch_.assign(devices_, 0);
  const int64_t rows = std::max(0, num_clusters_ - 1);
  dense_ = rows * devices_ <= options_.max_dense_table_entries;
  if (dense_) table_.assign(static_cast<size_t>(rows) * devices_, 0);

  for (int32_t p = 0; p < num_primaries_; ++p) {
    if (primary_device_[p] != kNone && member_offset_[p] != member_offset_[p + 1]) {
      Place(p, primary_device_[p]);
    }
  }
  std::vector<int32_t> order;
  order.reserve(num_clusters_);
  for (int32_t c = num_primaries_; c < num_clusters_; ++c) {
    if (member_offset_[c] != member_offset_[c + 1]) order.push_back(c);
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return max_level_[a] != max_level_[b] ? max_level_[a] > max_level_[b] : a < b;
  });
  out.num_secondaries = static_cast<int32_t>(order.size());

  // 4. Each secondary onto the device with the least estimated delay.
  for (size_t i = 0; i < order.size(); ++i) {
    const int32_t c = order[i];
    Place(c, Evaluate(c).device);
    if ((i & 4095) == 4095) context_.Report("mapping", 0.1 + 0.05 * i / order.size());
  }

  // 5. Worklist improvement: re-evaluate with every neighbour placed; re-queue neighbours of moves.
  const int64_t budget = static_cast<int64_t>(options_.improvement_evaluations_per_cluster *
                                              static_cast<double>(order.size() + num_primaries_));
  std::deque<int32_t> work;
  std::vector<uint8_t> queued(num_clusters_, 0);
  for (int32_t p = 1; p < num_primaries_; ++p) {
    if (cluster_device_[p] != kNone) work.push_back(p);
  }
  work.insert(work.end(), order.begin(), order.end());
  for (const int32_t c : work) queued[c] = 1;
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
    const Choice choice = Evaluate(c);
    const double margin =
        std::max(1.0, options_.min_relative_gain * static_cast<double>(compute_sum_[c]));
    if (choice.device == cluster_device_[c] || choice.penalty >= choice.current_penalty - margin) {
      continue;
    }
    Unplace(c);
    Place(c, choice.device);
    ++out.improvement_moves;
    for (int32_t i = member_offset_[c]; i < member_offset_[c + 1]; ++i) {
      const OpId v = member_ops_[i];
      auto enqueue = [&](OpId y) {
        const int32_t other = cl_[y];
        if (other != c && HasRow(other) && !queued[other]) {
          queued[other] = 1;
          work.push_back(other);
        }
      };
      for (EdgeId e = model_.out_begin(v); e < model_.out_end(v); ++e) enqueue(model_.out_dst[e]);
      for (EdgeId e = model_.in_begin(v); e < model_.in_end(v); ++e) enqueue(model_.in_src[e]);
    }
  }

  out.assignment.resize(n_);
  for (OpId v = 0; v < n_; ++v) out.assignment[v] = cluster_device_[cl_[v]];
  out.primary_device = primary_device_;
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
