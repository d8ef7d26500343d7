// recommend_answer.h — a Recommend call's answer while some of its candidates are still being placed.
//
// PlacementCore::Recommend places every candidate as an ordinary request (Place's path: cache,
// single-flight, a job on the workers). The candidates answered from the cache are in the response at
// once; this handle waits for the others (each a JobAnswer), then writes their rows and the
// recommendation (sizing.h). Releasing it releases every candidate it waits for.
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
  // One candidate still being placed: its answer, the response it writes into, and its row.
  struct Part {
    std::shared_ptr<PendingAnswer> pending;
    std::unique_ptr<v1::PlaceResponse> response;
    int32_t row = 0;
  };

  // `settings` is the request without its graph and cluster (objective, threshold, placements or not);
  // `response` (the caller's) holds every row already, the waited-for ones with their request digest;
  // it must outlive the handle. `observer` may be null.
  RecommendAnswer(std::vector<Part> parts, v1::RecommendRequest settings, v1::RecommendResponse* response,
                  absl::Time started, CoreObserver* observer);
  ~RecommendAnswer() override;
  RecommendAnswer(const RecommendAnswer&) = delete;
  RecommendAnswer& operator=(const RecommendAnswer&) = delete;

  void OnDone(std::function<void()> on_done) override;
  // Fills the waited-for rows (a candidate whose job failed keeps its error in its row) and the
  // recommendation; OK unless nothing could be written.
  absl::Status Finish() override;
  void Release() override;
  // The longest of the candidates'.
  absl::Duration queue_time() const override;
  absl::Duration solve_time() const override;

 private:
  std::vector<Part> parts_;
  const v1::RecommendRequest settings_;
  v1::RecommendResponse* const response_;
  const absl::Time started_;
  CoreObserver* const observer_;
};

// The rows, recommendation, elapsed time and cache hits of a Recommend whose candidates all have their
// answers (shared by the immediate and the waiting path).
void FinishRecommendation(const v1::RecommendRequest& settings, absl::Time started,
                          CoreObserver* observer, v1::RecommendResponse* response);

}  // namespace placement::core

#endif  // PLACEMENT_SERVICE_CORE_RECOMMEND_ANSWER_H_
