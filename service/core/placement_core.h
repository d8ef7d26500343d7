// placement_core.h — what every RPC does, without gRPC: validate, digest, cache, single-flight, jobs,
// operations, and the answers in each caller's op order. One call per RPC.
//
// The gRPC adapter (service/server/placement_service.h) hands the core what it received and encodes
// what the core answers; nothing here blocks (work runs on the JobManager's workers) and nothing here
// includes gRPC, so the whole flow is testable in-process. Place and SubmitPlacement share one path:
//
//   PlaceCall (wire bytes, decoder, deadline, tenant)
//     ─► repeat index: bytes seen before? ─yes─► (digest, op order) without decoding ──┐
//          │no                                                                        │
//          └─► decode, Prepare (BuildModel: every violation with its field path;      │
//              algorithm; request_digest), remember the bytes ─────────────────────────┤
//     ─► SubmitPlacement: the live operation of the same request_id?                   │
//     ─► cache lookup ─hit─► the answer, mapped to the caller's op order ◄─────────────┘
//          │miss (a repeat whose answer was evicted takes the decoding path first)
//          └─► JobManager::Acquire (join an identical job, or admit a new one)
//               └─► worker: Solve → canonical order → cache insert → waiters
//   Place answers a hit at once, else returns a PendingAnswer; SubmitPlacement returns an
//   operation (done for a hit).
//
// Example:
//   PlaceCall call = PlaceCall::Of(request);  // or the received bytes and a decoder
//   call.deadline = deadline;
//   CallNotes notes;
//   absl::StatusOr<std::shared_ptr<PendingAnswer>> pending = core.Place(call, &response, &notes);
//   if (!pending.ok()) fail(pending.status());
//   else if (*pending == nullptr) reply();                        // answered from the cache
//   else (*pending)->OnDone([&] { reply((*pending)->Finish()); });
#ifndef PLACEMENT_SERVICE_CORE_PLACEMENT_CORE_H_
#define PLACEMENT_SERVICE_CORE_PLACEMENT_CORE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "placement/v1/operation.pb.h"
#include "placement/v1/placement_service.pb.h"
#include "service/cache/result_cache.h"
#include "service/core/core_observer.h"
#include "service/core/operation_handle.h"
#include "service/core/pending_answer.h"
#include "service/core/recommend_answer.h"
#include "service/core/repeat_index.h"
#include "service/engine/model/model.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/partition/partitioner.h"
#include "service/engine/solve/algorithm_registry.h"
#include "service/jobs/job_manager.h"
#include "service/jobs/operation_registry.h"
#include "service/shared_ops/operation_coordinator.h"

namespace placement::core {

struct PlacementCoreOptions {
  // Time limit of a job whose request sets none.
  absl::Duration default_time_limit = absl::Seconds(60);
  // Upper bound of any job's time limit.
  absl::Duration max_time_limit = absl::Minutes(10);
  // Kept from a unary caller's deadline for encoding and sending the reply.
  absl::Duration reply_margin = absl::Milliseconds(20);
  // Store results that the time limit cut short. request_digest does not cover the time limit, so such
  // a result only answers later callers whose own time limit is no larger (provenance.time_limit_ns),
  // and the shared tier never stores it (tiered_result_cache.h).
  bool cache_time_limited_results = true;
  // Bound of the index of byte-identical repeat requests (repeat_index.h); 0 disables it.
  int64_t repeat_index_bytes = int64_t{64} << 20;
  // What one request may contain (ops, edges, devices, name bytes, ...); Place, SubmitPlacement and
  // Evaluate all check it.
  engine::ModelLimits model_limits;
  // A tenant's max_running / max_queued for the jobs it starts (null = unlimited).
  std::function<jobs::TenantJobLimits(const std::string& tenant)> tenant_limits = nullptr;
  // Most candidates one Recommend call may place (every count 1..max_devices with every
  // data-parallel split; 8 devices give 20).
  int32_t max_recommend_candidates = 64;
  // A Recommend's second round gets what its budget has left after the first (SecondRoundShare in
  // sizing.h), so that the call ends within its budget; false gives it its whole refine share whenever
  // the first round ended: for tests that must see a second round on any machine, sanitizers included.
  bool recommend_second_round_within_budget = true;
};

// A validated request: built once, shared by the handler and the job.
struct PreparedRequest {
  std::shared_ptr<const engine::Model> model;
  const engine::Partitioner* algorithm = nullptr;
  v1::PlacementOptions options;
  std::string request_id;
  std::string request_digest;
  absl::Duration time_limit;
  int64_t estimated_memory_bytes = 0;

