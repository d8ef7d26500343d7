// placement_score.h — how every algorithm compares two of its own answers, from their simulations: the
// memory overflow first (an answer that fits beats any that does not; among those that do not, the one
// short of fewer bytes is closer to fitting), then the simulated makespan. Also the precondition of
// every simulation of an algorithm's answer: one device per op, every device in range.
//
// One definition, so that pardnn's stages, its refinement and the `auto` portfolio can never disagree on
// which of two answers is the better one.
//
// Example:
//   Simulator sim(model);
//   const PlacementScore a = ScoreSimulation(model, sim.Run(first));
//   const PlacementScore b = ScoreSimulation(model, sim.Run(second));
//   if (b.BetterThan(a)) keep(second);
#ifndef PLACEMENT_SERVICE_ENGINE_SIM_PLACEMENT_SCORE_H_
#define PLACEMENT_SERVICE_ENGINE_SIM_PLACEMENT_SCORE_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "service/engine/model/model.h"
#include "service/engine/sim/simulator.h"

namespace placement::engine {

struct PlacementScore {
  // Sum over devices of max(0, peak memory - capacity), saturating at INT64_MAX; 0 = every device fits.
  int64_t overflow_bytes = 0;
  int64_t makespan_ns = 0;

  bool Fits() const { return overflow_bytes == 0; }
  // Less overflow first, then a shorter step. Equal scores are not better: the incumbent stays.
  bool BetterThan(const PlacementScore& other) const {
    if (overflow_bytes != other.overflow_bytes) return overflow_bytes < other.overflow_bytes;
    return makespan_ns < other.makespan_ns;
  }
  // The score nothing is worse than, for "no answer yet".
  static PlacementScore Worst() { return PlacementScore{INT64_MAX, INT64_MAX}; }
};

// True when some assignment of `model` could overflow some device: every byte the graph can hold at once
// (persistent bytes, and per microbatch copy every temp buffer, output, received copy and accumulation
// buffer) exceeds the smallest capacity. When false, every assignment fits and a simulation may skip
// the memory bookkeeping (SimOptions::compute_memory = false) without changing any score.
bool MemoryCanBind(const Model& model);

// True when no assignment of `model` can fit: the persistent bytes of all ops (each held on its device
// for the whole step) exceed every device's capacity together, or one op's own persistent, temporary
// and output bytes (all held while it runs) exceed the largest capacity. Then the memory stages cannot
// succeed and are skipped (the answer is INFEASIBLE either way, with its reason).
bool MemoryCannotFit(const Model& model);
// What an answer says first where MemoryCannotFit holds (only more memory helps, whatever the algorithm).
inline constexpr char kNoPlacementFitsReason[] =
    "no placement fits these devices (the ops' persistent bytes exceed their memory together, or one op's "
    "own bytes the largest)";

// Sum over devices of max(0, the persistent bytes `assignment` puts there - capacity), saturating at
// INT64_MAX: an overflow counted without simulating (temporaries, outputs and received copies left out).
int64_t PersistentBytesAboveCapacity(const Model& model, const Assignment& assignment);

// Sum over devices of max(0, peak_bytes[d] - capacity_bytes[d]), saturating at INT64_MAX: the overflow
// of PlacementScore (also what a report computes from an answer's per-device peaks and capacities).
int64_t BytesAboveCapacity(const std::vector<int64_t>& peak_bytes,
                           const std::vector<int64_t>& capacity_bytes);

// The score of a simulation of an assignment of `model` (its peaks against model.capacity_bytes).
PlacementScore ScoreSimulation(const Model& model, const SimResult& simulated);

// Options for a simulation that is only scored: without the memory bookkeeping where memory cannot bind
// (the score is the same; on a 100K-op step at M = 16 a run is ~10 % quicker). Peaks are then 0: a
// simulation whose peaks are reported keeps the defaults.
SimOptions ScoringSimOptions(const Model& model);

// `options` for simulating a candidate whose only question is whether it beats `best`, its score then
// raised by `added_ns` (a move cost): where `best` fits, the run may stop once the candidate's step is
// certain to be at least best's makespan − added_ns (SimOptions::stop_at_ns), since it cannot be better
// then. A stopped run's score is a bound, no better than `best`; a candidate that beats it is always
// simulated in full.
SimOptions StopUnlessBetter(const SimOptions& options, const PlacementScore& best, int64_t added_ns = 0);

// OK when `assignment` has one entry per op of `model` and every entry names one of its devices: what an
// algorithm must hand back before the simulator may look at it. Otherwise INTERNAL (a broken algorithm,
// not bad input), naming `algorithm` and the first problem.
absl::Status CheckAssignmentComplete(const Model& model, const Assignment& assignment,
                                     std::string_view algorithm);

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_SIM_PLACEMENT_SCORE_H_
