#include "service/engine/replace/replacement.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "service/engine/baselines/m_etf.h"
#include "service/engine/pardnn/refinement.h"
#include "service/engine/partition/placement_rules.h"
#include "service/engine/repair/memory_repair.h"
#include "service/engine/sim/constraints.h"
#include "service/engine/sim/placement_score.h"
#include "service/engine/sim/simulator.h"

namespace placement::engine {
namespace {

// The ops of v's unit: its colocation group's members, or v alone.
std::pair<const OpId*, const OpId*> UnitOf(const Model& model, const OpId& v) {
  const int32_t g = model.colocation_group[v];
  if (g == kNone) return {&v, &v + 1};
  return {model.group_member.data() + model.group_offset[g],
          model.group_member.data() + model.group_offset[g + 1]};
}

// Builds the seed in two passes: units that keep their previous device, then the rest, greedily.
class SeedBuilder {
 public:
  // How the units to re-home are placed: `first` kNone = unit by unit (greedy); else in topological
  // order, the units until `first_ns` of compute has gone to `first` go there, the rest to `second`
  // (first == second: a departed device's work handed to one device whole), each where allowed,
  // else greedily.
  struct Split {
    DeviceId first = kNone;
    DeviceId second = kNone;
    int64_t first_ns = 0;
  };
  SeedBuilder(const Model& model, const PlacementRules& rules, Split split)
      : model_(model),
        rules_(rules),
        split_(split),
        assignment_(model.num_ops(), kNone),
        queued_ns_(model.num_devices(), 0),
        persistent_(model.num_devices(), 0) {}

  Assignment Build() {
    PlaceKept();
    for (const OpId v : model_.topo_order) {
      if (assignment_[v] == kNone) Place(v, Rehome(v));
    }
    return std::move(assignment_);
  }

  // The first pass alone: kNone for the ops to re-home.
  Assignment KeptOnly() {
    PlaceKept();
    return std::move(assignment_);
  }

 private:
  void PlaceKept() {
    for (OpId v = 0; v < model_.num_ops(); ++v) {
      if (assignment_[v] != kNone) continue;
      const DeviceId kept = KeptDevice(v);
      if (kept != kNone) Place(v, kept);
    }
  }

  // Where v's unit stays: its pin, else the previous device (still in the cluster) holding most of
  // the unit's persistent bytes (a group split across devices before is joined there; ties: the
  // lower id) when the whole unit may run there; kNone = the unit must be re-homed.
  DeviceId KeptDevice(OpId v) {
    const DeviceId fixed = rules_.FixedDevice(v);
    if (fixed != kNone) return fixed;
    const auto [begin, end] = UnitOf(model_, v);
    TallyPreviousDevices(model_, begin, end, /*per_op=*/1, tally_);  // ops without state vote too
    DeviceId best = kNone;
    int64_t best_weight = -1;
    for (const auto& [device, weight] : tally_) {
      if (!rules_.Allowed(v, device)) continue;
      if (weight > best_weight || (weight == best_weight && device < best)) {
        best = device;
        best_weight = weight;
      }
    }
    return best;
  }

