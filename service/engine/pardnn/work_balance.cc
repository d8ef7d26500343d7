#include "service/engine/pardnn/work_balance.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "service/engine/partition/placement_rules.h"
#include "service/engine/repair/memory_repair.h"
#include "service/engine/sim/placement_score.h"

namespace placement::engine::pardnn {
namespace {

// A unit wholly on the busiest device that may move to the least busy one.
struct MovableUnit {
  OpId first = kNone;   // its smallest op id (the tie-break)
  double rank = 0.0;    // compute time on the busy device per byte it brings (plus the floor)
  int64_t time_ns = 0;  // compute time on the busy device, every copy
};

class Balancer {
 public:
  Balancer(const Model& model, const WorkBalanceOptions& options, const SolveContext& context,
           Simulator& sim)
      : model_(model), options_(options), context_(context), sim_(sim), rules_(model) {
    sim_options_.compute_memory = options.memory_can_bind;
  }

  WorkBalanceResult Run(Assignment& assignment) {
    WorkBalanceResult result;
    PlacementScore current = Simulate(assignment, &result);
    while (result.simulations < options_.max_simulations) {
      if (context_.ShouldStop()) {
        result.time_limited = true;
        break;
      }
      // The last simulation ran `assignment`.
      const SimResult& r = *last_;
      DeviceId busiest = 0, idlest = 0;
      for (DeviceId d = 1; d < model_.num_devices(); ++d) {
        if (r.busy_ns[d] > r.busy_ns[busiest]) busiest = d;
        if (r.busy_ns[d] < r.busy_ns[idlest]) idlest = d;
      }
      const double busy = static_cast<double>(r.busy_ns[busiest]);
      if (busiest == idlest || busy < options_.work_bound_fraction * static_cast<double>(r.makespan_ns) ||
          static_cast<double>(r.busy_ns[idlest]) >= options_.imbalance_fraction * busy) {
        break;
      }
      const std::vector<MovableUnit> units = Candidates(assignment, busiest, idlest);
      if (units.empty()) break;
      // The best-ranked units worth half the difference of busy time (at least one).
      const int64_t wanted = (r.busy_ns[busiest] - r.busy_ns[idlest]) / 2;
      size_t count = 0;
      int64_t taken = 0;
      while (count < units.size() && (count == 0 || taken + units[count].time_ns <= wanted)) {
        taken += units[count++].time_ns;
      }
      bool accepted = false;
      for (; count >= 1 && result.simulations < options_.max_simulations; count /= 2) {
        if (context_.ShouldStop()) {
          result.time_limited = true;
          break;
        }
        trial_ = assignment;
        for (size_t i = 0; i < count; ++i) MoveUnit(units[i].first, idlest, trial_);
        PlacementScore next = Simulate(trial_, &result);
        repaired_ = false;
        const int64_t left = options_.max_simulations - result.simulations;
        if (!next.Fits() && current.Fits() && options_.repair_rounds > 0 && left > 0 &&
            next.makespan_ns < current.makespan_ns) {
          const RepairOutcome outcome = RepairFewRounds(
              model_, context_, static_cast<int32_t>(std::min<int64_t>(options_.repair_rounds, left)),
              trial_);
          result.simulations += outcome.rounds;
          next = PlacementScore{outcome.overflow_bytes, outcome.makespan_ns};
          repaired_ = true;
        }
        if (next.BetterThan(current)) {
          assignment.swap(trial_);
          current = next;
          ++result.batches;
          result.units_moved += static_cast<int64_t>(count);
          accepted = true;
          break;
        }
      }
      if (!accepted) break;
      // After a repair the last simulation was not the accepted assignment's (the loop ends anyway
      // when the budget is spent).
      if (repaired_) {
        if (result.simulations >= options_.max_simulations) break;
        Simulate(assignment, &result);
      }
    }
    result.makespan_ns = current.makespan_ns;
    result.overflow_bytes = current.overflow_bytes;
    return result;
  }

