// sizing.h — what a Recommend call evaluates and what it recommends, without gRPC or jobs.
//
// A cluster scheduler asks "how many devices should this job get": the core places the graph on
// 1..max_devices devices of the pool, each count n with every data-parallel split D × n/D, each
// candidate an ordinary placement request (placement_core.h runs them), and then this file turns the
// answers into the table and the recommendation the request's objective asks for.
//
// Which devices a count uses: as few hosts as possible — a host that has n devices if there is one
// (the one whose n fastest devices are fastest, then the first in cluster order), else whole hosts with
// the most devices first, the last one partly — and on each host the fastest devices first (more
// memory next, then cluster order). Devices of one host share its fast intra-node link, so fewer hosts
// means faster links.
//
// Example:
//   absl::StatusOr<std::vector<SizingCandidate>> candidates = PlanSizingCandidates(request, 128);
//   for (const SizingCandidate& c : *candidates) {
//     v1::PlaceRequest place = ...; *place.mutable_cluster() = CandidateCluster(request.cluster(), c);
//     place.mutable_options()->set_data_parallel(c.data_parallel);   // then place it
//   }
//   CompleteRecommendation(request, &response);  // rows filled from the placements
#ifndef PLACEMENT_SERVICE_CORE_SIZING_H_
#define PLACEMENT_SERVICE_CORE_SIZING_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "placement/v1/cluster.pb.h"
#include "placement/v1/placement.pb.h"
#include "placement/v1/placement_service.pb.h"

