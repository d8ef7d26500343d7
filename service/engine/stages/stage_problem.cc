#include "service/engine/stages/stage_problem.h"

#include <algorithm>
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
      track_transfers_(std::any_of(problem.classes.begin(), problem.classes.end(),
                                   [](const StageClass& c) { return c.charges_transfers; })),
      in_stage_(problem.num_elements, 0),
      consumers_inside_(problem.num_senders(), 0),
      compute_(problem.num_compute_kinds, 0),
      forbidding_(problem.num_classes(), 0) {
  senders_.resize(problem.num_senders());
  for (int32_t s = 0; s < problem.num_senders(); ++s) {
    senders_[s] = Sender{problem.sender_element[s],
                         problem.sender_consumer_offset[s + 1] - problem.sender_consumer_offset[s],
                         problem.sender_cost[s]};
  }
}

int64_t StageCostEvaluator::ScaledCompute(int64_t compute, double speed) {
  return ScaledComputeNs(compute, speed);
}

template <int kSign>
void StageCostEvaluator::Update(int32_t e) {
  const int32_t kinds = p_.num_compute_kinds;
  for (int32_t k = 0; k < kinds; ++k) compute_[k] += kSign * p_.compute[static_cast<size_t>(e) * kinds + k];
  memory_ += kSign * p_.memory[e];
  for (uint64_t mask = p_.forbidden_classes[e]; mask != 0; mask &= mask - 1) {
    forbidding_[__builtin_ctzll(mask)] += kSign;
  }
  size_ += kSign;
  if (!track_transfers_) {
    in_stage_[e] = kSign > 0;
    return;
  }
  // The element's own senders: whether they cross flips with the element's side.
  for (int32_t i = p_.own_sender_offset[e]; i < p_.own_sender_offset[e + 1]; ++i) {
    const int32_t s = p_.own_sender[i];
    const Sender& sender = senders_[s];
    const int32_t inside = consumers_inside_[s];
    const bool outside_crosses = inside > 0, inside_crosses = inside < sender.consumers;
    const bool before = kSign > 0 ? outside_crosses : inside_crosses;
    const bool after = kSign > 0 ? inside_crosses : outside_crosses;
    if (before != after) transfers_ += after ? sender.cost : -sender.cost;
  }
  in_stage_[e] = kSign > 0;
  // Senders elsewhere that feed it: one more (fewer) of their consumer elements is inside.
  for (int32_t i = p_.fed_by_offset[e]; i < p_.fed_by_offset[e + 1]; ++i) {
    const int32_t s = p_.fed_by[i];
    const Sender& sender = senders_[s];
    const int32_t inside = consumers_inside_[s];
    const bool before = Crosses(sender, inside);
    const bool after = Crosses(sender, inside + kSign);
    consumers_inside_[s] = inside + kSign;
    if (before != after) transfers_ += after ? sender.cost : -sender.cost;
  }
}

void StageCostEvaluator::Add(int32_t e) { Update<1>(e); }
void StageCostEvaluator::Remove(int32_t e) { Update<-1>(e); }

}  // namespace placement::engine::stages