  // The allowed device where v's unit adds the least to the step, roughly: compute already queued
  // there plus the unit's own time there plus the transfers from and to neighbours already placed
  // on other devices; among the devices whose persistent bytes still fit, else the one least over.
  DeviceId Rehome(OpId v) {
    const auto [begin, end] = UnitOf(model_, v);
    if (split_.first != kNone) {
      const DeviceId target = split_done_ns_ < split_.first_ns ? split_.first : split_.second;
      for (const OpId* m = begin; m != end; ++m) split_done_ns_ += model_.compute_ns[*m];
      if (rules_.Allowed(v, target)) return target;
    }
    int64_t unit_persistent = 0;
    for (const OpId* m = begin; m != end; ++m) unit_persistent += model_.persistent_bytes[*m];
    DeviceId best = kNone;
    bool best_fits = false;
    int64_t best_cost = 0, best_over = 0;
    for (DeviceId d = 0; d < model_.num_devices(); ++d) {
      if (!rules_.Allowed(v, d)) continue;
      int64_t cost = queued_ns_[d];
      for (const OpId* m = begin; m != end; ++m) {
        cost += model_.OpTimeNs(*m, d);
        for (EdgeId e = model_.in_begin(*m); e < model_.in_end(*m); ++e) {
          const DeviceId from = assignment_[model_.in_src[e]];
          if (from != kNone && from != d) cost += model_.TransferNs(from, d, model_.in_bytes[e]);
        }
        for (EdgeId e = model_.out_begin(*m); e < model_.out_end(*m); ++e) {
          const DeviceId to = assignment_[model_.out_dst[e]];
          if (to != kNone && to != d) cost += model_.TransferNs(d, to, model_.out_bytes[e]);
        }
      }
      const int64_t over =
          std::max<int64_t>(0, persistent_[d] + unit_persistent - model_.capacity_bytes[d]);
      const bool fits = over == 0;
      const bool better = best == kNone || (fits && !best_fits) ||
                          (fits == best_fits &&
                           (fits ? cost < best_cost
                                 : (over < best_over || (over == best_over && cost < best_cost))));
      if (better) {
        best = d;
        best_fits = fits;
        best_cost = cost;
        best_over = over;
      }
    }
    // Validation guarantees every unit an allowed device; the first one is a safe fallback
    // regardless.
    return best != kNone ? best : rules_.FirstAllowedFrom(v, 0);
  }

  void Place(OpId v, DeviceId d) {
    const auto [begin, end] = UnitOf(model_, v);
    for (const OpId* m = begin; m != end; ++m) {
      assignment_[*m] = d;
      queued_ns_[d] += model_.OpTimeNs(*m, d);
      persistent_[d] += model_.persistent_bytes[*m];
    }
  }

