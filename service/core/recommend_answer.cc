#include "service/core/recommend_answer.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "absl/synchronization/mutex.h"
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
  if (observer != nullptr) observer->RecordRecommendation(response->candidates_size(), hits, response->refined());
}

namespace {

// Writes a done part's answer into its row.
void WritePart(RecommendAnswer::Part& part, bool include_placements, v1::RecommendResponse* response) {
  v1::RecommendCandidate* row = response->mutable_candidates(part.row);
  const absl::Status placed = part.pending->Finish();
  if (!placed.ok()) {
    if (!part.refine) *row->mutable_error() = StatusToProto(placed);
    return;
  }
  v1::Placement* placement = part.response->mutable_placement();
  FillRowFromPlacement(*placement, row);
  row->set_cache(placement->provenance().cache());
  if (include_placements) row->mutable_placement()->Swap(placement);
}

// The handles a round waits for (copied out, so that it waits without the lock).
std::vector<std::shared_ptr<PendingAnswer>> Pendings(const std::vector<RecommendAnswer::Part>& parts) {
  std::vector<std::shared_ptr<PendingAnswer>> pendings;
  pendings.reserve(parts.size());
  for (const RecommendAnswer::Part& part : parts) pendings.push_back(part.pending);
  return pendings;
}

}  // namespace

struct RecommendAnswer::State {
  State(std::vector<Part> first, Refine second, bool include, v1::RecommendResponse* rows)
      : parts(std::move(first)), refine(std::move(second)), include_placements(include), response(rows) {}

  absl::Mutex mu;
  bool released ABSL_GUARDED_BY(mu) = false;
  // The round being waited for (or, once done, to be written by Finish).
  std::vector<Part> parts ABSL_GUARDED_BY(mu);
  // The second round, until it starts.
  Refine refine ABSL_GUARDED_BY(mu);
  std::function<void()> on_done ABSL_GUARDED_BY(mu);
  // The longest queue and solve times of the first round, once it is written.
  absl::Duration first_queue ABSL_GUARDED_BY(mu);
  absl::Duration first_solve ABSL_GUARDED_BY(mu);
  const bool include_placements;
  v1::RecommendResponse* const response;
};

RecommendAnswer::RecommendAnswer(std::vector<Part> parts, Refine refine, v1::RecommendRequest settings,
                                 v1::RecommendResponse* response, absl::Time started,
                                 CoreObserver* observer)
    : state_(std::make_shared<State>(std::move(parts), std::move(refine), settings.include_placements(),
                                     response)),
      settings_(std::move(settings)),
      started_(started),
      observer_(observer) {}

RecommendAnswer::~RecommendAnswer() { Release(); }

void RecommendAnswer::OnDone(std::function<void()> on_done) {
  std::vector<std::shared_ptr<PendingAnswer>> waiting;
  {
    absl::MutexLock lock(&state_->mu);
    if (state_->released) return;
    state_->on_done = std::move(on_done);
    waiting = Pendings(state_->parts);
  }
  Wait(state_, std::move(waiting));
}

void RecommendAnswer::Wait(const std::shared_ptr<State>& state,
                           std::vector<std::shared_ptr<PendingAnswer>> waiting) {
  if (waiting.empty()) {
    RoundDone(state);
    return;
  }
  // Each listener owns the count and the state: it may run after this handle is gone.
  auto left = std::make_shared<std::atomic<size_t>>(waiting.size());
  for (const std::shared_ptr<PendingAnswer>& pending : waiting) {
    pending->OnDone([state, left] {
      if (left->fetch_sub(1) == 1) RoundDone(state);
    });
  }
}

void RecommendAnswer::RoundDone(const std::shared_ptr<State>& state) {
  Refine refine;
  v1::RecommendResponse rows;
  absl::Duration longest_first_solve;
  {
    absl::MutexLock lock(&state->mu);
    if (state->released) return;
    if (state->refine != nullptr) {
      for (Part& part : state->parts) {
        state->first_queue = std::max(state->first_queue, part.pending->queue_time());
        state->first_solve = std::max(state->first_solve, part.pending->solve_time());
        WritePart(part, state->include_placements, state->response);
      }
      longest_first_solve = state->first_solve;
      refine = std::move(state->refine);
      state->refine = nullptr;
      state->parts.clear();
      // The second round works on a copy: its cache lookups (Redis with --redis) run without the lock,
      // so a Release (a cancelled call, the end of a shutdown grace) never waits for them, and once
      // released the caller's response is never written again.
      rows = *state->response;
    }
  }
  std::vector<Part> second = refine != nullptr ? refine(&rows, longest_first_solve) : std::vector<Part>{};
  const std::vector<std::shared_ptr<PendingAnswer>> waiting = Pendings(second);
  std::function<void()> done;
  bool released = false;
  {
    absl::MutexLock lock(&state->mu);
    released = state->released;
    if (!released) {
      if (refine != nullptr) {
        state->response->Swap(&rows);
        state->parts = std::move(second);
      }
      if (waiting.empty()) done = std::move(state->on_done);
    }
  }
  if (released) {  // while the second round was being started: it ends here
    for (const std::shared_ptr<PendingAnswer>& pending : waiting) pending->Release();
    return;
  }
  // Outside the lock: a part already done calls back at once, and the caller's callback may Finish.
  if (done != nullptr) {
    done();
    return;
  }
  Wait(state, waiting);
}

absl::Status RecommendAnswer::Finish() {
  {
    absl::MutexLock lock(&state_->mu);
    for (Part& part : state_->parts) WritePart(part, state_->include_placements, state_->response);
  }
  FinishRecommendation(settings_, started_, observer_, state_->response);
  return absl::OkStatus();
}

void RecommendAnswer::Release() {
  std::vector<std::shared_ptr<PendingAnswer>> pendings;
  {
    absl::MutexLock lock(&state_->mu);
    if (state_->released) return;
    state_->released = true;
    state_->on_done = nullptr;
    state_->refine = nullptr;
    pendings = Pendings(state_->parts);
  }
  for (const std::shared_ptr<PendingAnswer>& pending : pendings) pending->Release();
}

absl::Duration RecommendAnswer::queue_time() const {
  absl::MutexLock lock(&state_->mu);
  absl::Duration longest = state_->first_queue;
  for (const Part& part : state_->parts) longest = std::max(longest, part.pending->queue_time());
  return longest;
}

absl::Duration RecommendAnswer::solve_time() const {
  absl::MutexLock lock(&state_->mu);
  absl::Duration longest = state_->first_solve;
  for (const Part& part : state_->parts) longest = std::max(longest, part.pending->solve_time());
  return longest;
}

}  // namespace placement::core
