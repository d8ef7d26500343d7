// placement_core.h — what every RPC does, without gRPC: validate, digest, cache, single-flight, jobs,
// operations, and the answers in each caller's op order.
//
// The gRPC adapter (service/server/placement_service.h) decodes a call, asks the core, and encodes the answer; nothing
// here blocks (work runs on the JobManager's workers) and nothing here includes gRPC, so the whole flow
// is testable in-process:
//
//   PlaceRequest ─► Prepare (BuildModel: every violation with its field path; algorithm; request_digest)
//                ─► StartPlace: cache hit? ─yes─► FillPlaceResponse (mapped to the caller's op order)
//                                 │no
//                                 └─► JobManager::Acquire (join an identical job, or admit a new one)
//                                      └─► worker: Solve → canonical order → cache insert → waiters
//
// Example:
//   absl::StatusOr<std::shared_ptr<const PreparedRequest>> prepared = core.Prepare(request);
//   absl::StatusOr<PlaceStart> start = core.StartPlace(*prepared, deadline, tenant);
//   if (start->hit) core.FillPlaceResponse(**prepared, *start->hit, v1::HIT, {}, &response);
//   else wait for start->admission.job, then FillPlaceResponse(...) and core.Release(job).
#ifndef PLACEMENT_SERVICE_CORE_PLACEMENT_CORE_H_
#define PLACEMENT_SERVICE_CORE_PLACEMENT_CORE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "placement/v1/operation.pb.h"
#include "placement/v1/placement_service.pb.h"
#include "service/cache/result_cache.h"
#include "service/core/algorithm_catalog.h"
#include "service/core/core_observer.h"
#include "service/core/request_fingerprints.h"
#include "service/engine/model/model.h"
#include "service/engine/model/model_builder.h"
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
  // Bound of the index of byte-identical repeat requests (request_fingerprints.h); 0 disables it.
  int64_t fingerprint_bytes = int64_t{64} << 20;
  // What one request may contain (ops, edges, devices, name bytes, ...); Place, SubmitPlacement and
  // Evaluate all check it.
  engine::ModelLimits model_limits;
  // A tenant's max_running / max_queued for the jobs it starts (null = unlimited).
  std::function<jobs::TenantLimits(const std::string& tenant)> tenant_limits = nullptr;
};

// A validated request: built once, shared by the handler and the job.
struct PreparedRequest {
  std::shared_ptr<const engine::Model> model;
  const Algorithm* algorithm = nullptr;
  v1::PlacementOptions options;
  std::string request_id;
  std::string request_digest;
  absl::Duration time_limit;
  int64_t estimated_memory_bytes = 0;

  const std::vector<int32_t>& request_index() const { return model->request_index; }
};

struct PlaceStart {
  // Non-null: answered from the cache (no job).
  cache::CachedPlacement hit;
  // Otherwise: the job to wait for; the caller owes one Release(admission.job).
  jobs::Admission admission;
};

// Where a worker leaves an Evaluate answer (the job's placement points into it).
struct EvaluateOutput {
  v1::EvaluateResponse response;
};

struct EvaluateStart {
  jobs::Admission admission;  // the caller owes one Release(admission.job)
  std::shared_ptr<EvaluateOutput> output;  // filled once the job is done and succeeded
};

// Rough memory a job needs (model + algorithm scratch), for admission control.
int64_t EstimateJobMemoryBytes(int64_t num_ops, int64_t num_edges, int64_t num_devices,
                               int64_t microbatches = 1);

class PlacementCore {
 public:
  // Everything passed must outlive the core; `observer` may be null.
  PlacementCore(PlacementCoreOptions options, const AlgorithmCatalog* catalog,
                cache::ResultCache* cache, jobs::JobManager* jobs,
                jobs::OperationRegistry* operations, CoreObserver* observer);

  // Validates `request` (INVALID_ARGUMENT with a BadRequest payload listing every violation, including
  // an unknown options.algorithm) and computes its request_digest.
  absl::StatusOr<std::shared_ptr<const PreparedRequest>> Prepare(
      const v1::PlaceRequest& request) const;