  const Model& model_;
  const PlacementRules& rules_;
  const Split split_;
  int64_t split_done_ns_ = 0;  // compute of the units re-homed so far
  Assignment assignment_;
  std::vector<int64_t> queued_ns_;   // per device: compute of the ops placed so far
  std::vector<int64_t> persistent_;  // per device: persistent bytes of the ops placed so far
  std::vector<std::pair<DeviceId, int64_t>> tally_;
};

bool SameLink(const LinkCost& x, const LinkCost& y) {
  return x.bandwidth_bytes_per_second == y.bandwidth_bytes_per_second &&
         x.latency_ns == y.latency_ns;
}

// True when devices a and b are alike for every op and every transfer: same kind, speed and capacity,
// and the same links to and from every other device (and between them both ways), so that any
// renaming within such classes leaves every op's time, kinds, room and every transfer's time as they
// were: the renamed answer simulates exactly as the member's. (Alike devices on different hosts are
// not interchangeable: swapping one pair across hosts would split a member's schedule over slow
// links.)
bool Interchangeable(const Model& model, DeviceId a, DeviceId b) {
  if (model.device_kind[a] != model.device_kind[b] || model.speed[a] != model.speed[b] ||
      model.capacity_bytes[a] != model.capacity_bytes[b]) {
    return false;
  }
  if (a == b) return true;
  if (!SameLink(model.Link(a, b), model.Link(b, a))) return false;
  for (DeviceId c = 0; c < model.num_devices(); ++c) {
    if (c == a || c == b) continue;
    if (!SameLink(model.Link(a, c), model.Link(b, c)) ||
        !SameLink(model.Link(c, a), model.Link(c, b))) {
      return false;
    }
  }
  return true;
}

// Classes of interchangeable devices, by comparing each device with the first device of every class
// so far: O(D × classes × D) once per re-placement, instead of a comparison per pair that the
// renaming asks about (D up to 1024).
std::vector<int32_t> InterchangeableClasses(const Model& model) {
  std::vector<int32_t> class_of(model.num_devices(), kNone);
  std::vector<DeviceId> first_of_class;
  for (DeviceId d = 0; d < model.num_devices(); ++d) {
    for (size_t c = 0; c < first_of_class.size() && class_of[d] == kNone; ++c) {
      if (Interchangeable(model, first_of_class[c], d)) class_of[d] = static_cast<int32_t>(c);
    }
    if (class_of[d] == kNone) {
      class_of[d] = static_cast<int32_t>(first_of_class.size());
      first_of_class.push_back(d);
    }
  }
  return class_of;
}

// Every op's persistent bytes, in every replica group (the units of BytesMoved).
double TotalPersistentBytes(const Model& model) {
  double bytes = 0;
  for (OpId v = 0; v < model.num_ops(); ++v) bytes += static_cast<double>(model.persistent_bytes[v]);
  return bytes * std::max(1, model.plan.data_parallel);
}

// A fresh answer says which ops share a device, not which device: rename its devices (among
// interchangeable ones, `class_of`) so that as much state as possible stays where it was — greedily, the pair
// (answer's device, previous device) sharing the most persistent bytes (+ 1 per op) first; ties by
// ids. The renamed answer is kept only when every op may still run where it lands (pins).
void RenameTowardsPrevious(const Model& model, const PlacementRules& rules,
                           const std::vector<int32_t>& class_of, Assignment& assignment) {
  const int32_t n = model.num_devices();
  std::vector<int64_t> overlap(static_cast<size_t>(n) * n, 0);
  for (OpId v = 0; v < model.num_ops(); ++v) {
    const DeviceId previous = model.PreviousDeviceOf(v);
    if (previous >= 0)
      overlap[static_cast<size_t>(assignment[v]) * n + previous] += model.persistent_bytes[v] + 1;
  }
  // The greedy matching in one pass over the sharing pairs sorted by (overlap descending, a, b): each
  // pair taken is the largest one both of whose ends are still free, as a rescan per match would find,
  // in O(P log P) for P pairs instead of O(D³) (D up to 1024).
  struct Pair {
    int64_t overlap;
    DeviceId a, b;
  };
  std::vector<Pair> pairs;
  for (DeviceId a = 0; a < n; ++a) {
    for (DeviceId b = 0; b < n; ++b) {
      const int64_t o = overlap[static_cast<size_t>(a) * n + b];
      if (o > 0 && class_of[a] == class_of[b]) pairs.push_back({o, a, b});
    }
  }
  std::sort(pairs.begin(), pairs.end(), [](const Pair& x, const Pair& y) {
    if (x.overlap != y.overlap) return x.overlap > y.overlap;
    return x.a != y.a ? x.a < y.a : x.b < y.b;
  });
  std::vector<DeviceId> rename(n, kNone), taken_by(n, kNone);
  for (const Pair& pair : pairs) {
    if (rename[pair.a] != kNone || taken_by[pair.b] != kNone) continue;
    rename[pair.a] = pair.b;
    taken_by[pair.b] = pair.a;
  }
  // The rest: itself when free, else the first free interchangeable device (one always exists: the
  // interchangeable classes have as many free names as unnamed members).
  for (DeviceId a = 0; a < n; ++a) {
    if (rename[a] != kNone) continue;
    DeviceId to = taken_by[a] == kNone ? a : kNone;
    for (DeviceId b = 0; b < n && to == kNone; ++b) {
      if (taken_by[b] == kNone && class_of[a] == class_of[b]) to = b;
    }
    if (to == kNone) return;
    rename[a] = to;
    taken_by[to] = a;
  }
  Assignment renamed(assignment.size());
  for (OpId v = 0; v < model.num_ops(); ++v) {
    renamed[v] = rename[assignment[v]];
    if (!rules.Allowed(v, renamed[v])) return;
  }
  assignment.swap(renamed);
}

// One unit the pull-back may return to its previous device.
struct PullBackMove {
  OpId unit = kNone;         // any op of the unit
  DeviceId previous = kNone;  // where it goes back to
  int64_t bytes_saved = 0;    // persistent bytes that then no longer move
};

// The units worth returning: not on their previous device (the one KeptDevice would choose: the
// surviving device holding most of the unit's state, allowed for the whole unit), and moving back
// saves persistent bytes. Largest saving first; ties by op id.
std::vector<PullBackMove> PullBackMoves(const Model& model, const PlacementRules& rules,
                                        const Assignment& assignment) {
  std::vector<PullBackMove> moves;
  std::vector<char> seen(model.num_ops(), 0);
  std::vector<std::pair<DeviceId, int64_t>> tally;
  for (OpId v = 0; v < model.num_ops(); ++v) {
    if (seen[v]) continue;
    const auto [begin, end] = UnitOf(model, v);
    for (const OpId* m = begin; m != end; ++m) seen[*m] = 1;
    if (rules.FixedDevice(v) != kNone) continue;
    const DeviceId current = assignment[v];
    TallyPreviousDevices(model, begin, end, /*per_op=*/0, tally);
    PullBackMove best;
    for (const auto& [device, bytes] : tally) {
      if (device == current || !rules.Allowed(v, device)) continue;
      if (bytes > best.bytes_saved || (bytes == best.bytes_saved && device < best.previous)) {
        best = {v, device, bytes};
      }
    }
    // Ops of the unit already on `current` by their previous placement would move instead.
    if (best.unit != kNone) {
      for (const OpId* m = begin; m != end; ++m) {
        if (model.PreviousDeviceOf(*m) == current) best.bytes_saved -= model.persistent_bytes[*m];
      }
      if (best.bytes_saved > 0) moves.push_back(best);
    }
  }
  std::stable_sort(moves.begin(), moves.end(), [](const PullBackMove& a, const PullBackMove& b) {
    return a.bytes_saved > b.bytes_saved;
  });
  return moves;
}

// The pull-back (step 4 of replacement.h): the search only moves what the critical path touches, so
// an answer that started from a fresh member's schedule keeps moving state the step does not need
// moved. Return units to their previous device while the objective (step + move cost, overflow
// first) gets no worse: a group test — all candidates at once, and where that is worse, each half in
// turn, down to single units — so that a well-placed answer costs one simulation and k units that
// must stay cost O(k log n). Ends at `max_simulations` or when the context says stop.
int64_t PullBack(const Model& model, const PlacementRules& rules, const SolveContext& context,
                 double move_weight_ns_per_byte, int64_t max_simulations, double step_tolerance,
                 int64_t step_cap, Simulator& simulator, Assignment& assignment) {
  const std::vector<PullBackMove> moves = PullBackMoves(model, rules, assignment);
  if (moves.empty() || max_simulations <= 0) return 0;
  const SimOptions scoring = ScoringSimOptions(model);
  // step: the simulated score; objective: the same with the move cost added to its makespan.
  auto score = [&](const Assignment& a, PlacementScore& step, PlacementScore& objective) {
    step = ScoreSimulation(model, simulator.Run(a, scoring));
    objective = step;
    objective.makespan_ns += MoveCostNs(model, a, move_weight_ns_per_byte);
  };
  PlacementScore step, objective;
  score(assignment, step, objective);
  // Never above `step_cap` (the start's step, which the answer's step must not exceed).
  const double step_bound = std::min(static_cast<double>(step.makespan_ns) * (1.0 + step_tolerance),
                                     static_cast<double>(step_cap));
  int64_t simulations = 1;
  std::vector<DeviceId> undo;
  // Ranges [begin, end) of `moves` still to test, last on top (the larger savings are tested first).
  std::vector<std::pair<size_t, size_t>> pending = {{0, moves.size()}};
  while (!pending.empty() && simulations < max_simulations && !context.ShouldStop()) {
    const auto [first, last] = pending.back();
    pending.pop_back();
    undo.clear();
    for (size_t i = first; i < last; ++i) {
      const auto [begin, end] = UnitOf(model, moves[i].unit);
      undo.push_back(assignment[moves[i].unit]);
      for (const OpId* m = begin; m != end; ++m) assignment[*m] = moves[i].previous;
    }
    PlacementScore trial_step, trial_objective;
    score(assignment, trial_step, trial_objective);
    ++simulations;
    // Kept: no worse on the objective, or within the step tolerance of where the pass started
    // (never overflowing more).
    const bool keep = !objective.BetterThan(trial_objective) ||
                      (trial_step.overflow_bytes <= step.overflow_bytes &&
                       static_cast<double>(trial_step.makespan_ns) <= step_bound);
    if (keep) {
      step = trial_step;
      objective = trial_objective;
      continue;
    }
    for (size_t i = first; i < last; ++i) {
      const auto [begin, end] = UnitOf(model, moves[i].unit);
      for (const OpId* m = begin; m != end; ++m) assignment[*m] = undo[i - first];
    }
    if (last - first > 1) {
      const size_t middle = first + (last - first) / 2;
      pending.emplace_back(middle, last);
      pending.emplace_back(first, middle);
    }
  }
  return simulations;
}

}  // namespace

Assignment ReplacementSeed(const Model& model) {
  const PlacementRules rules(model);
  Assignment best = SeedBuilder(model, rules, {}).Build();
  // Ops to re-home (their device left, or they are new): also try handing them all to one device —
  // often a device the previous answer left idle, or one whose neighbours they were — and keep the
  // seed that simulates best (moves cost the same in every candidate: only ops without a valid
  // previous device change). D + 1 simulations.
  bool rehomed = false;
  for (OpId v = 0; v < model.num_ops() && !rehomed; ++v) {
    const DeviceId previous = model.PreviousDeviceOf(v);
    rehomed = previous < 0 || best[v] != previous;
  }
  if (!rehomed || model.num_devices() < 2) return best;
  Simulator simulator(model);
  const SimOptions options = ScoringSimOptions(model);
  PlacementScore best_score = ScoreSimulation(model, simulator.Run(best, options));
  // Keeps the candidate when it simulates better; returns its score.
  // With `only_if_better`, a candidate's simulation may stop once it cannot beat the best
  // (StopUnlessBetter): the same seed is kept, and the score returned is then a bound.
  auto consider = [&](const SeedBuilder::Split& split, bool only_if_better = false) {
    Assignment candidate = SeedBuilder(model, rules, split).Build();
    if (candidate == best) return best_score;
    const PlacementScore score = ScoreSimulation(
        model, simulator.Run(candidate, only_if_better ? StopUnlessBetter(options, best_score) : options));
    if (score.BetterThan(best_score)) {
      best_score = score;
      best.swap(candidate);
    }
    return score;
  };
  // The device that takes all of it best (the greedy seed may be one of these already).
  DeviceId best_single = kNone;
  PlacementScore best_single_score;
  for (DeviceId d = 0; d < model.num_devices(); ++d) {
    const PlacementScore score = consider({d, d, 0});
    if (best_single == kNone || score.BetterThan(best_single_score)) {
      best_single = d;
      best_single_score = score;
    }
  }
  // A departed stage of a pipeline: its first part to the device that feeds it most, the rest to
  // the device it feeds most, split where the two devices' compute balances.
  const std::vector<DeviceId> kept = SeedBuilder(model, rules, {}).KeptOnly();
  std::vector<int64_t> bytes_in(model.num_devices(), 0), bytes_out(model.num_devices(), 0),
      load(model.num_devices(), 0);
  int64_t rehomed_ns = 0;
  for (OpId v = 0; v < model.num_ops(); ++v) {
    if (kept[v] != kNone) {
      load[kept[v]] += model.compute_ns[v];
      continue;
    }
    rehomed_ns += model.compute_ns[v];
    for (EdgeId e = model.in_begin(v); e < model.in_end(v); ++e) {
      const DeviceId from = kept[model.in_src[e]];
      if (from != kNone) bytes_in[from] += model.in_bytes[e] + 1;
    }
    for (EdgeId e = model.out_begin(v); e < model.out_end(v); ++e) {
      const DeviceId to = kept[model.out_dst[e]];
      if (to != kNone) bytes_out[to] += model.out_bytes[e] + 1;
    }
  }
  const DeviceId up =
      static_cast<DeviceId>(std::max_element(bytes_in.begin(), bytes_in.end()) - bytes_in.begin());
  const DeviceId down = static_cast<DeviceId>(std::max_element(bytes_out.begin(), bytes_out.end()) -
                                              bytes_out.begin());
  if (up != down && bytes_in[up] > 0 && bytes_out[down] > 0) {
    const int64_t first_ns =
        std::clamp<int64_t>((rehomed_ns + load[down] - load[up]) / 2, 0, rehomed_ns);
    consider({up, down, first_ns}, /*only_if_better=*/true);
  }
  // The departed work split in two at a unit boundary (topological order of the units' first ops,
  // as SeedBuilder re-homes them): its first part to another device, the rest to the best single
  // device above — a backward chain to an idle device but the forward ops before it to the device
  // running the forward (ResNet-18 losing the GPU that ran its backward: 5.18 ms whole, 4.92 ms
  // split). At most kSplitPoints points per device, and only as many simulations as
  // kSplitOpSimulations allows (on large steps a simulation costs what many small ones do).
  if (best_single != kNone && model.num_devices() > 2) {
    constexpr int64_t kSplitPoints = 12;
    constexpr int64_t kSplitOpSimulations = 200'000;  // ops + edges simulated, in all
    std::vector<int64_t> boundary_ns;  // compute re-homed before each unit, in re-homing order
    std::vector<uint8_t> seen(model.num_ops(), 0);
    int64_t done_ns = 0;
    for (const OpId v : model.topo_order) {
      if (kept[v] != kNone || seen[v]) continue;
      boundary_ns.push_back(done_ns);
      const auto [begin, end] = UnitOf(model, v);
      for (const OpId* m = begin; m != end; ++m) {
        seen[*m] = 1;
        done_ns += model.compute_ns[*m];
      }
    }
    boundary_ns.push_back(done_ns);
    const int64_t units = static_cast<int64_t>(boundary_ns.size()) - 1;
    const int64_t copies = std::max(1, model.plan.microbatches);
    int64_t simulations_left =
        kSplitOpSimulations /
        std::max<int64_t>(1, (static_cast<int64_t>(model.num_ops()) + model.num_edges()) * copies);
    const int64_t step = std::max<int64_t>(1, units / kSplitPoints);
    for (DeviceId other = 0; other < model.num_devices() && simulations_left > 0; ++other) {
      if (other == best_single) continue;
      for (int64_t k = step; k < units && simulations_left > 0; k += step) {
        // Units 0..k-1 go to `first`: each goes there while the compute before it is below first_ns.
        const int64_t first_ns = boundary_ns[k - 1] + 1;
        consider({other, best_single, first_ns}, /*only_if_better=*/true);
        --simulations_left;
      }
    }
  }
  return best;
}

absl::StatusOr<PartitionResult> Replace(const Model& model, const SolveContext& context,
                                        const ReplacementOptions& options,
                                        const std::vector<const Partitioner*>& fresh_members) {
  PartitionResult out;
  out.winner = "previous_placement";
  Assignment assignment = ReplacementSeed(model);
  context.Report("replace", 0.05, 0);

  const bool memory_can_bind = MemoryCanBind(model);
  bool near_bound = false;
  // The weight every step below prices moves with: the request's, plus the keep-in-place price
  // (keep_in_place_tolerance of the re-homed seed's step for every device's worth of state moved).
  double move_weight = model.move_weight_ns_per_byte;
  {
    Simulator simulator(model);
    const SimOptions scoring = ScoringSimOptions(model);
    // The re-homed seed's score, and the chosen start's (the seed until a candidate beats it).
    const PlacementScore rehomed = ScoreSimulation(model, simulator.Run(assignment, scoring));
    PlacementScore start = rehomed;
    out.winner_makespan_ns = rehomed.makespan_ns;
    // A seed that fits within skip_near_lower_bound of LowerBoundNs leaves any other answer at most
    // that fraction to gain: no fresh answer, hybrid or search is worth its time (on small steps the
    // members' fresh answers would be most of a re-placement's time).
    near_bound = rehomed.Fits() && static_cast<double>(rehomed.makespan_ns) <=
                                       static_cast<double>(LowerBoundNs(model)) *
                                           (1.0 + options.skip_near_lower_bound);
    // One device's worth of state: what the seed must move (the departed devices' state); when
    // nothing must move (a device joined), a device's share of all of it.
    const int64_t forced_bytes = BytesMoved(model, assignment);
    const double device_share_bytes =
        forced_bytes > 0 ? static_cast<double>(forced_bytes)
                         : std::max(1.0, static_cast<double>(TotalPersistentBytes(model)) /
                                             model.num_devices());
    move_weight += options.keep_in_place_tolerance *
                   static_cast<double>(std::max<int64_t>(rehomed.makespan_ns, 0)) / device_share_bytes;
    // Fresh answers of the quick members, renamed towards the previous placement, compete with the
    // re-homed seed on step + moves priced at move_weight: where the previous structure cannot be
    // repaired cheaply (a fine-grained schedule that lost a device), a fresh one may be worth its
    // moves. With each, its hybrid: the previous placement where it survives, the member's choice for
    // the units it must re-home. And m-ETF drawn towards the previous devices (MEtfTowardsPrevious).
    const PlacementRules rules(model);
    const Assignment kept = SeedBuilder(model, rules, {}).KeptOnly();
    const std::vector<int32_t> class_of =
        fresh_members.empty() || near_bound ? std::vector<int32_t>() : InterchangeableClasses(model);
    // The kept units that hold state (kNone elsewhere): a member's answer with these put back moves
    // only what must move, and its compute where the member put it.
    std::vector<int64_t> group_bytes(model.num_groups(), 0);
    for (OpId v = 0; v < model.num_ops(); ++v) {
      const int32_t g = model.colocation_group[v];
      if (g != kNone) group_bytes[g] += model.persistent_bytes[v];
    }
    Assignment kept_state = kept;
    for (OpId v = 0; v < model.num_ops(); ++v) {
      const int32_t g = model.colocation_group[v];
      if ((g == kNone ? model.persistent_bytes[v] : group_bytes[g]) == 0) kept_state[v] = kNone;
    }
    const bool rehomed_fits = rehomed.Fits();
    PlacementScore objective = rehomed;
    objective.makespan_ns += MoveCostNs(model, assignment, move_weight);
    auto offer = [&](Assignment& candidate, std::string_view name) {
      // Only a candidate that beats the objective is kept, and its run is then a full one.
      const int64_t moves_ns = MoveCostNs(model, candidate, move_weight);
      const PlacementScore score =
          ScoreSimulation(model, simulator.Run(candidate, StopUnlessBetter(scoring, objective, moves_ns)));
      PlacementScore with_moves = score;
      with_moves.makespan_ns += moves_ns;
      if (!with_moves.BetterThan(objective)) return;
      objective = with_moves;
      start = score;
      assignment = candidate;
      out.winner = std::string(name);
      out.winner_makespan_ns = score.makespan_ns;
    };
    for (size_t i = 0; i < fresh_members.size() && !near_bound && !context.ShouldStop(); ++i) {
      SolveContext member_context =
          context.WithShareOfTimeLeft(0.5 / static_cast<double>(fresh_members.size() - i));
      member_context.on_progress = nullptr;
      absl::StatusOr<PartitionResult> fresh = fresh_members[i]->Partition(model, member_context);
      if (!fresh.ok() ||
          !CheckAssignmentComplete(model, fresh->assignment, fresh_members[i]->name()).ok() ||
          !CheckConstraints(model, fresh->assignment).empty()) {
        continue;
      }
      RenameTowardsPrevious(model, rules, class_of, fresh->assignment);
      // Kept units are whole colocation groups on allowed devices, and so are the member's: the
      // hybrid keeps every constraint.
      Assignment hybrid = kept;
      for (OpId v = 0; v < model.num_ops(); ++v) {
        if (hybrid[v] == kNone) hybrid[v] = fresh->assignment[v];
      }
      const std::string name(fresh_members[i]->name());
      if (hybrid != assignment) offer(hybrid, "previous_placement+" + name);
      // Its other hybrid: the member's answer with the kept state put back (a pipeline re-cut
      // afresh whose parameters stay where they were). Not where the re-homed seed overflows (its
      // state is the seed's; on a 100K-op BERT step overflowing 8 devices these simulations were
      // 4 % of a fresh solve's time).
      if (rehomed_fits) {
        Assignment state_hybrid = fresh->assignment;
        for (OpId v = 0; v < model.num_ops(); ++v) {
          if (kept_state[v] != kNone) state_hybrid[v] = kept_state[v];
        }
        if (state_hybrid != fresh->assignment && state_hybrid != hybrid) {
          offer(state_hybrid, "previous_state+" + name);
        }
      }
      offer(fresh->assignment, name);
    }
    // m-ETF drawn towards the previous devices, at several prices per byte (a unit waits longer
    // for its old device the dearer its bytes): a fine-grained schedule rebuilt around the state.
    // Not where the re-homed seed overflows: memory decides there and the repair follows (on a
    // 100K-op BERT step overflowing 8 devices these runs took half again the re-placement's time).
    for (size_t i = 0; i < options.towards_previous_weights.size() && !near_bound && rehomed_fits &&
                       !fresh_members.empty() && !context.ShouldStop();
         ++i) {
      SolveContext run_context = context.WithShareOfTimeLeft(
          0.5 / static_cast<double>(options.towards_previous_weights.size() - i));
      run_context.on_progress = nullptr;
      absl::StatusOr<PartitionResult> drawn = MEtfTowardsPrevious(
          model, run_context, options.towards_previous_weights[i] * move_weight);
      if (!drawn.ok() || drawn->time_limited) continue;
      RenameTowardsPrevious(model, rules, class_of, drawn->assignment);
      offer(drawn->assignment, "m_etf@previous");
    }
    context.Report("replace", 0.1, start.Fits() ? start.makespan_ns : 0);
    if (!start.Fits()) {
      simulator.ReleaseScratch();  // the repair's own simulator takes the buffers
      RepairOptions repair;
      repair.progress_from = 0.05;
      repair.progress_to = 0.2;
      const RepairOutcome outcome = RepairMemory(model, context, repair, assignment);
      out.time_limited |= outcome.time_limited;
      out.winner_makespan_ns = outcome.makespan_ns;
    }
  }
  const int64_t copies = std::max(1, model.plan.microbatches);
  const int64_t budget = pardnn::SimulationBudget(
      options.search_scale, options.search_exponent,
      (static_cast<int64_t>(model.num_ops()) + model.num_edges()) * copies,
      options.search_min_simulations, options.search_max_simulations);
  if (options.search && !near_bound && model.num_devices() > 1 && !context.ShouldStop()) {
    Simulator simulator(model);
    pardnn::RefinementOptions search;
    search.max_simulations = budget;
    search.max_restarts_without_improvement = options.search_restarts_without_improvement;
    search.max_restarts = options.search_max_restarts;
    search.memory_can_bind = memory_can_bind;
    search.count_moves = true;
    search.move_weight_ns_per_byte = move_weight;
    search.progress_stage = "search";
    search.progress_from = 0.2;
    search.progress_to = 1.0;
    const pardnn::RefinementResult r =
        pardnn::RefineAlongCriticalPath(model, search, context, simulator, assignment);
    out.time_limited |= r.time_limited;
    if (options.polish && !context.ShouldStop()) {
      // Path units the search's candidates never move, at the same price, in a small share of the
      // budget (a whole pass over a long critical path costs more than the search did).
      search.max_simulations =
          std::min(options.polish_max_simulations, std::max<int64_t>(budget / 8, 2));
      const pardnn::RefinementResult p =
          pardnn::PolishAlongCriticalPath(model, search, context, simulator, assignment);
      out.time_limited |= p.time_limited;
    }
  } else if (context.ShouldStop()) {
    out.time_limited = true;
  }
  if (options.pull_back && model.num_devices() > 1 && !context.ShouldStop()) {
    Simulator simulator(model);
    PullBack(model, PlacementRules(model), context, move_weight,
             std::min(options.pull_back_max_simulations, std::max<int64_t>(budget / 8, 2)),
             options.pull_back_step_tolerance, out.winner_makespan_ns, simulator, assignment);
    out.time_limited |= context.ShouldStop();
  }
  out.assignment = std::move(assignment);
  return out;
}

}  // namespace placement::engine
