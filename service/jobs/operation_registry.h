// operation_registry.h — long-running operations ("operations/<unguessable id>") over jobs.
//
// An Operation is what SubmitPlacement returns and GetOperation / WaitOperation / WatchOperation /
// CancelOperation look up. It is a waiter on one Job (job_manager.h) — several operations and unary calls
// may share a job — or it is done from the start (a cache hit). It keeps the caller's op order
// (`request_index`) so that the result, computed in canonical op order, can be mapped back.
//
// Semantics follow google.longrunning: `done == false` has neither result nor error; `done == true` has
// exactly one. CancelOperation ends the operation with CANCELLED at once and releases its job (which
// stops only when no other caller waits for it). A finished operation stays visible for `ttl_after_done`,
// then lookups answer NOT_FOUND. Operations of another tenant are NOT_FOUND too (names never leak).
// A non-empty request_id (AIP-155 idempotency) maps to the operation it created while that operation
// lives: the same request_id with the same request returns that operation, with another request
// ALREADY_EXISTS.
//
// A *mirror* (AddMirror) is an operation that another replica runs (service/shared_ops/): it has no
// local job; whoever follows the remote job drives it with UpdateProgress and Finish. Lookups, Wait
// and Watch treat it like any other operation.
//
// Example:
//   OperationRegistry registry({.ttl_after_done = absl::Minutes(15)}, &jobs);
//   absl::StatusOr<Admission> admitted = jobs.Acquire(std::move(spec));
//   absl::StatusOr<std::shared_ptr<Operation>> op =
//       registry.AddPending({.tenant = "", .request_digest = digest, .request_index = order},
//                           *std::move(admitted));
//   ... later: registry.Find((*op)->name(), "")->snapshot().done ...
#ifndef PLACEMENT_SERVICE_JOBS_OPERATION_REGISTRY_H_
#define PLACEMENT_SERVICE_JOBS_OPERATION_REGISTRY_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "placement/v1/placement.pb.h"
#include "service/clock/clock.h"
#include "service/jobs/job.h"
#include "service/jobs/job_manager.h"
#include "service/subscribers/subscriber_list.h"

namespace placement::jobs {

// What identifies an operation and how to map its result back to the caller.
struct OperationSpec {
  // "" = a new unguessable name; else this name (an operation other replicas know by it).
  std::string name;
  std::string tenant;
  std::string request_id;      // "" = no idempotency key
  std::string request_digest;  // also the idempotency check
  // request_index[canonical op] = position in the caller's graph.ops (may be null).
  std::shared_ptr<const std::vector<int32_t>> request_index;
  std::string algorithm;  // requested algorithm, for logs
};

class OperationRegistry;
struct OperationIndex;

class Operation : public std::enable_shared_from_this<Operation> {
 public:
  using Listener = std::function<void(const Operation&)>;

  struct Snapshot {
    bool done = false;
    JobProgress progress;
    absl::Status error;     // done and failed: why (CANCELLED when cancelled)
    PlacementPtr placement;  // done and succeeded: the result in canonical op order
    v1::CacheResult cache = v1::CACHE_RESULT_UNSPECIFIED;
    absl::Duration queue_time;
    absl::Duration solve_time;
  };

  Operation(std::string name, OperationSpec spec, absl::Time created_at, JobManager* jobs,
            std::weak_ptr<OperationIndex> index, const Clock* clock, bool mirror = false);
  Operation(const Operation&) = delete;
  Operation& operator=(const Operation&) = delete;
  ~Operation();

  const std::string& name() const { return name_; }
  const std::string& tenant() const { return spec_.tenant; }
  const std::string& request_id() const { return spec_.request_id; }
  const std::string& request_digest() const { return spec_.request_digest; }
  const std::shared_ptr<const std::vector<int32_t>>& request_index() const {
    return spec_.request_index;
  }
  const std::string& algorithm() const { return spec_.algorithm; }
  absl::Time created_at() const { return created_at_; }
  // Driven from outside (AddMirror), not by a local job.
  bool mirror() const { return mirror_; }

  Snapshot snapshot() const ABSL_LOCKS_EXCLUDED(mu_);
  bool done() const ABSL_LOCKS_EXCLUDED(mu_);

  // As Job::AddListener: returns 0 without registering when already done; listeners run outside locks
  // on progress changes and once when done, and must own what they touch.
  uint64_t AddListener(Listener listener) ABSL_LOCKS_EXCLUDED(mu_);
  void RemoveListener(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);

  // Mirrors only (no-ops otherwise, and once done): the remote job's progress, and its end. The
  // listeners hear about both as about a local job's.
  void UpdateProgress(const JobProgress& progress) ABSL_LOCKS_EXCLUDED(mu_);
  // `placement` is the result in canonical op order, or why there is none. False when already done.
  bool Finish(absl::StatusOr<PlacementPtr> placement, absl::Duration queue_time,
              absl::Duration solve_time) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  friend class OperationRegistry;

  // Attaches to `job` (this operation is one of its waiters); completes at once if it is done.
  void Attach(std::shared_ptr<Job> job, bool coalesced) ABSL_LOCKS_EXCLUDED(mu_);
  // Before the operation is visible to anyone: done with `placement`.
  void InitDone(PlacementPtr placement, v1::CacheResult cache) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the operation with `error` unless it is done; true when it did.
  bool Cancel(absl::Status error) ABSL_LOCKS_EXCLUDED(mu_);
  void OnJobChanged(const Job& job) ABSL_LOCKS_EXCLUDED(mu_);
  // Calls the listeners taken under the lock, outside it.
  void Notify(const SubscriberList<const Operation&>::Taken& listeners) const;
  void NoteDone() const;