 private:
  PlacementScore Simulate(const Assignment& assignment, WorkBalanceResult* result) {
    ++result->simulations;
    last_ = &sim_.Run(assignment, sim_options_);
    return ScoreSimulation(model_, *last_);
  }

  int64_t Copies(OpId v) const {
    return model_.is_once(v) ? 1 : std::max<int64_t>(1, model_.plan.microbatches);
  }

  // Units wholly on `from` that may go to `to`, best rank first; those whose edges to ops on `from`
  // would cost more transfer time than the unit's own time are left out (moving them lengthens paths
  // more than it relieves `from`).
  std::vector<MovableUnit> Candidates(const Assignment& assignment, DeviceId from, DeviceId to) {
    std::vector<MovableUnit> units;
    seen_group_.assign(model_.num_groups(), 0);
    for (OpId v = 0; v < model_.num_ops(); ++v) {
      const int32_t g = model_.colocation_group[v];
      if (g != kNone) {
        if (seen_group_[g]) continue;
        seen_group_[g] = 1;
      }
      if (assignment[v] != from || rules_.FixedDevice(v) != kNone || !rules_.Allowed(v, to)) continue;
      members_.clear();
      if (g == kNone) {
        members_.push_back(v);
      } else {
        members_.assign(model_.group_member.begin() + model_.group_offset[g],
                        model_.group_member.begin() + model_.group_offset[g + 1]);
      }
      bool whole = true;
      int64_t time = 0, bytes = 0, transfer = 0;
      for (const OpId m : members_) {
        whole &= assignment[m] == from;
        time += model_.OpTimeNs(m, from) * Copies(m);
        bytes += model_.persistent_bytes[m] + model_.temp_bytes[m] + model_.output_bytes[m];
        for (EdgeId e = model_.in_begin(m); e < model_.in_end(m); ++e) {
          const OpId p = model_.in_src[e];
          if (assignment[p] == from && (g == kNone || model_.colocation_group[p] != g)) {
            transfer += model_.TransferNs(from, to, model_.in_bytes[e]) * Copies(m);
          }
        }
        for (EdgeId e = model_.out_begin(m); e < model_.out_end(m); ++e) {
          const OpId c = model_.out_dst[e];
          if (assignment[c] == from && (g == kNone || model_.colocation_group[c] != g)) {
            transfer += model_.TransferNs(to, from, model_.out_bytes[e]) * Copies(m);
          }
        }
      }
      if (!whole || time <= 0 || transfer > time) continue;
      units.push_back(MovableUnit{members_.front(),
                                  static_cast<double>(time) / static_cast<double>(bytes + options_.byte_floor),
                                  time});
    }
    std::stable_sort(units.begin(), units.end(), [](const MovableUnit& a, const MovableUnit& b) {
      return a.rank > b.rank;
    });
    return units;
  }

  void MoveUnit(OpId v, DeviceId to, Assignment& assignment) const {
    const int32_t g = model_.colocation_group[v];
    if (g == kNone) {
      assignment[v] = to;
      return;
    }
    for (int32_t i = model_.group_offset[g]; i < model_.group_offset[g + 1]; ++i) {
      assignment[model_.group_member[i]] = to;
    }
  }

  const Model& model_;
  const WorkBalanceOptions& options_;
  const SolveContext& context_;
  Simulator& sim_;
  const PlacementRules rules_;
  SimOptions sim_options_;
  const SimResult* last_ = nullptr;  // the simulator's result of the last run
  bool repaired_ = false;            // the last trial went through the memory repair
  Assignment trial_;
  std::vector<uint8_t> seen_group_;
  std::vector<OpId> members_;
};

}  // namespace

WorkBalanceResult BalanceWork(const Model& model, const WorkBalanceOptions& options,
                              const SolveContext& context, Simulator& sim, Assignment& assignment) {
  return Balancer(model, options, context, sim).Run(assignment);
}

}  // namespace placement::engine::pardnn
