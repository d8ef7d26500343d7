// operation_coordinator.h — long-running operations that any replica can serve (issue 15), over the
// Redis records of operation_store.h. The core (PlacementCore) calls it at four points when --redis is
// set: Submit (instead of a local-only job), RecordDone (a cache hit), Find and Cancel (local registry
// first, then Redis); nothing of this exists without --redis.
//
// What it does:
//  - Submit: one script either joins the job another replica runs for the same request (this replica
//    returns a *mirror*, see operation_registry.h: one solve across replicas) or creates the job here.
//    The owner holds one JobManager waiter per shared job ("the cluster's hold"), released when the job
//    ends, when Redis says every operation waiting for it was cancelled, or when the lease is lost.
//  - One background thread: writes progress (≥ progress_interval apart per job; stage changes at once)
//    and completions (result + state in one script) of the jobs this replica owns; renews their leases
//    every lease/3; polls their cancel flags every cancel_poll_interval; polls the operations mirrored
//    here (and this replica's own shared operations, for cancels from elsewhere) every poll_interval;
//    and, about every takeover_interval while a worker is free, claims jobs whose lease expired (their
//    replica died) and runs them under the same operation names. Solver workers never wait for Redis.
//  - Find/Cancel of a name this replica does not know: one script reads the operation, its job and its
//    result; another tenant's or an unknown name is NOT_FOUND as before. A result read from Redis is
//    checked (format, digest, op count, device range) before it can answer anyone.
//  - Redis trouble: Submit falls back to a local operation under the same name (counted per reason,
//    logged), published to Redis as soon as Redis answers again — if the submit script ran after all
//    (a Redis that stalled runs what was queued), the job it created is adopted, never solved twice.
//    A Find or Cancel that needs Redis answers UNAVAILABLE with RetryInfo when Redis does not answer
//    (or is out of memory, loading, busy), INTERNAL for another error reply (WRONGTYPE: no retry
//    helps), DATA_LOSS for a corrupt record; an unknown name is UNAVAILABLE, not NOT_FOUND, while
//    Redis restarted less than publish_window ago. A failed lease renewal is counted and the job goes
//    on; a completion that cannot be written is retried while Redis does not answer, and when Redis
//    refuses it for lack of memory the job is recorded failed (ABORTED) so that its followers end.
//  - Drain: HandBack() makes this replica's unfinished jobs claimable at once by the others.
//  - Time comes from `clock`; Redis errors, fallbacks, takeovers and refused requests are logged
//    through `log`, each kind at most once per log_interval (rate_limited_log.h).
//
// Example:
//   OperationCoordinator coordinator(options, &redis, &store, &jobs, &registry, rebuild);
//   coordinator.Start();
//   absl::StatusOr<std::shared_ptr<jobs::Operation>> op = coordinator.Submit(std::move(submit), &cache);
//   ... coordinator.Find(name, tenant) on any replica ...
#ifndef PLACEMENT_SERVICE_SHARED_OPS_OPERATION_COORDINATOR_H_
#define PLACEMENT_SERVICE_SHARED_OPS_OPERATION_COORDINATOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "placement/v1/placement.pb.h"
#include "service/jobs/job_manager.h"
#include "service/jobs/operation_registry.h"
#include "service/shared_ops/operation_store.h"
#include "service/shared_ops/rate_limited_log.h"

