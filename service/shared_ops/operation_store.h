// operation_store.h — the Redis records that let every replica see, follow, cancel and take over a
// long-running operation (issue 15). Only data and Redis round trips here; who calls what and when is
// operation_coordinator.h.
//
// Layout (every key starts with key_prefix + "o1:"; "o1" = version of this layout):
//   op:<operation name>  hash   tenant, request_id, request_digest, algorithm, job, request_index (int32
//                               LE, the caller's op order), num_devices, state (pending|done|cancelled),
//                               result (done from the start: the key of its value), created_at_ns.
//                               Expires: pending = job lifetime; after its job ends = ttl_after_done.
//   job:<job key>        hash   state (queued|running|done|failed), owner (replica id), entry (its
//                               stream entry), waiters (live operations), cancel (1 = nobody waits),
//                               stage, fraction, best_makespan_ns, error_code, error_message, result
//                               (key of the value), queue_ns, solve_ns, tenant, and what the job was
//                               submitted with: lease_ms (its owner's lease), time_limit_ns, request
//                               (stored | too_large | over_budget: whether req: exists).
//   jobops:<job key>     set    the op keys waiting for the job (their expiry moves when it ends).
//   req:<job key>        string the serialized PlaceRequest, so that another replica can take over;
//                               only for requests up to a size bound and within the tenant's budget.
//   reqbytes:<tenant>    hash   job key → bytes of its stored request, and `~total`: the tenant's
//                               budget of request bytes in Redis (recounted when it seems exceeded).
//   jobs                 stream one entry {job: <job key>} per job; consumer group "replicas".
//
// A job's lease is its entry's idle time in the group's pending list: the owner renews its entries
// (XCLAIM with min-idle 0, but only of entries still in its own pending list, so a renewal never steals
// a job back from a replica that took it over); any replica may claim entries idle for longer than
// both its own lease and the job's lease_ms. Entries whose job ended, was cancelled or never existed
// are acknowledged and deleted by whoever sees them first (the owner when it lets a job go, or the
// claim, which drops them without counting them against the claimer's free workers). Results are values
// in the shared result tier's format (RedisResultCache::EncodeValue) under a key the caller chooses.
//
// Every call is one round trip (a Lua script or a pipeline); failures are UNAVAILABLE (connection) or
// INTERNAL (error reply, redis_client.h's ErrorReplyCode says which). Everything read back is checked
// (states, numbers, lengths: every field is bounded, and values longer than kMaxFieldBytes are cut in
// Redis before they travel); a record that fails is DATA_LOSS, never passed on. Scripts compute a few
// keys from the prefix, so this needs a standalone Redis 7 (or one hash slot), not Redis Cluster.
//
// Example:
//   OperationStore store(&redis, {.key_prefix = "placement:", .consumer = ReplicaId()});
//   absl::StatusOr<SubmitOutcome> outcome = store.Submit(operation, job);
//   if (outcome->result == SubmitResult::kCreated) { ...run, store.Renew({outcome->entry_id})... }
//   store.Complete(completion);
#ifndef PLACEMENT_SERVICE_SHARED_OPS_OPERATION_STORE_H_
#define PLACEMENT_SERVICE_SHARED_OPS_OPERATION_STORE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "service/cache/redis_client.h"

namespace placement::shared_ops {

// The Redis connection layer is the one the result cache tier uses (service/cache/redis_client.h).
using cache::RedisClient;
using cache::RedisClientOptions;
using cache::RedisValue;
using cache::ScriptSha1;

enum class OperationState { kPending, kDone, kCancelled };
enum class JobRecordState { kQueued, kRunning, kDone, kFailed };
// Whether a job's request is in Redis (req:) for a takeover.
enum class RequestStorage { kStored, kTooLarge, kOverBudget };

absl::string_view NameOf(OperationState state);
absl::string_view NameOf(JobRecordState state);
absl::string_view NameOf(RequestStorage storage);

// Bounds of what is read back from Redis (longer values are cut in Redis, then refused here).
inline constexpr size_t kMaxFieldBytes = 4096;  // any field but request_index (error messages too)
inline constexpr size_t kMaxStageBytes = 64;

// `operations/` + 32 lower-case hex digits: the only names this service makes.
bool IsOperationName(absl::string_view name);

// A new operation's record.
struct OperationRecord {
  std::string name;
  std::string tenant;
  std::string request_id;
  std::string request_digest;
  std::string algorithm;
  std::string job_key;  // "" for an operation done from the start
  std::vector<int32_t> request_index;
  int32_t num_devices = 0;
  OperationState state = OperationState::kPending;
  std::string result_key;         // done from the start: where its value is
  int cache = 0;                  // v1::CacheResult the submitting replica reported
  int64_t created_at_ns = 0;
};

// A job's record as read back.
struct JobRecord {
  JobRecordState state = JobRecordState::kQueued;
  std::string owner;
  std::string entry_id;
  int64_t waiters = 0;
  bool cancel = false;
  std::string stage;
  double fraction = 0;
  int64_t best_makespan_ns = 0;
  int error_code = 0;
  std::string error_message;
  std::string result_key;
  int64_t queue_ns = 0;
  int64_t solve_ns = 0;

