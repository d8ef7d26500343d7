#include "service/engine/pardnn/refinement.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "service/engine/partition/placement_rules.h"

namespace placement::engine::pardnn {
namespace {

struct Score {
  int64_t overflow = 0;
  int64_t makespan = 0;
};

Score ScoreOf(const Model& model, const SimResult& r) {
  Score s;
  s.makespan = r.makespan_ns;
  for (DeviceId d = 0; d < model.num_devices(); ++d) {
    s.overflow += std::max<int64_t>(0, r.peak_memory_bytes[d] - model.capacity_bytes[d]);
  }
  return s;
}

// A feasible assignment must stay feasible; an infeasible one must not overflow more.
bool Accept(const Score& next, const Score& current) {
  if (current.overflow == 0) return next.overflow == 0 && next.makespan < current.makespan;
  if (next.overflow != current.overflow) return next.overflow < current.overflow;
  return next.makespan < current.makespan;
}

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
      : model_(model), options_(options), context_(context), sim_(sim), rules_(model) {}

  RefinementResult Run(Assignment& assignment);

 private:
  void AddCandidate(int64_t gain, const OpId* ops, int32_t count, DeviceId target) {
    candidates_.push_back(Candidate{gain, static_cast<int32_t>(candidates_.size()),
                                    static_cast<int32_t>(candidate_ops_.size()), count, target});
    candidate_ops_.insert(candidate_ops_.end(), ops, ops + count);
  }
  void BuildCandidates(const std::vector<OpId>& path, const SimResult& r,
                       const Assignment& assignment);
  // Moves the candidate's ops (with their colocation groups); false when a constraint forbids it or
  // nothing would change. Old devices go to undo_.
  bool Apply(const Candidate& c, Assignment& assignment);
  void Undo(Assignment& assignment) {
    for (auto it = undo_.rbegin(); it != undo_.rend(); ++it) assignment[it->first] = it->second;
    undo_.clear();
  }
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
  std::vector<std::pair<OpId, DeviceId>> undo_;
  std::vector<std::pair<int32_t, DeviceId>> tried_;  // (first op's unit, target) this round
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
      for (DeviceId k = 0; k < devices; ++k) {
        if (k == db) continue;
        AddCandidate(gain, &b, 1, k);
        AddCandidate(gain / 2, &a, 1, k);
      }
    }
  }
  std::sort(candidates_.begin(), candidates_.end(), [](const Candidate& x, const Candidate& y) {
    return x.gain != y.gain ? x.gain > y.gain : x.order < y.order;
  });
}

bool Refiner::Apply(const Candidate& c, Assignment& assignment) {
  undo_.clear();
  for (int32_t i = c.first; i < c.first + c.count; ++i) {
    const OpId v = candidate_ops_[i];
    if (assignment[v] == c.target) continue;
    if (rules_.FixedDevice(v) != kNone || !rules_.Allowed(v, c.target)) {
      Undo(assignment);
      return false;
    }
    const int32_t g = model_.colocation_group[v];
    if (g == kNone) {
      undo_.emplace_back(v, assignment[v]);
      assignment[v] = c.target;
    } else {
      for (int32_t k = model_.group_offset[g]; k < model_.group_offset[g + 1]; ++k) {
        const OpId m = model_.group_member[k];
        undo_.emplace_back(m, assignment[m]);
        assignment[m] = c.target;
      }
    }
  }
  return !undo_.empty();
}

RefinementResult Refiner::Run(Assignment& assignment) {
  RefinementResult result;
  SimOptions sim_options;
  sim_options.compute_memory = true;
  const double budget = static_cast<double>(std::max<int64_t>(1, options_.max_simulations));
  auto report = [&](const Score& s) {
    const double fraction = std::min(1.0, static_cast<double>(result.simulations) / budget);
    context_.Report(options_.progress_stage,
                    options_.progress_from + (options_.progress_to - options_.progress_from) * fraction,
                    s.overflow == 0 ? s.makespan : 0);
  };

  // `r` is the simulator's result buffer: it describes the current assignment at the top of every
  // round (the last run was either the initial one or the accepted candidate).
  const SimResult& r = sim_.Run(assignment, sim_options);
  Score current = ScoreOf(model_, r);
  ++result.simulations;
  while (result.simulations < options_.max_simulations) {
    if (context_.ShouldStop()) {
      result.time_limited = true;
      break;
    }
    const std::vector<OpId> path = CriticalPath(model_, assignment, r);
    BuildCandidates(path, r, assignment);
    tried_.clear();
    bool accepted = false, exhausted = true;
    int32_t tried_count = 0;
    for (const Candidate& c : candidates_) {
      if (tried_count >= options_.max_candidates_per_round) break;
      if (result.simulations >= options_.max_simulations) {
        exhausted = false;
        break;
      }
      if (context_.ShouldStop()) {
        result.time_limited = true;
        exhausted = false;
        break;
      }
      const OpId head = candidate_ops_[c.first];
      const int32_t g = model_.colocation_group[head];
      const int32_t unit = g != kNone ? g : model_.num_groups() + head;
      if (c.count == 1) {
        const std::pair<int32_t, DeviceId> key(unit, c.target);
        if (std::find(tried_.begin(), tried_.end(), key) != tried_.end()) continue;
        tried_.push_back(key);
      }
      if (!Apply(c, assignment)) continue;
      ++tried_count;
      const Score next = ScoreOf(model_, sim_.Run(assignment, sim_options));
      ++result.simulations;
      if (Accept(next, current)) {
        current = next;
        ++result.moves;
        accepted = true;
        undo_.clear();
        report(current);
        break;
      }
      Undo(assignment);
    }
    if (!accepted) {
      result.local_optimum = exhausted && !result.time_limited;
      break;
    }
  }
  result.makespan_ns = current.makespan;
  result.overflow_bytes = current.overflow;
  report(current);
  return result;
}

}  // namespace

RefinementResult RefineAlongCriticalPath(const Model& model, const RefinementOptions& options,
                                         const SolveContext& context, Simulator& sim,
                                         Assignment& assignment) {
  Refiner refiner(model, options, context, sim);
  return refiner.Run(assignment);
}

}  // namespace placement::engine::pardnn
