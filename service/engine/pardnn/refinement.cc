#include "service/engine/pardnn/refinement.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "service/engine/partition/placement_rules.h"
#include "service/engine/repair/memory_repair.h"
#include "service/engine/sim/placement_score.h"

namespace placement::engine::pardnn {
namespace {

// Deterministic on every platform (no std::*_distribution).
class SplitMix {
 public:
  explicit SplitMix(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  uint64_t Below(uint64_t n) { return n == 0 ? 0 : Next() % n; }

 private:
  uint64_t state_;
};

struct Candidate {
  int64_t gain;     // time the critical path spends on what this move removes
  int32_t order;    // creation order (tie-break)
  int32_t first;    // ops in Refiner::candidate_ops_[first, first + count)
  int32_t count;
  DeviceId target;
};

class Refiner {
 public:
  Refiner(const Model& model, const RefinementOptions& options, const SolveContext& context,
          Simulator& sim)
      : model_(model),
        options_(options),
        context_(context),
        sim_(sim),
        rules_(model),
        rng_(context.seed ^ 0x9e3779b97f4a7c15ULL) {}

  RefinementResult Run(Assignment& assignment);
  RefinementResult Polish(Assignment& assignment);

 private:
  // The objective: the simulated score, plus with count_moves the weighted bytes the assignment moves
  // away from its previous placement (an O(V) pass, small beside the simulation it follows).
  PlacementScore Score(const SimResult& simulated, const Assignment& assignment) const {
    PlacementScore score = ScoreSimulation(model_, simulated);
    if (options_.count_moves) score.makespan_ns += MoveCost(assignment);
    return score;
  }
  int64_t MoveCost(const Assignment& assignment) const {
    return MoveCostNs(model_, assignment,
                      options_.move_weight_ns_per_byte < 0 ? model_.move_weight_ns_per_byte
                                                           : options_.move_weight_ns_per_byte);
  }
  // A move's score (Score's), its simulation counted in `result`. Where the current assignment fits,
  // the run may stop as soon as the move is certain not to beat it (StopUnlessBetter): such a run is
  // never accepted and never used for a critical path, and whether a move beats the current assignment
  // is decided exactly as by a full run, so the search and its answers are the same, only quicker.
  PlacementScore ScoreTrial(const SimOptions& base, const PlacementScore& current, const Assignment& trial,
                            RefinementResult* result) {
    const int64_t moves_ns = options_.count_moves ? MoveCost(trial) : 0;
    const SimResult& r =
        sim_.Run(trial, options_.stop_trials_early ? StopUnlessBetter(base, current, moves_ns) : base);
    ++result->simulations;
    result->stopped_early += r.stopped_early;
    PlacementScore score = ScoreSimulation(model_, r);
    score.makespan_ns += moves_ns;
    return score;
  }
  // The unit an op moves with: its colocation group (ids 0..groups-1), or itself (groups + op id).
  int32_t UnitOf(OpId v) const {
    const int32_t g = model_.colocation_group[v];
    return g != kNone ? g : model_.num_groups() + v;
  }
  void AddCandidate(int64_t gain, const OpId* ops, int32_t count, DeviceId target) {
    candidates_.push_back(Candidate{gain, static_cast<int32_t>(candidates_.size()),
                                    static_cast<int32_t>(candidate_ops_.size()), count, target});
    candidate_ops_.insert(candidate_ops_.end(), ops, ops + count);
  }
  void BuildCandidates(const std::vector<OpId>& path, const SimResult& r,
                       const Assignment& assignment);
  // Branch moves: where the path runs on one device through ops of several chains that only waited
  // for the device, not for each other, each chain of two or more ops to another device, whole.
  void AddBranchCandidates(const std::vector<OpId>& path, const SimResult& r,
                           const Assignment& assignment);
  // ... for one run path[begin, end) on device d.
  void AddChainsOfRun(const std::vector<OpId>& path, int32_t begin, int32_t end, DeviceId d,
                      const SimResult& r);
  // Branch moves (RefinementOptions::branch_moves): per op its position in the run being split, or -1;
  // union-find parents over run positions; (chain, op) pairs; one chain's ops.
  std::vector<int32_t> run_position_;
  std::vector<int32_t> chain_of_;
  std::vector<std::pair<int32_t, OpId>> chain_ops_;
  std::vector<OpId> chain_scratch_;
  // The allowed device other than `avoid` where v's edges cost the least transfer time (ties: the
  // least busy device in `r`); kNone when there is none.
  DeviceId QuietestNeighbourDevice(OpId v, DeviceId avoid, const SimResult& r,
                                   const Assignment& assignment) const;
  // Moves the candidate's ops (with their colocation groups); false when a constraint forbids it or
  // nothing would change. Old devices go to undo_ (appended to it with `keep_undo`, so that several
  // candidates can be undone together).
  bool Apply(const Candidate& c, Assignment& assignment, bool keep_undo = false) {
    return Apply(candidate_ops_.data() + c.first, c.count, c.target, assignment, keep_undo);
  }
  bool Apply(const OpId* ops, int32_t count, DeviceId target, Assignment& assignment, bool keep_undo);
  // Batched moves (RefinementOptions::batch_moves): true when a batch improved `current` (it stays
  // applied); otherwise the assignment is unchanged.
  bool TryBatch(Assignment& assignment, PlacementScore& current, RefinementResult* result);
  // Units holding the most bytes at each overflowing device's peak, towards the devices of their
  // neighbours and the device with the most room.
  void BuildMemoryCandidates(const SimResult& r, const Assignment& assignment);
  void Undo(Assignment& assignment) {
    for (auto it = undo_.rbegin(); it != undo_.rend(); ++it) assignment[it->first] = it->second;
    undo_.clear();
  }
  bool RepairAfterMove(Assignment& assignment, const PlacementScore& current, PlacementScore* next,
                       RefinementResult* result);
  void Perturb(const std::vector<OpId>& path, Assignment& assignment);
  // One round of the wide polish (PolishAlongCriticalPath) over the path's units from where the
  // last round left off: kImproved when a move of a path unit to another device improved `current`
  // (it stays applied and the simulator's result describes it; the next round starts after that
  // unit), kNoGain when none does, kCut when the budget or the context ended the round first.
  enum class WideRound { kImproved, kNoGain, kCut };
  WideRound TryWideMoves(const std::vector<OpId>& path, Assignment& assignment, PlacementScore& current,
                         const SimOptions& sim_options, RefinementResult* result);
  bool IsInput(OpId p, OpId v) const {
    for (EdgeId e = model_.in_begin(v); e < model_.in_end(v); ++e) {
      if (model_.in_src[e] == p) return true;
    }
    return false;
  }