namespace placement::core {

// One candidate: n devices of the pool in D replicas.
struct SizingCandidate {
  int32_t devices = 1;
  int32_t data_parallel = 1;
  // Indices into the pool's devices, in the order they form the candidate's cluster.
  std::vector<int32_t> pool_devices;
};

// The candidates of `request`, counts ascending and for each count D ascending; INVALID_ARGUMENT (with
// a BadRequest payload, every problem by field) for max_devices outside 0..pool size, more candidates
// than `max_candidates`, an objective that is not one of the enum's, within_percent outside (0, 100)
// with RECOMMEND_OBJECTIVE_FEWEST_DEVICES_WITHIN or non-zero with another objective, a negative
// options.data_parallel, and an empty pool. The graph and the devices themselves are validated by
// placing (the pool as one request).
absl::StatusOr<std::vector<SizingCandidate>> PlanSizingCandidates(const v1::RecommendRequest& request,
                                                                  int32_t max_candidates);

// The cluster of a candidate: the pool's devices it uses in its order, the pool's intra- and inter-node
// links, and the pool's per-pair links between two devices it uses.
v1::Cluster CandidateCluster(const v1::Cluster& pool, const SizingCandidate& candidate);

// The options a candidate is placed with: the request's, its own data-parallel split (unset for 1), and
// for a re-placement (options.previous_placement) every device the previous placement names that is not
// in the candidate's cluster added to options.departed_devices — the pool's own check (the whole pool
// as one request) has already rejected names that are neither in the pool nor departed. The time limit
// is left as the request's.
v1::PlacementOptions CandidateOptions(const v1::PlacementOptions& options, const v1::Cluster& cluster,
                                      int32_t data_parallel);

// A row of a Recommend answer as a plain PlaceRequest (its devices of the pool in its order, their links,
// its data-parallel split, the request's other options): placing it is answered from the cache the
// Recommend filled. NOT_FOUND when the row names a device the pool does not have.
absl::StatusOr<v1::PlaceRequest> CandidatePlaceRequest(const v1::RecommendRequest& request,
                                                       const v1::RecommendCandidate& row);

// Fills a row's plan, step, throughput, feasibility and time limit from the candidate's placement.
void FillRowFromPlacement(const v1::Placement& placement, v1::RecommendCandidate* row);

// How a Recommend spends its budget B (options.time_limit) over n candidates on w workers: a first
// solve of every candidate with kFirstRoundPercent % of B x w / n, then a second, longer solve of the
// contenders (RowsToRefine, at most max(2, w)) with what the first round left of B (SecondRoundShare:
// kRefinePercent % of B x w / max(2, w) when the first round takes all its shares; more when it ends
// early — candidates that cannot fit, or that need no search, end at once — and less when it ends
// late). Why: under a short share two counts can land within a fraction of a percent of each other
// while full effort puts one clearly ahead; the recommendation is only as good as the rows that
// decide it, so those get the rest of the budget.
inline constexpr int64_t kFirstRoundPercent = 80;
// The second round's nominal part of B (FirstRoundShare's test; the share without budget tracking).
inline constexpr int64_t kRefinePercent = 15;
// The part of B the second round leaves for the work after its cuts (scoring, choosing the window).
inline constexpr int64_t kReservePercent = 10;
// A row is a contender when its objective's figure is within this many percent of the deciding row's.
// As wide as a first solve's error: cut short at its share, a row's step came out up to 7.4 % above
// its full-effort step (bench/README.md, BERT scaled to 10K ops), and two counts 0.7 % apart at full
// effort could be 5.4 % apart after the first round — a 2 % window then left the better one unrefined.
// Only the best max(2, workers) contenders are solved again, in one wave on the workers.
inline constexpr double kContenderPercent = 10.0;

// The first round's share and the second's nominal one (each at least 1 ms and at most `budget`). With
// few candidates (n <= 4 x max(2, w) at 80 %) the nominal second share would be no longer than the
// first: the first round then takes the whole budget, B x w / n, and a second round runs only when the
// first ends early enough to leave a longer share (SecondRoundShare).
absl::Duration FirstRoundShare(absl::Duration budget, int32_t workers, int32_t candidates);
absl::Duration RefineShare(absl::Duration budget, int32_t workers);

// The second round's share as the first round left it: `contenders` solves in waves of `workers`,
// each running `overrun` past its limit (the most a first-round solve ran past its share: scoring and
// choosing the window of what the search had when cut), end kReservePercent % of the budget before
// the `left` of it runs out. Zero when that is no longer than `first_share` (a second solve would
// learn nothing): then nothing is refined. RefineShare when `left` is infinite (the budget not
// tracked). A solve's time limit bounds its search, not the work after the cut, and on a loaded
// machine the first round can end late; without this the call would end that much past its budget.
absl::Duration SecondRoundShare(absl::Duration budget, int32_t workers, absl::Duration first_share,
                                absl::Duration left, absl::Duration overrun, int32_t contenders);

// With every row filled and the recommendation made (CompleteRecommendation): the rows worth a second
// solve. The contenders are the feasible rows without error whose figure could decide the objective —
// for the fastest, throughput within kContenderPercent % of the recommended row's; for the best per
// device, throughput per device likewise; for the fewest devices within X %, the rows within
// kContenderPercent % of the fastest (they set the bar) and the rows with no more devices than the
// recommended one whose throughput is within X + kContenderPercent % of the fastest. The recommended
// row and the best others by that figure, then row order — max(2, workers) in all — decide; returned,
// in that order, are those among them whose answer its time limit cut short. Empty when any row was solved with more than `first_share`
// already (a second round ran for these candidates: a repeated call, which finds the longer answers in
// the cache, picks nothing, whatever those answers changed in the ranking), and when nothing is
// recommended (submit_only, nothing feasible).
std::vector<int32_t> RowsToRefine(const v1::RecommendRequest& request, const v1::RecommendResponse& response,
                                  absl::Duration first_share, int32_t workers);

// With every row filled (or carrying its error): the speed-up over the one-device row, the efficiency,
// the recommendation for the request's objective and why (response.recommended = -1 when no row is
// feasible).
void CompleteRecommendation(const v1::RecommendRequest& request, v1::RecommendResponse* response);

}  // namespace placement::core

#endif  // PLACEMENT_SERVICE_CORE_SIZING_H_
