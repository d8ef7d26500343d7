#include "service/engine/stages/stage_problem.h"

#include <cmath>

#include "service/engine/model/model.h"

namespace placement::engine::stages {

void StageProblem::Resize(int32_t n, int32_t compute_kinds) {
  num_elements = n;
  num_compute_kinds = compute_kinds;
  pred_offset.assign(static_cast<size_t>(n) + 1, 0);
  pred.clear();
  compute.assign(static_cast<size_t>(n) * compute_kinds, 0);
  memory.assign(n, 0);
  forbidden_classes.assign(n, 0);
  sender_element.clear();
  sender_cost.clear();
  sender_consumer_offset.assign(1, 0);
  sender_consumer.clear();
}

void StageProblem::Finish() {
  const int32_t n = num_elements;
  own_sender_offset.assign(static_cast<size_t>(n) + 1, 0);
  fed_by_offset.assign(static_cast<size_t>(n) + 1, 0);
  for (int32_t s = 0; s < num_senders(); ++s) {
    ++own_sender_offset[sender_element[s] + 1];
    for (int32_t k = sender_consumer_offset[s]; k < sender_consumer_offset[s + 1]; ++k) {
      ++fed_by_offset[sender_consumer[k] + 1];
    }
  }
  for (int32_t e = 0; e < n; ++e) {
    own_sender_offset[e + 1] += own_sender_offset[e];
    fed_by_offset[e + 1] += fed_by_offset[e];
  }
  own_sender.resize(own_sender_offset[n]);
  fed_by.resize(fed_by_offset[n]);
  std::vector<int32_t> own_fill(own_sender_offset.begin(), own_sender_offset.end() - 1);
  std::vector<int32_t> fed_fill(fed_by_offset.begin(), fed_by_offset.end() - 1);
  for (int32_t s = 0; s < num_senders(); ++s) {
    own_sender[own_fill[sender_element[s]]++] = s;
    for (int32_t k = sender_consumer_offset[s]; k < sender_consumer_offset[s + 1]; ++k) {
      fed_by[fed_fill[sender_consumer[k]]++] = s;
    }
  }
}

StageCostEvaluator::StageCostEvaluator(const StageProblem& problem)
    : p_(problem),
      in_stage_(problem.num_elements, 0),
      consumers_inside_(problem.num_senders(), 0),
      compute_(problem.num_compute_kinds, 0),
      forbidding_(problem.num_classes(), 0) {}

bool StageCostEvaluator::Crosses(int32_t s) const {
  const int32_t consumers = p_.sender_consumer_offset[s + 1] - p_.sender_consumer_offset[s];
  return in_stage_[p_.sender_element[s]] ? consumers_inside_[s] < consumers : consumers_inside_[s] > 0;
}

void StageCostEvaluator::Add(int32_t e) {
  const int32_t kinds = p_.num_compute_kinds;
  for (int32_t k = 0; k < kinds; ++k) compute_[k] += p_.compute[static_cast<size_t>(e) * kinds + k];
  memory_ += p_.memory[e];
  for (uint64_t mask = p_.forbidden_classes[e]; mask != 0; mask &= mask - 1) {
    ++forbidding_[__builtin_ctzll(mask)];
  }
  ++size_;
  // The element's own senders: they may start or stop crossing once it is inside.
  for (int32_t i = p_.own_sender_offset[e]; i < p_.own_sender_offset[e + 1]; ++i) {
    const int32_t s = p_.own_sender[i];
    if (Crosses(s)) transfers_ -= p_.sender_cost[s];
  }
  in_stage_[e] = 1;
  for (int32_t i = p_.own_sender_offset[e]; i < p_.own_sender_offset[e + 1]; ++i) {
    const int32_t s = p_.own_sender[i];
    if (Crosses(s)) transfers_ += p_.sender_cost[s];
  }
  // Senders elsewhere that feed it: one more of their consumer elements is inside.
  for (int32_t i = p_.fed_by_offset[e]; i < p_.fed_by_offset[e + 1]; ++i) {
    const int32_t s = p_.fed_by[i];
    const bool before = Crosses(s);
    ++consumers_inside_[s];
    const bool after = Crosses(s);
    if (before != after) transfers_ += after ? p_.sender_cost[s] : -p_.sender_cost[s];
  }
}

void StageCostEvaluator::Remove(int32_t e) {
  for (int32_t i = p_.fed_by_offset[e + 1] - 1; i >= p_.fed_by_offset[e]; --i) {
    const int32_t s = p_.fed_by[i];
    const bool before = Crosses(s);
    --consumers_inside_[s];
    const bool after = Crosses(s);
    if (before != after) transfers_ += after ? p_.sender_cost[s] : -p_.sender_cost[s];
  }
  for (int32_t i = p_.own_sender_offset[e]; i < p_.own_sender_offset[e + 1]; ++i) {
    const int32_t s = p_.own_sender[i];
    if (Crosses(s)) transfers_ -= p_.sender_cost[s];
  }
  in_stage_[e] = 0;
  for (int32_t i = p_.own_sender_offset[e]; i < p_.own_sender_offset[e + 1]; ++i) {
    const int32_t s = p_.own_sender[i];
    if (Crosses(s)) transfers_ += p_.sender_cost[s];
  }
  --size_;
  for (uint64_t mask = p_.forbidden_classes[e]; mask != 0; mask &= mask - 1) {
    --forbidding_[__builtin_ctzll(mask)];
  }
  memory_ -= p_.memory[e];
  const int32_t kinds = p_.num_compute_kinds;
  for (int32_t k = 0; k < kinds; ++k) compute_[k] -= p_.compute[static_cast<size_t>(e) * kinds + k];
}

int64_t StageCostEvaluator::LowerBound(int32_t c) const {
  const StageClass& cls = p_.classes[c];
  if (forbidding_[c] > 0 || memory_ > cls.capacity) return kInfeasible;
  return ScaledComputeNs(compute_[cls.compute_kind], cls.speed);
}

int64_t StageCostEvaluator::Cost(int32_t c) const {
  const int64_t compute = LowerBound(c);
  if (compute == kInfeasible) return kInfeasible;
  return p_.classes[c].charges_transfers ? compute + transfers_ : compute;
}

}  // namespace placement::engine::stages