  const std::vector<int32_t>& request_index() const { return model->request_index; }
};

// A Place or SubmitPlacement request as the adapter received it.
struct PlaceCall {
  // The request's bytes as received, in pieces (not copied): a byte-identical repeat of a request
  // answered before is answered from them without decoding (repeat_index.h). Empty: no fast path.
  std::vector<absl::string_view> wire;
  // The decoded request; called at most once, only when the bytes alone cannot answer. The message
  // must stay alive until the core call returns (the core keeps nothing of it afterwards).
  std::function<absl::StatusOr<const v1::PlaceRequest*>()> decode;
  // The caller's deadline (Place only; InfiniteFuture = none).
  absl::Time deadline = absl::InfiniteFuture();
  std::string tenant;

  // An in-process caller's request, decoded already (no wire bytes, so no repeat fast path).
  static PlaceCall Of(const v1::PlaceRequest& request);
};

// What a call's log line says about it, filled as far as the call got (also when it fails).
struct CallNotes {
  std::string request_digest;
  v1::CacheResult cache = v1::CACHE_RESULT_UNSPECIFIED;
  std::string operation;  // SubmitPlacement, GetOperation, CancelOperation
};

// Rough memory a job needs (model + algorithm scratch), for admission control.
int64_t EstimateJobMemoryBytes(int64_t num_ops, int64_t num_edges, int64_t num_devices,
                               int64_t microbatches = 1);

class PlacementCore {
 public:
  // Everything passed must outlive the core; `observer` may be null. `algorithms` resolves
  // options.algorithm (with the testing algorithms when the server offers them).
  PlacementCore(PlacementCoreOptions options, const engine::AlgorithmRegistry* algorithms,
                cache::ResultCache* cache, jobs::JobManager* jobs,
                jobs::OperationRegistry* operations, CoreObserver* observer);

  // Place: answers a cache hit (unless options.skip_cache) at once — `response` holds the answer and
  // the result is null — or returns the answer being computed, which PendingAnswer::Finish writes
  // into `response` (it must outlive the handle). INVALID_ARGUMENT with a BadRequest payload listing
  // every violation (an unknown options.algorithm among them); UNAVAILABLE, RESOURCE_EXHAUSTED or
  // DEADLINE_EXCEEDED from admission.
  absl::StatusOr<std::shared_ptr<PendingAnswer>> Place(const PlaceCall& call,
                                                       v1::PlaceResponse* response,
                                                       CallNotes* notes);

  // SubmitPlacement: the same path as Place, ending in an operation written into `operation` (done at
  // once for a cache hit). Errors as Place, plus ALREADY_EXISTS for a request_id the tenant used for
  // another request. call.deadline is ignored: operations outlive the call.
  absl::Status Submit(const PlaceCall& call, v1::Operation* operation, CallNotes* notes);

  // GetOperation / CancelOperation: the operation's state (after cancelling it). NOT_FOUND for
  // unknown, expired or other tenants' operations.
  absl::Status GetOperation(const std::string& name, const std::string& tenant,
                            v1::Operation* operation, CallNotes* notes);
  absl::Status CancelOperation(const std::string& name, const std::string& tenant,
                               v1::Operation* operation, CallNotes* notes);
  // WaitOperation / WatchOperation: the operation to follow. NOT_FOUND as GetOperation.
  absl::StatusOr<OperationHandle> FindOperation(const std::string& name, const std::string& tenant);

  // Evaluate, on a worker (the simulation may be long); `request` is moved into the job. Never
  // answered at once: PendingAnswer::Finish writes the answer into `response`.
  absl::StatusOr<std::shared_ptr<PendingAnswer>> Evaluate(v1::EvaluateRequest request,
                                                          absl::Time deadline,
                                                          const std::string& tenant,
                                                          v1::EvaluateResponse* response);

  v1::ListAlgorithmsResponse ListAlgorithms() const;

  // Recommend: every candidate of the sizing question (sizing.h) placed as an ordinary request on
  // Place's path (or Submit's, with submit_only) — its own digest, cache, single-flight, a job on the
  // workers — under `deadline`. Answers at once (null) when every candidate was answered from the
  // cache (or submitted); else returns the answer being computed (recommend_answer.h). Errors:
  // INVALID_ARGUMENT for the sizing fields (sizing.h) and for the graph and pool as one request (field
  // paths as a PlaceRequest's); an admission error of any candidate (UNAVAILABLE, RESOURCE_EXHAUSTED,
  // DEADLINE_EXCEEDED) ends the call with it and releases the others. A candidate that is invalid only
  // for its own devices (a pin to a device it does not use) keeps the error in its row.
  absl::StatusOr<std::shared_ptr<PendingAnswer>> Recommend(const v1::RecommendRequest& request,
                                                           absl::Time deadline, const std::string& tenant,
                                                           v1::RecommendResponse* response,
                                                           CallNotes* notes);