namespace placement::shared_ops {

struct CoordinatorOptions {
  // A job whose owner stops renewing for this long is taken over (--operation_lease, 1 s..10 s).
  absl::Duration lease = absl::Seconds(5);
  // Mirrors follow their remote operation this often (--operation_poll_interval).
  absl::Duration poll_interval = absl::Milliseconds(100);
  absl::Duration cancel_poll_interval = absl::Milliseconds(250);
  // XAUTOCLAIM of expired leases, while a worker is free (takeover ≤ lease + this + a poll).
  absl::Duration takeover_interval = absl::Milliseconds(500);
  absl::Duration progress_interval = absl::Milliseconds(250);
  // As OperationRegistryOptions::ttl_after_done.
  absl::Duration ttl_after_done = absl::Minutes(15);
  // The shared result tier's key prefix and value TTL (RedisCacheOptions): results it may keep are
  // written there, so that a cache hit anywhere and an operation read the same bytes.
  std::string result_key_prefix = "placement:";
  absl::Duration result_ttl = absl::Hours(24);
  // Suggested wait sent with UNAVAILABLE.
  absl::Duration retry_delay = absl::Seconds(1);
  // Requests larger than this (serialized) are not stored in Redis (--operation_max_request_bytes):
  // their operations are shared all the same, but no other replica can take their job over.
  int64_t max_request_bytes = int64_t{8} << 20;
  // Bytes of requests one tenant may have stored in Redis at once (--operation_tenant_request_bytes;
  // 0 = unlimited): a tenant's pending requests never crowd out the other tenants' records.
  int64_t tenant_request_bytes = int64_t{64} << 20;
  // After a Redis restart younger than this, an operation name nobody knows is UNAVAILABLE ("retry"),
  // not NOT_FOUND: the replica that made it while Redis was away may not have published it yet.
  absl::Duration publish_window = absl::Seconds(10);
  // Null = Clock::Real().
  const Clock* clock = nullptr;
  // Where log lines go (null = nowhere); each kind of event at most once per log_interval.
  std::function<void(absl::string_view)> log = nullptr;
  absl::Duration log_interval = absl::Minutes(1);
};

// What the core knows about a submitted request.
struct SharedSubmit {
  jobs::OperationSpec operation;  // its name is chosen by the coordinator
  std::string job_key;            // the local single-flight key (JobSpec::request_digest)
  int32_t num_devices = 0;
  absl::Duration time_limit;
  std::string serialized_request;  // what another replica rebuilds the job from
  // The local job (called at most twice: the operation's waiter and the cluster's hold).
  std::function<jobs::JobSpec()> make_job;
};

// Rebuilds the job of a request another replica submitted (takeover): the JobSpec (whose
// request_digest must be the job key) and the request_digest of the request. `time_limit` is the one
// the job was submitted with (zero when its record does not say: use this replica's own).
struct RebuiltJob {
  jobs::JobSpec spec;
  std::string request_digest;
};
using JobRebuilder = std::function<absl::StatusOr<RebuiltJob>(
    const std::string& serialized_request, const std::string& tenant, absl::Duration time_limit)>;

struct CoordinatorStats {
  int64_t taken_over = 0;              // jobs this replica took over from a replica that went away
  int64_t remote_cancels = 0;          // cancel flags (set elsewhere) this replica acted on
  int64_t lease_renewals_failed = 0;   // renewal round trips that failed
  int64_t leases_lost = 0;             // jobs another replica took over from this one
  // Work that stayed local-only because Redis failed, by reason ("submit", "record").
  std::map<std::string, int64_t> fallbacks;
  // Of those, published to Redis once it answered again, and still waiting to be.
  int64_t published = 0;
  int64_t unpublished = 0;
  // Shared operations whose request was not stored in Redis, by reason ("size", "tenant_budget").
  std::map<std::string, int64_t> requests_not_stored;
  // Failed round trips by kind: "connection" (no answer), "oom" (out of memory), "reply" (another
  // error reply).
  std::map<std::string, int64_t> redis_errors;
  // Stream entries of ended, cancelled or unknown jobs dropped by this replica's claims.
  int64_t dead_entries_dropped = 0;
  int64_t round_trips = 0;
  int64_t owned_jobs = 0;
  int64_t followed_operations = 0;
};

class OperationCoordinator {
 public:
  // Everything passed must outlive the coordinator; destroy it before `jobs` shuts down. `store` (on
  // `redis`) serves the calls a caller waits for (Submit, Find, Cancel, RecordDone), so its client has
  // the short --redis_timeout; the background thread uses `background` (on `background_redis`), whose
  // client may allow more (a completion carries a whole result). Both must use the same Redis and
  // consumer name; null = `store`.
  OperationCoordinator(CoordinatorOptions options, RedisClient* redis, OperationStore* store,
                       jobs::JobManager* jobs, jobs::OperationRegistry* operations,
                       JobRebuilder rebuild, RedisClient* background_redis = nullptr,
                       OperationStore* background = nullptr);
  // Stops the background thread and releases the holds (jobs nobody else waits for are cancelled).
  ~OperationCoordinator();
  OperationCoordinator(const OperationCoordinator&) = delete;
  OperationCoordinator& operator=(const OperationCoordinator&) = delete;

  void Start();
  // Asks the background thread to stop: it ends after its current round trip (the destructor waits
  // for it). Redis errors from then on are neither counted nor logged: at shutdown the server closes
  // its Redis connections on purpose.
  void Stop();

  // A pending operation: a local one whose job this replica runs for the cluster, a mirror of the job
  // another replica runs (*cache = COALESCED), or, when Redis fails, a local-only one. Admission errors
  // as JobManager::Acquire.
  absl::StatusOr<std::shared_ptr<jobs::Operation>> Submit(SharedSubmit submit,
                                                          v1::CacheResult* cache);
  // Makes a finished operation (a cache hit) visible to the other replicas. Failures are counted.
  void RecordDone(const jobs::Operation& operation, int32_t num_devices);

  absl::StatusOr<std::shared_ptr<jobs::Operation>> Find(const std::string& name,
                                                        const std::string& tenant);
  absl::StatusOr<std::shared_ptr<jobs::Operation>> Cancel(const std::string& name,
                                                          const std::string& tenant);

