// recommend_answer.h — a Recommend call's answer while some of its candidates are still being placed.
//
// PlacementCore::Recommend places every candidate as an ordinary request (Place's path: cache,
// single-flight, a job on the workers). The candidates answered from the cache are in the response at
// once; this handle waits for the others (each a JobAnswer) and writes their rows. Then, when the call
// has a second round (sizing.h: the contenders re-solved with the rest of the budget), it starts that
// round — on the thread that finished the last first-round candidate — and waits for it too. Finish
// writes the last rows and the recommendation. Releasing it releases every candidate it waits for, and
// no round starts after that.
//
// Example (what the gRPC reactor does, as for Place):
//   std::shared_ptr<PendingAnswer> pending = *core.Recommend(request, deadline, tenant, &response, &notes);
//   if (pending != nullptr) pending->OnDone([pending] { Reply(pending->Finish()); });
#ifndef PLACEMENT_SERVICE_CORE_RECOMMEND_ANSWER_H_
#define PLACEMENT_SERVICE_CORE_RECOMMEND_ANSWER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "placement/v1/placement.pb.h"
#include "placement/v1/placement_service.pb.h"
#include "service/core/core_observer.h"
#include "service/core/pending_answer.h"

namespace placement::core {

class RecommendAnswer final : public PendingAnswer {
 public:
  // One candidate still being placed: its answer, the response it writes into, and its row. A second
  // solve (`refine`) replaces its row only when it succeeds.
  struct Part {
    std::shared_ptr<PendingAnswer> pending;
    std::unique_ptr<v1::PlaceResponse> response;
    int32_t row = 0;
    bool refine = false;
  };
  // The second round: given the response with every first-round row written and the longest solve of
  // the first round's candidates that were placed (zero when all came from the cache), places the rows
  // worth a second solve, writes those answered at once, and returns the parts still being placed. Runs once,
  // never once Release() has returned, on the worker that finished the last first-round candidate and
  // without the handle's lock, on a copy of the response that replaces the caller's unless the handle
  // was released meanwhile (then the parts it returns are released): its cache lookups (at most
  // max(2, workers), through the shared tier with --redis) hold that worker for as long as they take,
  // bounded by the Redis timeout, but never a Release().
  using Refine =
      std::function<std::vector<Part>(v1::RecommendResponse* response, absl::Duration longest_first_solve)>;

  // `settings` is the request without its graph and cluster (objective, threshold, placements or not);
  // `response` (the caller's) holds every row already, the waited-for ones with their request digest;
  // it must outlive the handle (or its Release). `refine` may be null (no second round); `observer` may
  // be null.
  RecommendAnswer(std::vector<Part> parts, Refine refine, v1::RecommendRequest settings,
                  v1::RecommendResponse* response, absl::Time started, CoreObserver* observer);
  ~RecommendAnswer() override;
  RecommendAnswer(const RecommendAnswer&) = delete;
  RecommendAnswer& operator=(const RecommendAnswer&) = delete;

  void OnDone(std::function<void()> on_done) override;
  // Fills the rows still waited for (a first-round candidate whose job failed keeps its error in its
  // row; a failed second solve leaves the first answer) and the recommendation; OK unless nothing could
  // be written.
  absl::Status Finish() override;
  void Release() override;
  // The longest of the candidates', over both rounds.
  absl::Duration queue_time() const override;
  absl::Duration solve_time() const override;

 private:
  // What the candidates' listeners touch: it lives as long as the last of them (they may run after the
  // handle is gone).
  struct State;
  // Waits for `waiting`, then RoundDone.
  static void Wait(const std::shared_ptr<State>& state, std::vector<std::shared_ptr<PendingAnswer>> waiting);
  // Every part of the round is done: writes them and starts the second round, or tells the caller.
  static void RoundDone(const std::shared_ptr<State>& state);

  const std::shared_ptr<State> state_;
  const v1::RecommendRequest settings_;
  const absl::Time started_;
  CoreObserver* const observer_;
};

// The rows, recommendation, elapsed time and cache hits of a Recommend whose candidates all have their
// answers (shared by the immediate and the waiting path).
void FinishRecommendation(const v1::RecommendRequest& settings, absl::Time started,
                          CoreObserver* observer, v1::RecommendResponse* response);

}  // namespace placement::core

#endif  // PLACEMENT_SERVICE_CORE_RECOMMEND_ANSWER_H_