  // Fast path for a request seen before byte for byte (unless options.skip_cache): answers it from the
  // cache without validating and modelling it again. True when `out` holds the answer; otherwise
  // `*fingerprint` is set (or empty) for RememberFingerprint after Prepare.
  bool TryRepeatHit(const v1::PlaceRequest& request, std::string* fingerprint,
                    std::string* request_digest, v1::PlaceResponse* out);
  void RememberFingerprint(const std::string& fingerprint, const PreparedRequest& prepared);

  // Unary Place: a cache hit (unless options.skip_cache), or a job to wait for. `deadline` is the
  // caller's (InfiniteFuture = none). UNAVAILABLE / DEADLINE_EXCEEDED from admission.
  absl::StatusOr<PlaceStart> StartPlace(std::shared_ptr<const PreparedRequest> prepared,
                                        absl::Time deadline, const std::string& tenant);

  // The caller of StartPlace/StartEvaluate stopped waiting for `job`.
  void Release(const std::shared_ptr<jobs::Job>& job) { jobs_->Release(job); }

  // `canonical` mapped to the caller's op order, with provenance.cache and queue_ns set.
  void FillPlaceResponse(const PreparedRequest& prepared, const v1::Placement& canonical,
                         v1::CacheResult cache, absl::Duration queue_time,
                         v1::PlaceResponse* out) const;

  // SubmitPlacement: validates, then an operation that is done at once (cache hit) or waits for a job.
  // *cache tells which. Errors as Prepare / StartPlace, plus ALREADY_EXISTS for a request_id reused
  // with another request.
  absl::StatusOr<std::shared_ptr<jobs::Operation>> Submit(const v1::PlaceRequest& request,
                                                          const std::string& tenant,
                                                          v1::CacheResult* cache,
                                                          std::string* request_digest);

  // NOT_FOUND for unknown, expired or other tenants' operations.
  absl::StatusOr<std::shared_ptr<jobs::Operation>> FindOperation(const std::string& name,
                                                                 const std::string& tenant);
  absl::StatusOr<std::shared_ptr<jobs::Operation>> CancelOperation(const std::string& name,
                                                                   const std::string& tenant);
  // The v1::Operation for the operation's current state.
  void FillOperation(const jobs::Operation& operation, v1::Operation* out) const;

  // Evaluate on a worker (the simulation may be long); the request is copied into the job.
  absl::StatusOr<EvaluateStart> StartEvaluate(const v1::EvaluateRequest& request,
                                              absl::Time deadline, const std::string& tenant);

  v1::ListAlgorithmsResponse ListAlgorithms() const;

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
  int64_t repeat_index_bytes() const { return fingerprints_.bytes(); }

 private:
  jobs::JobWork MakeSolveWork(std::shared_ptr<const PreparedRequest> prepared);
  // The cached placement for `request_digest` if it can answer a request of `num_ops` ops on
  // `num_devices` devices with `time_limit`; else null. Cached values may come from outside the process
  // (the shared tier): one that does not match (op count, device range, digest, a time limit shorter
  // than the caller's) is a miss, counted in placement_cache_rejected_total and logged once per
  // reason; the fresh result then overwrites it.
  cache::CachedPlacement LookupFor(const std::string& request_digest, size_t num_ops,
                                   int num_devices, absl::Duration time_limit);
  // The time limit a request runs with (its own or the default, capped).
  absl::Duration TimeLimitOf(const v1::PlacementOptions& options) const;
  jobs::JobSpec MakeJobSpec(std::shared_ptr<const PreparedRequest> prepared, absl::Time deadline,
                            const std::string& tenant);
  // The single-flight key of a request's job (JobSpec::request_digest), also its key in Redis.
  static std::string SingleFlightKey(const PreparedRequest& prepared);
  void CountLookup(v1::CacheResult result) const;

  const PlacementCoreOptions options_;
  const AlgorithmCatalog* const catalog_;
  cache::ResultCache* const cache_;
  jobs::JobManager* const jobs_;
  jobs::OperationRegistry* const operations_;
  CoreObserver* const observer_;
  shared_ops::OperationCoordinator* shared_ = nullptr;
  RequestFingerprints fingerprints_;
  // Reasons of rejected cache values already logged (each is logged once).
  std::atomic<uint32_t> logged_rejections_{0};
};

}  // namespace placement::core

#endif  // PLACEMENT_SERVICE_CORE_PLACEMENT_CORE_H_
