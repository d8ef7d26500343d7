// ideal_lattice.h — every ideal (down-closed set) of a small partial order, for the stage planner's
// exact mode: a contiguous stage is the difference of two ideals, so a DP over ideals considers every
// contiguous split, not only the splits of one topological order (NeurIPS'20, Tarnawski et al., §4).
//
// Ideals are numbered by size (∅ = 0, the whole set last), so every proper sub-ideal of an ideal has a
// smaller id. For each ideal the lattice lists its *immediate* sub-ideals: I minus one maximal element
// (an element of I none of whose successors is in I). The count of ideals is exponential in the width of
// the order in the worst case: enumeration stops at `max_ideals` and reports that it did not finish.
//
// Cost: O(ideals × elements / 64) time and memory for the bitsets, O(ideals × width) for the lists.
//
// Example:
//   std::optional<IdealLattice> lattice = IdealLattice::Enumerate(problem, /*max_ideals=*/100000);
//   if (lattice) for (auto [x, sub] : lattice->Children(id)) ...
#ifndef PLACEMENT_SERVICE_ENGINE_STAGES_IDEAL_LATTICE_H_
#define PLACEMENT_SERVICE_ENGINE_STAGES_IDEAL_LATTICE_H_

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "service/engine/stages/stage_problem.h"

namespace placement::engine::stages {

class IdealLattice {
 public:
  struct Child {
    int32_t removed;  // the maximal element taken out
    int32_t ideal;    // the sub-ideal without it
  };

  // Every ideal of `problem`'s order (pred lists), or nullopt when there are more than `max_ideals`.
  static std::optional<IdealLattice> Enumerate(const StageProblem& problem, int64_t max_ideals);

  int32_t num_ideals() const { return static_cast<int32_t>(child_offset_.size()) - 1; }
  int32_t full() const { return num_ideals() - 1; }
  bool Contains(int32_t ideal, int32_t element) const {
    return (bits_[static_cast<size_t>(ideal) * words_ + (element >> 6)] >> (element & 63)) & 1;
  }
  const Child* ChildrenBegin(int32_t ideal) const { return children_.data() + child_offset_[ideal]; }
  const Child* ChildrenEnd(int32_t ideal) const { return children_.data() + child_offset_[ideal + 1]; }
  // Σ over ideals of the number of their sub-ideals would be the DP's pair count; not computed here.

 private:
  int32_t words_ = 0;
  std::vector<uint64_t> bits_;  // ideal-major bitsets
  std::vector<int64_t> child_offset_;
  std::vector<Child> children_;
};

}  // namespace placement::engine::stages

#endif  // PLACEMENT_SERVICE_ENGINE_STAGES_IDEAL_LATTICE_H_