  // Validates `request` (INVALID_ARGUMENT with a BadRequest payload listing every violation, including
  // an unknown options.algorithm) and computes its request_digest.
  absl::StatusOr<std::shared_ptr<const PreparedRequest>> Prepare(
      const v1::PlaceRequest& request) const;

  // With --redis: SubmitPlacement and the operation calls go through `shared` (service/shared_ops/), so
  // that every replica sees, follows, cancels and takes over every operation. Null (the default) =
  // operations stay in this process, as without Redis. Set before serving; `shared` outlives the core's
  // callers.
  void ShareOperations(shared_ops::OperationCoordinator* shared) { shared_ = shared; }
  // For `shared`: the job of a request another replica submitted (a serialized PlaceRequest), to take it
  // over when that replica went away, with the time limit it was submitted with (zero = this core's
  // own: a record that does not say). INVALID_ARGUMENT when it does not parse or validate here, or
  // when that time limit is above this core's max_time_limit.
  absl::StatusOr<shared_ops::RebuiltJob> RebuildSharedJob(const std::string& serialized_request,
                                                          const std::string& tenant,
                                                          absl::Duration time_limit);

  const PlacementCoreOptions& options() const { return options_; }
  // Bytes held by the repeat index.
  int64_t repeat_index_bytes() const { return repeat_index_.bytes(); }

 private:
  // How far the shared path of Place and SubmitPlacement got before admission.
  struct Resolution;
  absl::StatusOr<Resolution> Resolve(const PlaceCall& call, bool submit, CallNotes* notes);
  // The request_id check (SubmitPlacement) and the cache lookup, for a request known by `resolution`'s
  // key; true when either settled the call.
  bool Settle(Resolution& resolution, const std::string& tenant, bool submit);
  absl::StatusOr<std::shared_ptr<jobs::Operation>> SubmitOperation(const PlaceCall& call,
                                                                   Resolution& resolution,
                                                                   CallNotes* notes);
  jobs::JobWork MakeSolveWork(std::shared_ptr<const PreparedRequest> prepared);
  // Every job the core admits: solves (single-flight under `key`) and evaluations (`key` empty).
  jobs::JobSpec MakeJobSpec(std::string key, std::string algorithm, absl::Duration time_limit,
                            int64_t estimated_memory_bytes, absl::Time deadline,
                            const std::string& tenant, jobs::JobWork work) const;
  jobs::JobSpec MakeSolveJobSpec(std::shared_ptr<const PreparedRequest> prepared, absl::Time deadline,
                                 const std::string& tenant);
  // The cached placement for `known` if it can answer it; else null. Cached values may come from
  // outside the process (the shared tier): one that does not match (op count, device range, digest, a
  // time limit shorter than the caller's) is a miss, counted in placement_cache_rejected_total and
  // logged once per reason; the fresh result then overwrites it.
  cache::CachedPlacement LookUp(const KnownRequest& known);
  // Recommend's candidates (sizing.h) and the rows it places them into.
  struct RecommendRound;
  // Places the candidates `rows` of `round` with time limit `share` (Place's path, or Submit's with
  // settings.submit_only): rows answered at once are written, the others come back as parts to wait
  // for. A first-round call (`refine` false) writes each row's digest and error, and ends at the first
  // admission error (releasing the parts it made); a second-round call skips a row whose solve cannot
  // start, leaving the row as it was.
  absl::StatusOr<std::vector<RecommendAnswer::Part>> PlaceRecommendCandidates(
      RecommendRound& round, const std::vector<int32_t>& rows, absl::Duration share, bool refine,
      const v1::RecommendRequest& settings, v1::RecommendResponse* response);
  // The time limit a request runs with (its own or the default, capped).
  absl::Duration TimeLimitOf(const v1::PlacementOptions& options) const;
  // The single-flight key of a request's job (JobSpec::request_digest), also its key in Redis.
  static std::string SingleFlightKey(const PreparedRequest& prepared);
  void CountLookup(v1::CacheResult result) const;

  const PlacementCoreOptions options_;
  const engine::AlgorithmRegistry* const algorithms_;
  cache::ResultCache* const cache_;
  jobs::JobManager* const jobs_;
  jobs::OperationRegistry* const operations_;
  CoreObserver* const observer_;
  shared_ops::OperationCoordinator* shared_ = nullptr;
  RepeatIndex repeat_index_;
  // Reasons of rejected cache values already logged (each is logged once).
  std::atomic<uint32_t> logged_rejections_{0};
};

}  // namespace placement::core

#endif  // PLACEMENT_SERVICE_CORE_PLACEMENT_CORE_H_