  const std::string name_;
  const OperationSpec spec_;
  const absl::Time created_at_;
  JobManager* const jobs_;
  const std::weak_ptr<OperationIndex> index_;
  const Clock* const clock_;
  const bool mirror_;

  mutable absl::Mutex mu_;
  Snapshot state_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<Job> job_ ABSL_GUARDED_BY(mu_);  // while pending
  uint64_t job_listener_ ABSL_GUARDED_BY(mu_) = 0;
  SubscriberList<const Operation&> listeners_ ABSL_GUARDED_BY(mu_);
};

struct OperationRegistryOptions {
  // How long a finished operation stays visible.
  absl::Duration ttl_after_done = absl::Minutes(15);
  // Operations kept at once (pending + finished but not expired). When full, finished operations are
  // dropped early (oldest first); only when all are pending is one more refused with UNAVAILABLE.
  size_t max_operations = 100'000;
  // Null = Clock::Real().
  const Clock* clock = nullptr;
  // Suggested wait sent with UNAVAILABLE.
  absl::Duration retry_delay = absl::Seconds(1);
};

// Shared between the registry and its operations (which may outlive it).
struct OperationIndex {
  absl::Mutex mu;
  absl::flat_hash_map<std::string, std::shared_ptr<Operation>> by_name ABSL_GUARDED_BY(mu);
  // (tenant + '\0' + request_id) → operation name.
  absl::flat_hash_map<std::string, std::string> by_request_id ABSL_GUARDED_BY(mu);
  // Finished operations in the order they finished: (expiry time, name).
  std::deque<std::pair<absl::Time, std::string>> expiry ABSL_GUARDED_BY(mu);
  absl::Duration ttl;
};

class OperationRegistry {
 public:
  // `jobs` must outlive every pending operation (shut it down before destroying the registry).
  OperationRegistry(OperationRegistryOptions options, JobManager* jobs);
  ~OperationRegistry();
  OperationRegistry(const OperationRegistry&) = delete;
  OperationRegistry& operator=(const OperationRegistry&) = delete;

  // A new operation waiting for `admission.job`; takes over the caller's waiter on the job (released
  // here on failure). If spec.request_id names a live operation: the same digest → that operation;
  // another → ALREADY_EXISTS. UNAVAILABLE when max_operations are kept.
  absl::StatusOr<std::shared_ptr<Operation>> AddPending(OperationSpec spec, Admission admission)
      ABSL_LOCKS_EXCLUDED(index_->mu);
  // A new operation that is done from the start (e.g. a cache hit). Same errors.
  absl::StatusOr<std::shared_ptr<Operation>> AddDone(OperationSpec spec, PlacementPtr placement,
                                                     v1::CacheResult cache)
      ABSL_LOCKS_EXCLUDED(index_->mu);

  // A pending mirror of an operation another replica runs, named spec.name (which must be set); when a
  // live operation has that name already, that one (mirrors of one name are made once). `cache` is what
  // its snapshot reports (e.g. COALESCED for a submit that joined another replica's job).
  // UNAVAILABLE when max_operations are kept.
  absl::StatusOr<std::shared_ptr<Operation>> AddMirror(OperationSpec spec, v1::CacheResult cache)
      ABSL_LOCKS_EXCLUDED(index_->mu);

  // NOT_FOUND for unknown, expired or other tenants' names.
  absl::StatusOr<std::shared_ptr<Operation>> Find(const std::string& name, const std::string& tenant)
      ABSL_LOCKS_EXCLUDED(index_->mu);
  // The live operation created with this request_id, or null.
  std::shared_ptr<Operation> FindByRequestId(const std::string& tenant,
                                             const std::string& request_id)
      ABSL_LOCKS_EXCLUDED(index_->mu);
  // Cancels the operation (no-op when done) and returns it. NOT_FOUND as Find.
  absl::StatusOr<std::shared_ptr<Operation>> Cancel(const std::string& name,
                                                    const std::string& tenant)
      ABSL_LOCKS_EXCLUDED(index_->mu);

  // Operations kept (after dropping expired ones).
  size_t size() ABSL_LOCKS_EXCLUDED(index_->mu);
  // Operations kept by state (mirrors included), for the placement_operations gauge.
  struct Counts {
    int64_t pending = 0;
    int64_t done = 0;
  };
  Counts CountByState() ABSL_LOCKS_EXCLUDED(index_->mu);
  // Finished operations dropped before their TTL to make room for new ones.
  int64_t evicted_early() ABSL_LOCKS_EXCLUDED(index_->mu);

 private:
  // Makes `op` visible, or returns the live operation with the same request_id or the same name (then
  // *inserted is false).
  absl::StatusOr<std::shared_ptr<Operation>> Insert(std::shared_ptr<Operation> op, bool* inserted)
      ABSL_LOCKS_EXCLUDED(index_->mu);
  std::shared_ptr<Operation> NewOperation(OperationSpec spec, bool mirror = false);
  void ExpireLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(index_->mu);
  // Forgets the finished operation that finished first; false when none is kept.
  bool DropOldestFinishedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(index_->mu);

  const OperationRegistryOptions options_;
  const Clock* const clock_;
  JobManager* const jobs_;
  const std::shared_ptr<OperationIndex> index_;
  int64_t evicted_early_ = 0;  // guarded by index_->mu
};

// "operations/" + 32 lower-case hex digits from the OS's cryptographic random source.
std::string NewOperationName();

}  // namespace placement::jobs

#endif  // PLACEMENT_SERVICE_JOBS_OPERATION_REGISTRY_H_