  const Model& model_;
  const RefinementOptions& options_;
  const SolveContext& context_;
  Simulator& sim_;
  PlacementRules rules_;
  std::vector<Candidate> candidates_;
  std::vector<OpId> candidate_ops_;
  // candidates_[0, sorted_until_) are in their final order (BuildCandidates leaves them unordered).
  size_t sorted_until_ = 0;
  const Candidate& CandidateAt(size_t i);
  std::vector<std::pair<OpId, DeviceId>> undo_;
  std::vector<std::pair<int32_t, DeviceId>> tried_;  // (first op's unit, target) this round
  Assignment trial_;
  std::vector<int64_t> unit_bytes_;
  SplitMix rng_;
  // Batched moves: current batch size, the candidates of one batch, units claimed by it.
  int32_t batch_ = 0;
  std::vector<int32_t> selected_;
  std::vector<int32_t> claimed_;
  int32_t claim_stamp_ = 0;
  // The wide polish: the path position (modulo its units) the next call starts at.
  size_t wide_cursor_ = 0;
  std::vector<OpId> wide_units_;
};

void Refiner::BuildCandidates(const std::vector<OpId>& path, const SimResult& r,
                              const Assignment& assignment) {
  candidates_.clear();
  candidate_ops_.clear();
  const int32_t devices = model_.num_devices();
  const int32_t length = static_cast<int32_t>(path.size());
  for (int32_t i = 0; i < length; ++i) {
    const OpId b = path[i];
    const DeviceId db = assignment[b];
    // A faster allowed device for a path op.
    DeviceId fastest = db;
    for (DeviceId k = 0; k < devices; ++k) {
      if (model_.speed[k] > model_.speed[fastest] && rules_.Allowed(b, k)) fastest = k;
    }
    if (fastest != db) {
      AddCandidate(model_.OpTimeNs(b, db) - model_.OpTimeNs(b, fastest), &b, 1, fastest);
    }
    if (i == 0) continue;
    const OpId a = path[i - 1];
    const DeviceId da = assignment[a];
    if (da != db) {
      // The path crosses devices here: the transfer is what it pays.
      const int64_t gain = r.start_ns[b] - r.finish_ns[a];
      AddCandidate(gain, &b, 1, da);
      AddCandidate(gain, &a, 1, db);
      int32_t end = i;
      while (end < length && assignment[path[end]] == db) ++end;
      if (end - i > 1) AddCandidate(gain, path.data() + i, end - i, da);
      int32_t begin = i - 1;
      while (begin >= 0 && assignment[path[begin]] == da) --begin;
      if (i - 1 - begin > 1) AddCandidate(gain, path.data() + begin + 1, i - 1 - begin, db);
    } else if (!IsInput(a, b)) {
      // b waited for its device: the wait is start(b) - time its inputs were all there.
      int64_t ready = 0;
      for (EdgeId e = model_.in_begin(b); e < model_.in_end(b); ++e) {
        const OpId p = model_.in_src[e];
        ready = std::max(ready, r.finish_ns[p] +
                                    model_.TransferNs(assignment[p], db, model_.in_bytes[e]));
      }
      const int64_t gain = std::max<int64_t>(1, r.start_ns[b] - ready);
      if (options_.batch_moves > 1) {
        // Batches take one target per op: the device it exchanges the least transfer time with
        // where it now is not, ties to the least busy one.
        const DeviceId to_b = QuietestNeighbourDevice(b, db, r, assignment);
        const DeviceId to_a = QuietestNeighbourDevice(a, db, r, assignment);
        if (to_b != kNone) AddCandidate(gain, &b, 1, to_b);
        if (to_a != kNone) AddCandidate(gain / 2, &a, 1, to_a);
        continue;
      }
      for (DeviceId k = 0; k < devices; ++k) {
        if (k == db) continue;
        AddCandidate(gain, &b, 1, k);
        AddCandidate(gain / 2, &a, 1, k);
      }
    }
  }
  if (options_.branch_moves) AddBranchCandidates(path, r, assignment);
  sorted_until_ = 0;  // ordered on demand (CandidateAt)
}

void Refiner::AddBranchCandidates(const std::vector<OpId>& path, const SimResult& r,
                                  const Assignment& assignment) {
  const int32_t length = static_cast<int32_t>(path.size());
  for (int32_t end = 0; end < length;) {
    // The next maximal run [begin, end) of the path on one device.
    const int32_t begin = end;
    const DeviceId d = assignment[path[begin]];
    while (end < length && assignment[path[end]] == d) ++end;
    // A chain of two beside another op needs three (a single op is already a wait candidate).
    if (end - begin >= 3) AddChainsOfRun(path, begin, end, d, r);
  }
}

void Refiner::AddChainsOfRun(const std::vector<OpId>& path, int32_t begin, int32_t end, DeviceId d,
                             const SimResult& r) {
  const int32_t size = end - begin;
  // Chains: the run's ops joined by the data edges between them (union-find over run positions).
  run_position_.resize(model_.num_ops(), -1);
  for (int32_t i = begin; i < end; ++i) run_position_[path[i]] = i - begin;
  chain_of_.resize(size);
  for (int32_t i = 0; i < size; ++i) chain_of_[i] = i;
  auto find = [&](int32_t x) {
    while (chain_of_[x] != x) x = chain_of_[x] = chain_of_[chain_of_[x]];
    return x;
  };
  for (int32_t i = begin; i < end; ++i) {
    for (EdgeId e = model_.in_begin(path[i]); e < model_.in_end(path[i]); ++e) {
      const int32_t q = run_position_[model_.in_src[e]];
      if (q >= 0) chain_of_[find(q)] = find(i - begin);
    }
  }
  chain_ops_.clear();
  for (int32_t i = 0; i < size; ++i) chain_ops_.emplace_back(find(i), path[begin + i]);
  for (int32_t i = begin; i < end; ++i) run_position_[path[i]] = -1;
  // Each chain's ops together, in path order (stable), chains in the order their roots fall.
  std::stable_sort(chain_ops_.begin(), chain_ops_.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  if (chain_ops_.front().first == chain_ops_.back().first) return;  // one chain: nothing to split off
  // Batches take one target per candidate: the least busy other device.
  const int32_t devices = model_.num_devices();
  DeviceId least = kNone;
  for (DeviceId t = 0; t < devices; ++t) {
    if (t != d && (least == kNone || r.busy_ns[t] < r.busy_ns[least])) least = t;
  }
  for (size_t k = 0; k < chain_ops_.size();) {
    int64_t work = 0;
    chain_scratch_.clear();
    const int32_t chain = chain_ops_[k].first;
    for (; k < chain_ops_.size() && chain_ops_[k].first == chain; ++k) {
      chain_scratch_.push_back(chain_ops_[k].second);
      work += model_.OpTimeNs(chain_ops_[k].second, d);
    }
    if (chain_scratch_.size() < 2) continue;
    const double ranked = options_.branch_gain_fraction * static_cast<double>(work);
    const int64_t gain = std::max<int64_t>(1, static_cast<int64_t>(ranked));
    const int32_t count = static_cast<int32_t>(chain_scratch_.size());
    if (options_.batch_moves > 1) {
      if (least != kNone) AddCandidate(gain, chain_scratch_.data(), count, least);
      continue;
    }
    for (DeviceId t = 0; t < devices; ++t) {
      if (t != d) AddCandidate(gain, chain_scratch_.data(), count, t);
    }
  }
}

const Candidate& Refiner::CandidateAt(size_t i) {
  if (i >= sorted_until_) {
    // Largest gain first, ties in the order they were built: a strict order, so ordering a prefix
    // first and the rest later gives the order a full sort gives. A round mostly reads a few dozen
    // candidates of thousands (sorting them all was ~8 % of a refinement).
    auto by_gain = [](const Candidate& x, const Candidate& y) {
      return x.gain != y.gain ? x.gain > y.gain : x.order < y.order;
    };
    const size_t prefix = std::max<size_t>(256, 4 * (i + 1));
    if (sorted_until_ == 0 && prefix < candidates_.size()) {
      std::partial_sort(candidates_.begin(), candidates_.begin() + prefix, candidates_.end(), by_gain);
      sorted_until_ = prefix;
    } else {
      std::sort(candidates_.begin() + sorted_until_, candidates_.end(), by_gain);
      sorted_until_ = candidates_.size();
    }
  }
  return candidates_[i];
}

DeviceId Refiner::QuietestNeighbourDevice(OpId v, DeviceId avoid, const SimResult& r,
                                         const Assignment& assignment) const {
  DeviceId best = kNone;
  int64_t best_cost = 0;
  for (DeviceId k = 0; k < model_.num_devices(); ++k) {
    if (k == avoid || !rules_.Allowed(v, k) || rules_.FixedDevice(v) != kNone) continue;
    int64_t cost = 0;
    for (EdgeId e = model_.in_begin(v); e < model_.in_end(v); ++e) {
      const DeviceId d = assignment[model_.in_src[e]];
      if (d != k) cost += model_.TransferNs(d, k, model_.in_bytes[e]);
    }
    for (EdgeId e = model_.out_begin(v); e < model_.out_end(v); ++e) {
      const DeviceId d = assignment[model_.out_dst[e]];
      if (d != k) cost += model_.TransferNs(k, d, model_.out_bytes[e]);
    }
    if (best == kNone || cost < best_cost || (cost == best_cost && r.busy_ns[k] < r.busy_ns[best])) {
      best = k;
      best_cost = cost;
    }
  }
  return best;
}

void Refiner::BuildMemoryCandidates(const SimResult& r, const Assignment& assignment) {
  candidates_.clear();
  candidate_ops_.clear();
  const int32_t devices = model_.num_devices();
  const int32_t groups = model_.num_groups();
  // The device with the most room relative to its capacity.
  DeviceId roomiest = 0;
  for (DeviceId d = 1; d < devices; ++d) {
    if (model_.capacity_bytes[d] - r.peak_memory_bytes[d] >
        model_.capacity_bytes[roomiest] - r.peak_memory_bytes[roomiest]) {
      roomiest = d;
    }
  }
  unit_bytes_.resize(static_cast<size_t>(groups) + model_.num_ops());
  for (DeviceId d = 0; d < devices; ++d) {
    if (r.peak_memory_bytes[d] <= model_.capacity_bytes[d]) continue;
    const int64_t t = r.peak_time_ns[d];
    std::vector<std::pair<int64_t, int32_t>> holders;  // (bytes, unit)
    for (const MemoryInterval& iv : r.memory_intervals) {
      if (iv.device != d || iv.kind == MemoryInterval::Kind::kReceived) continue;
      if (!(iv.from_ns <= t && t < iv.until_ns)) continue;
      const int32_t u = UnitOf(iv.op);
      if (unit_bytes_[u] == 0) holders.emplace_back(0, u);
      unit_bytes_[u] += iv.bytes;
    }
    for (auto& [bytes, u] : holders) {
      bytes = unit_bytes_[u];
      unit_bytes_[u] = 0;
    }
    std::sort(holders.begin(), holders.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    if (holders.size() > 16) holders.resize(16);
    for (const auto& [bytes, u] : holders) {
      const OpId head = u < groups ? model_.group_member[model_.group_offset[u]] : u - groups;
      if (rules_.FixedDevice(head) != kNone) continue;
      // Targets: where its neighbours are (no new transfers there), and the roomiest device.
      std::vector<DeviceId> targets;
      auto add_target = [&](DeviceId k) {
        if (k != d && std::find(targets.begin(), targets.end(), k) == targets.end()) {
          targets.push_back(k);
        }
      };
      auto scan = [&](OpId v) {
        for (EdgeId e = model_.out_begin(v); e < model_.out_end(v); ++e) {
          add_target(assignment[model_.out_dst[e]]);
        }
        for (EdgeId e = model_.in_begin(v); e < model_.in_end(v); ++e) {
          add_target(assignment[model_.in_src[e]]);
        }
      };
      if (u < groups) {
        for (int32_t k = model_.group_offset[u]; k < model_.group_offset[u + 1]; ++k) {
          scan(model_.group_member[k]);
        }
      } else {
        scan(head);
      }
      add_target(roomiest);
      for (const DeviceId k : targets) AddCandidate(bytes, &head, 1, k);
    }
  }
  std::stable_sort(candidates_.begin(), candidates_.end(), [](const Candidate& x, const Candidate& y) {
    return x.gain != y.gain ? x.gain > y.gain : x.order < y.order;
  });
  sorted_until_ = candidates_.size();
}

bool Refiner::Apply(const OpId* ops, int32_t count, DeviceId target, Assignment& assignment,
                    bool keep_undo) {
  if (!keep_undo) undo_.clear();
  const size_t mark = undo_.size();
  for (int32_t i = 0; i < count; ++i) {
    const OpId v = ops[i];
    if (assignment[v] == target) continue;
    if (rules_.FixedDevice(v) != kNone || !rules_.Allowed(v, target)) {
      for (size_t k = undo_.size(); k > mark; --k) assignment[undo_[k - 1].first] = undo_[k - 1].second;
      undo_.resize(mark);
      return false;
    }
    const int32_t g = model_.colocation_group[v];
    if (g == kNone) {
      undo_.emplace_back(v, assignment[v]);
      assignment[v] = target;
    } else {
      for (int32_t k = model_.group_offset[g]; k < model_.group_offset[g + 1]; ++k) {
        const OpId m = model_.group_member[k];
        undo_.emplace_back(m, assignment[m]);
        assignment[m] = target;
      }
    }
  }
  return undo_.size() > mark;
}

bool Refiner::TryBatch(Assignment& assignment, PlacementScore& current, RefinementResult* result) {
  // The best-ranked candidates that touch pairwise different ops (a candidate's ops and their groups
  // are claimed; a later candidate touching a claimed op is skipped).
  claimed_.resize(static_cast<size_t>(model_.num_groups()) + model_.num_ops());
  ++claim_stamp_;
  selected_.clear();
  for (size_t i = 0; i < candidates_.size() && static_cast<int32_t>(selected_.size()) < batch_; ++i) {
    const Candidate& c = CandidateAt(i);
    bool free = true;
    for (int32_t k = c.first; k < c.first + c.count && free; ++k) {
      free = claimed_[UnitOf(candidate_ops_[k])] != claim_stamp_;
    }
    if (!free) continue;
    for (int32_t k = c.first; k < c.first + c.count; ++k) claimed_[UnitOf(candidate_ops_[k])] = claim_stamp_;
    selected_.push_back(static_cast<int32_t>(i));
  }
  SimOptions sim_options;
  sim_options.compute_memory = options_.memory_can_bind;
  for (size_t size = selected_.size(); size >= 2; size /= 2) {
    if (result->simulations >= options_.max_simulations || context_.ShouldStop()) return false;
    undo_.clear();
    int32_t applied = 0;
    for (size_t i = 0; i < size; ++i) applied += Apply(candidates_[selected_[i]], assignment, true);
    if (applied < 2) {
      Undo(assignment);
      continue;
    }
    const PlacementScore next = ScoreTrial(sim_options, current, assignment, result);
    if (next.BetterThan(current)) {
      current = next;
      result->moves += applied;
      undo_.clear();
      batch_ = std::min(options_.batch_moves, static_cast<int32_t>(size) * 2);
      return true;
    }
    Undo(assignment);
  }
  batch_ = std::max(2, batch_ / 2);
  return false;
}

bool Refiner::RepairAfterMove(Assignment& assignment, const PlacementScore& current, PlacementScore* next,
                              RefinementResult* result) {
  // A move that shortens the step but overflows memory may still pay off once something else makes
  // room: give the memory repair a few rounds on a copy.
  if (!options_.repair_after_move || !current.Fits() || next->Fits() ||
      next->makespan_ns >= current.makespan_ns) {
    return false;
  }
  trial_ = assignment;
  const RepairOutcome outcome = RepairFewRounds(model_, context_, options_.repair_rounds, trial_);
  result->simulations += outcome.rounds;
  if (!outcome.fits) return false;
  const int64_t repaired_ns =
      outcome.makespan_ns + (options_.count_moves ? MoveCost(trial_) : 0);
  if (repaired_ns >= current.makespan_ns) return false;
  assignment.swap(trial_);
  *next = PlacementScore{0, repaired_ns};
  return true;
}

void Refiner::Perturb(const std::vector<OpId>& path, Assignment& assignment) {
  // Move a random stretch of the critical path (1 to 4 ops, with their groups) to another device.
  const int32_t devices = model_.num_devices();
  if (path.empty() || devices < 2) return;
  const size_t begin = static_cast<size_t>(rng_.Below(path.size()));
  const size_t length = 1 + static_cast<size_t>(rng_.Below(4));
  const DeviceId from = assignment[path[begin]];
  DeviceId to = static_cast<DeviceId>(rng_.Below(devices - 1));
  if (to >= from) ++to;
  for (size_t i = begin; i < path.size() && i < begin + length; ++i) {
    const OpId v = path[i];
    if (rules_.FixedDevice(v) != kNone || !rules_.Allowed(v, to)) continue;
    const int32_t g = model_.colocation_group[v];
    if (g == kNone) {
      assignment[v] = to;
    } else {
      for (int32_t k = model_.group_offset[g]; k < model_.group_offset[g + 1]; ++k) {
        assignment[model_.group_member[k]] = to;
      }
    }
  }
}

Refiner::WideRound Refiner::TryWideMoves(const std::vector<OpId>& path, Assignment& assignment,
                                         PlacementScore& current, const SimOptions& sim_options,
                                         RefinementResult* result) {
  // The path's units, each once, in path order (a colocation group is moved whole by Apply).
  wide_units_.clear();
  claimed_.resize(static_cast<size_t>(model_.num_groups()) + model_.num_ops());
  ++claim_stamp_;
  for (const OpId v : path) {
    const int32_t unit = UnitOf(v);
    if (claimed_[unit] == claim_stamp_ || rules_.FixedDevice(v) != kNone) continue;
    claimed_[unit] = claim_stamp_;
    wide_units_.push_back(v);
  }
  if (wide_units_.empty()) return WideRound::kNoGain;
  const size_t units = wide_units_.size();
  for (size_t k = 0; k < units; ++k) {
    const size_t index = (wide_cursor_ + k) % units;
    const OpId v = wide_units_[index];
    const DeviceId from = assignment[v];
    for (DeviceId d = 0; d < model_.num_devices(); ++d) {
      if (d == from || !rules_.Allowed(v, d)) continue;
      if (result->simulations >= options_.max_simulations || context_.ShouldStop()) {
        wide_cursor_ = index;
        return WideRound::kCut;
      }
      if (!Apply(&v, 1, d, assignment, /*keep_undo=*/false)) continue;
      const PlacementScore next = ScoreTrial(sim_options, current, assignment, result);
      if (next.BetterThan(current)) {
        current = next;
        undo_.clear();
        wide_cursor_ = index + 1;
        return WideRound::kImproved;
      }
      Undo(assignment);
    }
  }
  wide_cursor_ = 0;
  return WideRound::kNoGain;
}

RefinementResult Refiner::Run(Assignment& assignment) {
  RefinementResult result;
  SimOptions sim_options;
  sim_options.compute_memory = options_.memory_can_bind;
  const double budget = static_cast<double>(std::max<int64_t>(1, options_.max_simulations));
  auto report = [&](const PlacementScore& s) {
    if (options_.progress_from < 0) return;
    const double fraction = std::min(1.0, static_cast<double>(result.simulations) / budget);
    context_.Report(options_.progress_stage,
                    options_.progress_from + (options_.progress_to - options_.progress_from) * fraction,
                    s.Fits() ? s.makespan_ns : 0);
  };
  auto out_of_budget = [&]() { return result.simulations >= options_.max_simulations; };

  // `r` is the simulator's result buffer: it describes the current assignment at the top of every
  // round (the last run was either the initial one or the accepted candidate).
  const SimResult& r = sim_.Run(assignment, sim_options);
  PlacementScore current = Score(r, assignment);
  ++result.simulations;
  batch_ = options_.batch_moves;
  Assignment best = assignment;
  PlacementScore best_score = current;
  int32_t restarts = 0, restarts_since_best = 0;
  while (!out_of_budget()) {
    if (context_.ShouldStop()) {
      result.time_limited = true;
      break;
    }
    if (!current.Fits()) {
      // Memory first: moves off the overflowing devices' peaks, judged by simulation (the estimates
      // of the memory repair have run out of ideas by now).
      SimOptions with_intervals = sim_options;
      with_intervals.record_memory_intervals = true;
      BuildMemoryCandidates(sim_.Run(assignment, with_intervals), assignment);
      ++result.simulations;
    } else {
      const std::vector<OpId> path = CriticalPath(model_, assignment, r);
      BuildCandidates(path, r, assignment);
      if (batch_ > 1 && TryBatch(assignment, current, &result)) {
        // `r` describes the accepted batch (the last simulation run).
        report(current);
        continue;
      }
      if (out_of_budget()) break;
    }
    tried_.clear();
    bool accepted = false, exhausted = true;
    int32_t tried_count = 0;
    for (size_t i = 0; i < candidates_.size(); ++i) {
      const Candidate& c = CandidateAt(i);
      if (tried_count >= options_.max_candidates_per_round) break;
      if (out_of_budget()) {
        exhausted = false;
        break;
      }
      if (context_.ShouldStop()) {
        result.time_limited = true;
        exhausted = false;
        break;
      }
      const int32_t unit = UnitOf(candidate_ops_[c.first]);
      if (c.count == 1) {
        const std::pair<int32_t, DeviceId> key(unit, c.target);
        if (std::find(tried_.begin(), tried_.end(), key) != tried_.end()) continue;
        tried_.push_back(key);
      }
      if (!Apply(c, assignment)) continue;
      ++tried_count;
      PlacementScore next = ScoreTrial(sim_options, current, assignment, &result);
      const bool repaired = RepairAfterMove(assignment, current, &next, &result);
      // The score's order keeps a feasible assignment feasible and never lets an infeasible one overflow more.
      if (repaired || next.BetterThan(current)) {
        current = next;
        ++result.moves;
        accepted = true;
        undo_.clear();
        if (repaired) {
          sim_.Run(assignment, sim_options);  // keep `r` describing the current assignment
          ++result.simulations;
        }
        report(current);
        break;
      }
      Undo(assignment);
    }
    if (accepted) continue;
    // A local optimum (or the budget ran out mid-round).
    if (current.BetterThan(best_score) || best.empty()) {
      best = assignment;
      best_score = current;
      restarts_since_best = 0;
    } else {
      ++restarts_since_best;
    }
    if (!exhausted || result.time_limited) break;
    result.local_optimum = true;
    // Iterated local search: kick the best assignment along its critical path and search again.
    if (restarts >= options_.max_restarts || out_of_budget() ||
        restarts_since_best > options_.max_restarts_without_improvement) {
      break;
    }
    ++restarts;
    assignment = best;
    const SimResult& base = sim_.Run(assignment, sim_options);
    ++result.simulations;
    Perturb(CriticalPath(model_, assignment, base), assignment);
    current = Score(sim_.Run(assignment, sim_options), assignment);
    ++result.simulations;
  }
  if (current.BetterThan(best_score)) {
    best = assignment;
    best_score = current;
  }
  assignment = best;
  result.restarts = restarts;
  result.makespan_ns = best_score.makespan_ns;
  result.overflow_bytes = best_score.overflow_bytes;
  report(best_score);
  return result;
}

RefinementResult Refiner::Polish(Assignment& assignment) {
  RefinementResult result;
  SimOptions sim_options;
  sim_options.compute_memory = options_.memory_can_bind;
  const SimResult& r = sim_.Run(assignment, sim_options);
  PlacementScore current = Score(r, assignment);
  ++result.simulations;
  // Where the assignment overflows, memory decides (the repair's and the search's moves); the polish
  // only shortens a step that fits.
  if (current.Fits() && model_.num_devices() > 1) {
    WideRound round;
    while ((round = TryWideMoves(CriticalPath(model_, assignment, r), assignment, current, sim_options,
                                 &result)) == WideRound::kImproved) {
      ++result.moves;
      if (options_.progress_from >= 0) {
        context_.Report(options_.progress_stage, options_.progress_from, current.makespan_ns);
      }
    }
    result.local_optimum = round == WideRound::kNoGain;
    result.time_limited = round == WideRound::kCut && context_.ShouldStop();
  } else {
    result.time_limited = context_.ShouldStop();
  }
  result.makespan_ns = current.makespan_ns;
  result.overflow_bytes = current.overflow_bytes;
  return result;
}

}  // namespace

int64_t SimulationBudget(double scale, double exponent, int64_t ops_plus_edges, int64_t min_simulations,
                         int64_t max_simulations) {
  const double size = static_cast<double>(std::max<int64_t>(1, ops_plus_edges));
  const double sims = scale * std::pow(1e4 / size, exponent);
  return std::clamp<int64_t>(static_cast<int64_t>(std::min(sims, 1e12)), min_simulations,
                             std::max(min_simulations, max_simulations));
}

RefinementResult RefineAlongCriticalPath(const Model& model, const RefinementOptions& options,
                                         const SolveContext& context, Simulator& sim,
                                         Assignment& assignment) {
  Refiner refiner(model, options, context, sim);
  return refiner.Run(assignment);
}

RefinementResult PolishAlongCriticalPath(const Model& model, const RefinementOptions& options,
                                         const SolveContext& context, Simulator& sim,
                                         Assignment& assignment) {
  Refiner refiner(model, options, context, sim);
  return refiner.Polish(assignment);
}

}  // namespace placement::engine::pardnn