  // Drain: this replica's unfinished shared jobs become claimable by the others within about a
  // takeover interval; they write no completion from here on.
  void HandBack();

  CoordinatorStats Stats() const;

 private:
  struct OwnedJob {
    std::string entry_id;
    std::string request_digest;
    std::shared_ptr<jobs::Job> hold;  // null once released
    absl::Time last_progress_write = absl::InfinitePast();
    std::string last_stage = {};
    jobs::JobState last_state = jobs::JobState::kQueued;
    bool handed_back = false;
    bool lease_lost = false;
    bool progress_dirty = false;
    int refused_completions = 0;  // error replies to its completion that no retry changes
  };
  struct Inbox;  // job keys whose local job changed (shared with the jobs' listeners)
  // An operation made while Redis did not answer, to publish once it does.
  struct Unpublished {
    std::weak_ptr<jobs::Operation> operation = {};
    std::shared_ptr<jobs::Job> hold = {};  // the cluster's hold on its job (null: done from the start)
    OperationRecord record = {};
    NewJob job = {};
    absl::Duration value_ttl = {};  // done from the start: of its value
    std::string value = {};         // done from the start: its value (RedisResultCache::EncodeValue)
  };

  absl::StatusOr<std::shared_ptr<jobs::Operation>> SubmitLocally(SharedSubmit submit,
                                                                 OperationRecord record,
                                                                 NewJob job,
                                                                 v1::CacheResult* cache,
                                                                 const absl::Status& cause);
  // The completion of `job_key` from a finished local job's result.
  Completion CompletionOf(const std::string& job_key, const std::string& entry_id,
                          const std::string& request_digest,
                          const absl::StatusOr<jobs::PlacementPtr>& placement,
                          absl::Duration queue_time, absl::Duration solve_time) const;
  // Counts (and logs, rate-limited) a request a new job's record was made without.
  void NoteStorage(const OperationRecord& record, RequestStorage storage) ABSL_LOCKS_EXCLUDED(mu_);
  // Counts (and logs, rate-limited) a failed round trip of `what`.
  void NoteRedisError(absl::string_view what, const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);
  // What a caller gets when a round trip its call needs failed.
  absl::Status StoreError(const absl::Status& cause) const;
  // NOT_FOUND, or UNAVAILABLE while a Redis restart is younger than publish_window.
  absl::Status NotFound(const std::string& name, absl::Status not_found);
  // Starts owning `job_key` with `hold` (one waiter of its local job).
  void Own(const std::string& job_key, const std::string& entry_id,
           const std::string& request_digest, std::shared_ptr<jobs::Job> hold)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Makes (or finds) the mirror of `view` and brings it up to date.
  absl::StatusOr<std::shared_ptr<jobs::Operation>> Mirror(const OperationView& view,
                                                          v1::CacheResult cache);
  // Applies a remote state to a mirror (progress or end); true when it ended.
  bool Apply(jobs::Operation& mirror, const OperationView& view);
  absl::StatusOr<jobs::PlacementPtr> VerifiedResult(const OperationView& view) const;
  void Follow(const std::shared_ptr<jobs::Operation>& operation) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status RedisUnavailable(const absl::Status& cause) const;

  void Loop();
  void WriteChanges(absl::Time now);
  void PollFollowed();
  void PollCancelFlags();
  void RenewLeases();
  void TakeOverExpired();
  void PublishUnpublished();
  // Stops owning `job_key`: releases its hold (if held); returns its entry ("" if not owned).
  std::string ReleaseHold(const std::string& job_key) ABSL_LOCKS_EXCLUDED(mu_);

  const CoordinatorOptions options_;
  RedisClient* const redis_;
  OperationStore* const store_;
  RedisClient* const background_redis_;
  OperationStore* const background_;  // only the background thread (and HandBack) use it
  jobs::JobManager* const jobs_;
  jobs::OperationRegistry* const operations_;
  const JobRebuilder rebuild_;
  const Clock* const clock_;
  RateLimitedLog log_;
  const std::shared_ptr<Inbox> inbox_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, OwnedJob> owned_ ABSL_GUARDED_BY(mu_);
  // Mirrors and this replica's own shared operations, by name, while pending.
  absl::flat_hash_map<std::string, std::weak_ptr<jobs::Operation>> followed_ ABSL_GUARDED_BY(mu_);
  // By operation name.
  absl::flat_hash_map<std::string, Unpublished> unpublished_ ABSL_GUARDED_BY(mu_);
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  CoordinatorStats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace placement::shared_ops

#endif  // PLACEMENT_SERVICE_SHARED_OPS_OPERATION_COORDINATOR_H_