  bool finished() const {
    return state == JobRecordState::kDone || state == JobRecordState::kFailed;
  }
};

// What Lookup / Cancel read in one round trip.
struct OperationView {
  OperationRecord operation;
  std::optional<JobRecord> job;  // absent: done from the start, or the job's record expired
  std::optional<std::string> result_value;  // when done and the value is still there
};
// An operation read back: its view, nullopt when unknown or expired, DATA_LOSS when corrupt.
using ViewOrGone = absl::StatusOr<std::optional<OperationView>>;

struct NewJob {
  std::string job_key;
  std::string tenant;  // whose queue a replica that takes the job over puts it in
  // Sent only when it may be stored (`storage` = kStored); empty for kTooLarge.
  std::string serialized_request;
  RequestStorage storage = RequestStorage::kStored;
  // Bytes of requests the tenant may have stored at once (0 = unlimited); over it the request is
  // not stored (the operation is shared all the same; only a takeover is impossible).
  int64_t tenant_request_budget_bytes = 0;
  absl::Duration lifetime;    // expiry of the job's records while it is pending
  absl::Duration lease;       // the submitting replica's lease: nobody claims the job sooner
  absl::Duration time_limit;  // what a replica taking the job over runs it with
};

enum class SubmitResult {
  kCreated,  // a new job, owned by this replica; its entry is in this replica's pending list
  kJoined,   // another live job with the same key: this operation waits for it
  kExisted,  // the operation was recorded already (an earlier attempt whose reply was lost)
};

struct SubmitOutcome {
  SubmitResult result = SubmitResult::kCreated;
  std::string owner;     // the replica running (or queueing) the job ("" if unknown)
  std::string entry_id;  // the job's stream entry
  RequestStorage storage = RequestStorage::kStored;
};

struct ClaimedEntry {
  std::string entry_id;
  std::string job_key;
};

struct ClaimOutcome {
  std::vector<ClaimedEntry> claimed;
  int64_t dropped = 0;  // entries of ended, cancelled or unknown jobs, acknowledged and deleted
  // Expired under our lease but not under the longer one their owner renews with.
  int64_t waiting_for_longer_lease = 0;
  absl::Duration longest_lease;  // the longest lease_ms seen among the entries looked at
};

struct TakenJob {
  std::string serialized_request;
  std::string tenant;
  absl::Duration time_limit;  // zero when the record does not say (an older replica wrote it)
};

struct Completion {
  std::string job_key = {};
  std::string entry_id = {};
  absl::Status error = {};           // ok = done with result_value
  std::string result_key = {};       // where result_value goes
  std::string result_value = {};     // RedisResultCache::EncodeValue
  absl::Duration result_ttl = {};    // of result_value
  absl::Duration ttl_after_done = {};
  absl::Duration queue_time = {};
  absl::Duration solve_time = {};
};

struct ProgressUpdate {
  std::string job_key;
  JobRecordState state = JobRecordState::kQueued;  // queued | running
  std::string stage;
  double fraction = 0;
  int64_t best_makespan_ns = 0;
};

struct OperationStoreOptions {
  std::string key_prefix = "placement:";
  // This replica's consumer name in the group (replica_id.h).
  std::string consumer;
};

class OperationStore {
 public:
  static constexpr char kGroup[] = "replicas";
  // v1::COALESCED, recorded as the cache result of an operation that joined a live job.
  static constexpr int kCoalesced = 3;

  // `redis` must outlive the store.
  OperationStore(RedisClient* redis, OperationStoreOptions options);

  // One script: the operation's record, and either joins the live job with the same key (waiters + 1)
  // or creates the job (owner = this replica), its request (if it may be stored) and its stream
  // entry, read at once into this replica's pending list (so the entry is exactly ours). Idempotent
  // per operation name: when the record exists already (the same call, sent before and run late by
  // a Redis that stalled), nothing is written and kExisted says whose job it waits for.
  absl::StatusOr<SubmitOutcome> Submit(const OperationRecord& operation, const NewJob& job);
  // Undoes a Submit that created a job this replica then could not admit.
  absl::Status Abandon(const std::string& operation_name, const std::string& job_key,
                       const std::string& entry_id);
  // An operation done from the start (a cache hit): its record (expiring after `ttl`) and its value
  // (after `value_ttl`), one round trip.
  absl::Status RecordDone(const OperationRecord& operation, const std::string& result_value,
                          absl::Duration value_ttl, absl::Duration ttl);

