#include "service/core/recommend_answer.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "absl/time/clock.h"
#include "service/core/sizing.h"
#include "service/core/status_proto.h"

namespace placement::core {

void FinishRecommendation(const v1::RecommendRequest& settings, absl::Time started,
                          CoreObserver* observer, v1::RecommendResponse* response) {
  CompleteRecommendation(settings, response);
  int32_t hits = 0;
  for (const v1::RecommendCandidate& row : response->candidates()) hits += row.cache() == v1::HIT;
  response->set_cache_hits(hits);
  response->set_elapsed_ns(absl::ToInt64Nanoseconds(absl::Now() - started));
  if (observer != nullptr) observer->RecordRecommendation(response->candidates_size(), hits);
}

RecommendAnswer::RecommendAnswer(std::vector<Part> parts, v1::RecommendRequest settings,
                                 v1::RecommendResponse* response, absl::Time started,
                                 CoreObserver* observer)
    : parts_(std::move(parts)),
      settings_(std::move(settings)),
      response_(response),
      started_(started),
      observer_(observer) {}

RecommendAnswer::~RecommendAnswer() { Release(); }

void RecommendAnswer::OnDone(std::function<void()> on_done) {
  if (parts_.empty()) {
    on_done();
    return;
  }
  // Each part's listener owns the count and the callback: it may run after this handle is gone.
  auto left = std::make_shared<std::atomic<size_t>>(parts_.size());
  auto done = std::make_shared<std::function<void()>>(std::move(on_done));
  for (Part& part : parts_) {
    part.pending->OnDone([left, done] {
      if (left->fetch_sub(1) == 1) (*done)();
    });
  }
}

absl::Status RecommendAnswer::Finish() {
  for (Part& part : parts_) {
    v1::RecommendCandidate* row = response_->mutable_candidates(part.row);
    const absl::Status placed = part.pending->Finish();
    if (!placed.ok()) {
      *row->mutable_error() = StatusToProto(placed);
      continue;
    }
    v1::Placement* placement = part.response->mutable_placement();
    FillRowFromPlacement(*placement, row);
    row->set_cache(placement->provenance().cache());
    if (settings_.include_placements()) row->mutable_placement()->Swap(placement);
  }
  FinishRecommendation(settings_, started_, observer_, response_);
  return absl::OkStatus();
}

void RecommendAnswer::Release() {
  for (Part& part : parts_) part.pending->Release();
}

absl::Duration RecommendAnswer::queue_time() const {
  absl::Duration longest = absl::ZeroDuration();
  for (const Part& part : parts_) longest = std::max(longest, part.pending->queue_time());
  return longest;
}

absl::Duration RecommendAnswer::solve_time() const {
  absl::Duration longest = absl::ZeroDuration();
  for (const Part& part : parts_) longest = std::max(longest, part.pending->solve_time());
  return longest;
}

}  // namespace placement::core
