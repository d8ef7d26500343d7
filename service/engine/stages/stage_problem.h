// stage_problem.h — the problem the stage planner's dynamic programme solves, independent of where it
// came from (a placement Model, or the NeurIPS'20 input format in its own cost model), and the cost of
// one stage.
//
// A problem is a set of *elements* (each a block of ops that always share a device: a colocation unit,
// a run of units, or a forward node with its backward sibling) and a partial order on them. A *stage* is
// a contiguous set of elements: the difference I \ J of two ideals J ⊆ I (down-closed sets) of that
// order; for a chain, a range of positions. A stage runs on one device of a *class* (devices that are
// interchangeable for the planner: same compute column, speed, memory, kinds, no pins of their own).
//
// The cost of stage S on class c, as PipeDream's planner and the NeurIPS'20 DP define it:
//
//   cost_c(S) = round(compute_{kind(c)}(S) / speed_c) + (charges_transfers_c ? transfers(S) : 0)
//
// where transfers(S) = Σ sender_cost(p) over the *senders* p whose output crosses S's boundary: p inside
// S with a consumer element outside, or p outside with a consumer element inside (one transfer per
// sender and side, however many edges cross). A stage is infeasible on c when its memory (Σ element
// memory, which the builder makes persistent bytes plus whatever activation model it chose) exceeds the
// class's capacity, or when an element may not run on c (pins, kinds). The empty stage costs 0.
//
// `StageCostEvaluator` keeps S and its cost under Add/Remove of single elements, in any order, in
// O(senders touching the element) (O(1) when no class charges transfers), so the DP can walk the
// sub-ideals of an ideal one element at a time.
//
// Every quantity is an int64 (ns or bytes, or any fixed unit the builder chose): sums are exact, so
// results do not depend on the order elements were added in.
//
// Example:
//   StageProblem p;                 // filled by a builder (stage_order.h, or the msr adapter)
//   StageCostEvaluator eval(p);
//   eval.Add(3); eval.Add(4);
//   int64_t t = eval.Cost(/*class=*/0);   // kInfeasible when it does not fit
//   eval.Remove(4); eval.Remove(3);
#ifndef PLACEMENT_SERVICE_ENGINE_STAGES_STAGE_PROBLEM_H_
#define PLACEMENT_SERVICE_ENGINE_STAGES_STAGE_PROBLEM_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace placement::engine::stages {

inline constexpr int64_t kInfeasible = std::numeric_limits<int64_t>::max();
// Classes are tracked in a 64-bit mask.
inline constexpr int32_t kMaxClasses = 64;

struct StageClass {
  int32_t count = 1;           // devices of this class
  int32_t compute_kind = 0;    // which compute column its stages are timed with
  double speed = 1.0;          // stage time = round(compute / speed)
  bool charges_transfers = true;
  int64_t capacity = std::numeric_limits<int64_t>::max();  // memory a stage may use on it
};

struct StageProblem {
  int32_t num_elements = 0;
  int32_t num_compute_kinds = 1;
  // Immediate predecessors of every element (CSR); an element's predecessors must be in every ideal
  // that contains it. Unused by the chain lattice (elements 0..n-1 in that order).
  std::vector<int32_t> pred_offset;
  std::vector<int32_t> pred;
  // Per element: compute per kind (element * num_compute_kinds + kind), memory, the classes it may not
  // use (bit c).
  std::vector<int64_t> compute;
  std::vector<int64_t> memory;
  std::vector<uint64_t> forbidden_classes;
  // Senders: the element a sender belongs to, its transfer cost, and the distinct elements other than
  // its own that consume it (CSR).
  std::vector<int32_t> sender_element;
  std::vector<int64_t> sender_cost;
  std::vector<int32_t> sender_consumer_offset;
  std::vector<int32_t> sender_consumer;
  std::vector<StageClass> classes;

  int32_t num_senders() const { return static_cast<int32_t>(sender_element.size()); }
  int32_t num_classes() const { return static_cast<int32_t>(classes.size()); }
  int64_t Compute(int32_t element, int32_t kind) const {
    return compute[static_cast<size_t>(element) * num_compute_kinds + kind];
  }
  // Sizes every per-element array for `n` elements (no predecessors, no senders).
  void Resize(int32_t n, int32_t compute_kinds);
  // Builds the per-element sender index the evaluator needs (call once the senders are complete).
  void Finish();

  // Filled by Finish(): per element, the senders it holds and the senders elsewhere it consumes.
  std::vector<int32_t> own_sender_offset, own_sender;
  std::vector<int32_t> fed_by_offset, fed_by;
};

// The cost of a stage S under Add/Remove (see the file comment).
class StageCostEvaluator {
 public:
  explicit StageCostEvaluator(const StageProblem& problem);

  void Add(int32_t element);
  void Remove(int32_t element);
  bool Empty() const { return size_ == 0; }

  // cost_c(S), or kInfeasible.
  int64_t Cost(int32_t c) const {
    const int64_t compute = LowerBound(c);
    if (compute == kInfeasible) return kInfeasible;
    return p_.classes[c].charges_transfers ? compute + transfers_ : compute;
  }
  // A lower bound of cost_c(S') for every S' ⊇ S: the compute part, or kInfeasible when memory or a
  // forbidden element already rules c out (both only grow with S).
  int64_t LowerBound(int32_t c) const {
    const StageClass& cls = p_.classes[c];
    if (forbidding_[c] > 0 || memory_ > cls.capacity) return kInfeasible;
    return ScaledCompute(compute_[cls.compute_kind], cls.speed);
  }
  int64_t transfers() const { return transfers_; }
  int64_t memory() const { return memory_; }

 private:
  struct Sender {
    int32_t element;
    int32_t consumers;  // consumer elements other than its own
    int64_t cost;
  };
  static int64_t ScaledCompute(int64_t compute, double speed);
  // Whether sender s crosses S's boundary, for a given count of its consumer elements inside S.
  bool Crosses(const Sender& s, int32_t inside) const {
    return in_stage_[s.element] ? inside < s.consumers : inside > 0;
  }
  template <int kSign>
  void Update(int32_t element);

  const StageProblem& p_;
  // Transfers are only tracked when some class charges them.
  const bool track_transfers_;
  std::vector<Sender> senders_;
  std::vector<uint8_t> in_stage_;
  std::vector<int32_t> consumers_inside_;  // per sender
  std::vector<int64_t> compute_;           // per kind
  std::vector<int32_t> forbidding_;        // per class: elements of S that may not use it
  int64_t memory_ = 0;
  int64_t transfers_ = 0;
  int32_t size_ = 0;
};

}  // namespace placement::engine::stages

#endif  // PLACEMENT_SERVICE_ENGINE_STAGES_STAGE_PROBLEM_H_
