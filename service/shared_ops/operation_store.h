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
//                               (key of the value), queue_ns, solve_ns.
//   jobops:<job key>     set    the op keys waiting for the job (their expiry moves when it ends).
//   req:<job key>        string the serialized PlaceRequest, so that another replica can take over.
//   jobs                 stream one entry {job: <job key>} per job; consumer group "replicas".
//
// A job's lease is its entry's idle time in the group's pending list: the owner renews its entries
// (XCLAIM with min-idle 0, but only of entries still in its own pending list, so a renewal never steals
// a job back from a replica that took it over); any replica may XAUTOCLAIM entries idle for longer than
// the lease. Results are values in the shared result tier's format (RedisResultCache::EncodeValue)
// under a key the caller chooses.
//
// Every call is one round trip (a Lua script or a pipeline); failures are UNAVAILABLE (connection) or
// INTERNAL (error reply). Scripts compute a few keys from the prefix, so this needs a standalone Redis
// (or one hash slot), not Redis Cluster.
//
// Example:
//   OperationStore store(&redis, {.key_prefix = "placement:", .consumer = ReplicaId()});
//   absl::StatusOr<SubmitOutcome> outcome = store.Submit(operation, job);
//   if (!outcome->joined) { ...run the job, store.Renew({outcome->entry_id}) every lease/3... }
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
#include "absl/time/time.h"
#include "service/cache/redis_client.h"

namespace placement::shared_ops {

// The Redis connection layer is the one the result cache tier uses (service/cache/redis_client.h).
using cache::RedisClient;
using cache::RedisClientOptions;
using cache::RedisValue;
using cache::ScriptSha1;

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
  std::string state = "pending";  // pending | done | cancelled
  std::string result_key;         // done from the start: where its value is
  int cache = 0;                  // v1::CacheResult the submitting replica reported
  int64_t created_at_ns = 0;
};

// A job's record as read back.
struct JobRecord {
  std::string state;  // queued | running | done | failed
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

  bool finished() const { return state == "done" || state == "failed"; }
};

// What Lookup / Cancel read in one round trip.
struct OperationView {
  OperationRecord operation;
  std::optional<JobRecord> job;  // absent: done from the start, or the job's record expired
  std::optional<std::string> result_value;  // when done and the value is still there
};

struct NewJob {
  std::string job_key;
  std::string tenant;  // whose queue a replica that takes the job over puts it in
  std::string serialized_request;
  absl::Duration lifetime;  // expiry of the job's records while it is pending
};

struct SubmitOutcome {
  bool joined = false;   // another live job with the same key: this operation waits for it
  std::string owner;     // the replica running (or queueing) the job
  std::string entry_id;  // created: the stream entry, now in this replica's pending list
};

struct ClaimedEntry {
  std::string entry_id;
  std::string job_key;
};

struct TakenJob {
  std::string serialized_request;
  std::string tenant;
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
  std::string state;  // queued | running
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
  // or creates the job (owner = this replica), its request and its stream entry, read at once into
  // this replica's pending list (so the entry is exactly ours).
  absl::StatusOr<SubmitOutcome> Submit(const OperationRecord& operation, const NewJob& job);
  // Undoes a Submit that created a job this replica then could not admit.
  absl::Status Abandon(const std::string& operation_name, const std::string& job_key,
                       const std::string& entry_id);
  // An operation done from the start (a cache hit): its record (expiring after `ttl`) and its value
  // (after `value_ttl`), one round trip.
  absl::Status RecordDone(const OperationRecord& operation, const std::string& result_value,
                          absl::Duration value_ttl, absl::Duration ttl);

  // The operation, its job and (when done) its value; nullopt when unknown or expired.
  absl::StatusOr<std::optional<OperationView>> Lookup(const std::string& operation_name);
  // Lookup of several operations in one round trip (what mirrors follow); nullopt for the gone ones.
  absl::StatusOr<std::vector<std::optional<OperationView>>> LookupMany(
      const std::vector<std::string>& operation_names);
  // Marks the operation cancelled (unless its job has ended), one waiter less; at zero the job's cancel
  // flag is set. nullopt when unknown, expired or another tenant's.
  absl::StatusOr<std::optional<OperationView>> Cancel(const std::string& operation_name,
                                                      const std::string& tenant);

  // Renews the leases of `entry_ids`; returns those still ours (a missing one was taken over).
  absl::StatusOr<std::vector<std::string>> Renew(const std::vector<std::string>& entry_ids);
  // Our entries made idle for `idle` so that another replica takes them over soon (graceful drain).
  absl::Status HandBack(const std::vector<std::string>& entry_ids, absl::Duration idle);
  // Entries whose lease expired, now claimed by this replica (at most `count`).
  absl::StatusOr<std::vector<ClaimedEntry>> ClaimExpired(absl::Duration lease, int count);
  // For a claimed entry: the serialized request and its tenant, with owner = this replica; nullopt when
  // the job has ended, is cancelled or is gone (its entry is then removed).
  absl::StatusOr<std::optional<TakenJob>> TakeOver(const ClaimedEntry& entry);

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

  std::string OperationKey(const std::string& name) const;
  std::string JobKey(const std::string& job_key) const;
  std::string RequestKey(const std::string& job_key) const;
  std::string StreamKey() const;
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