  // The operation, its job and (when done) its value; nullopt when unknown or expired; DATA_LOSS when
  // a field fails its checks.
  ViewOrGone Lookup(const std::string& operation_name);
  // Lookup of several operations in one round trip (what mirrors follow), one answer per name.
  absl::StatusOr<std::vector<ViewOrGone>> LookupMany(
      const std::vector<std::string>& operation_names);
  // Marks the operation cancelled (unless its job has ended), one waiter less; at zero the job's cancel
  // flag is set. nullopt when unknown, expired or another tenant's.
  ViewOrGone Cancel(const std::string& operation_name, const std::string& tenant);

  // Renews the leases of `entry_ids`; returns those still ours (a missing one was taken over).
  absl::StatusOr<std::vector<std::string>> Renew(const std::vector<std::string>& entry_ids);
  // Our entries made idle for `idle` so that another replica takes them over soon (graceful drain).
  absl::Status HandBack(const std::vector<std::string>& entry_ids, absl::Duration idle);
  // One pass over the entries idle for at least `lease`: those of live jobs whose own lease_ms has
  // expired too are claimed by this replica (at most `count`; 0 = none, only the dead ones go);
  // those of ended, cancelled or unknown jobs (and garbage) are acknowledged and deleted, however
  // many. Looks at most `scan` entries.
  absl::StatusOr<ClaimOutcome> ClaimExpired(absl::Duration lease, int count, int scan = 1000);
  // For a claimed entry: the serialized request, its tenant and time limit, with owner = this
  // replica and lease_ms = `lease`; nullopt when the job has ended, is cancelled, is gone or has no
  // stored request (it then fails with ABORTED saying why; its entry is removed).
  absl::StatusOr<std::optional<TakenJob>> TakeOver(const ClaimedEntry& entry, absl::Duration lease);

  // Removes the group's consumers (replicas) with nothing pending that were idle for `idle`: every
  // process start adds one. Returns how many went.
  absl::StatusOr<int64_t> ForgetIdleConsumers(absl::Duration idle);

  // Progress of jobs this replica owns (writes skip jobs it no longer owns).
  absl::Status WriteProgress(const std::vector<ProgressUpdate>& updates);
  // The cancel flags of `job_keys`, in order.
  absl::StatusOr<std::vector<bool>> CancelFlags(const std::vector<std::string>& job_keys);
  // Result (or error), job state, expiries, entry acknowledged and deleted. False when another replica
  // owns (or finished) the job: nothing is written.
  absl::StatusOr<bool> Complete(const Completion& completion);
  // The job could not be completed because Redis is out of memory (an OOM reply with maxmemory and
  // noeviction): frees its request and records `completion.error` in a few small fields, from a
  // script allowed to run over maxmemory, so that the replicas following it end instead of waiting.
  absl::StatusOr<bool> RecordUnstoredResult(const Completion& completion);
  // The owner lets go of a job everybody cancelled (its cancel flag): the job ends CANCELLED, its
  // request goes, and its entry is acknowledged and deleted at once (no replica will ever look at it
  // again). Only when this replica still owns the job with that entry.
  absl::StatusOr<bool> FinishCancelled(const std::string& job_key, const std::string& entry_id,
                                       absl::Duration ttl_after_done);

  // How long Redis has been up (INFO server): a young Redis lost what it held before (no
  // persistence), and replicas may still be publishing what they made while it was away.
  absl::StatusOr<absl::Duration> RedisUptime();

  std::string OperationKey(const std::string& name) const;
  std::string JobKey(const std::string& job_key) const;
  std::string RequestKey(const std::string& job_key) const;
  std::string StreamKey() const;
  std::string RequestBudgetKey(const std::string& tenant) const;
  // Where results that the shared result tier does not keep (time-limited) go.
  std::string ResultKey(const std::string& job_key) const;
  const std::string& consumer() const { return options_.consumer; }

 private:
  std::string Prefix() const;

  RedisClient* const redis_;
  const OperationStoreOptions options_;
};

// Packs and unpacks the caller's op order (int32 little-endian). Unpacking accepts only a permutation
// of 0..n-1 (nullopt otherwise): the bytes come from Redis, and the index is used to write the result.
std::string PackRequestIndex(const std::vector<int32_t>& index);
std::optional<std::vector<int32_t>> UnpackRequestIndex(absl::string_view bytes);

// host:pid:random — unique per process, readable in Redis.
std::string NewReplicaId();

}  // namespace placement::shared_ops

#endif  // PLACEMENT_SERVICE_SHARED_OPS_OPERATION_STORE_H_
