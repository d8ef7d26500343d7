#include "service/shared_ops/operation_coordinator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "service/cache/redis_result_cache.h"
#include "service/status_payloads/status_payloads.h"

namespace placement::shared_ops {
namespace {

JobRecordState RecordState(jobs::JobState state) {
  return state == jobs::JobState::kQueued ? JobRecordState::kQueued : JobRecordState::kRunning;
}

absl::Status RemoteError(int code, const std::string& message) {
  if (code <= 0 || code > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
    return absl::UnknownError(absl::StrCat("the job failed on another replica: ", message));
  }
  return absl::Status(static_cast<absl::StatusCode>(code), message);
}

constexpr absl::Duration kConsumerCleanupInterval = absl::Minutes(1);
constexpr absl::Duration kConsumerIdleBeforeForgotten = absl::Hours(1);
// Operations made while Redis was away that wait to be published; beyond this the oldest are left
// local-only (each holds its request in memory until then).
constexpr size_t kMaxUnpublished = 10'000;
// A completion Redis refuses with an error reply that no retry changes (WRONGTYPE on a tampered
// record, say) is given up after this many tries.
constexpr int kMaxRefusedCompletions = 3;

bool Finite(absl::Duration duration) {
  return duration > absl::ZeroDuration() && duration != absl::InfiniteDuration();
}

// The kind of a failed round trip, for the metric and the log.
const char* ErrorKind(const absl::Status& status) {
  if (cache::ErrorReplyCode(status) == "OOM") return "oom";
  if (absl::IsUnavailable(status)) return "connection";
  return "reply";
}

}  // namespace

struct OperationCoordinator::Inbox {
  absl::Mutex mu;
  absl::flat_hash_set<std::string> changed ABSL_GUARDED_BY(mu);
  bool stopping ABSL_GUARDED_BY(mu) = false;

  void Mark(const std::string& job_key) {
    absl::MutexLock lock(&mu);
    changed.insert(job_key);
  }
};

OperationCoordinator::OperationCoordinator(CoordinatorOptions options, RedisClient* redis,
                                           OperationStore* store, jobs::JobManager* jobs,
                                           jobs::OperationRegistry* operations,
                                           JobRebuilder rebuild, RedisClient* background_redis,
                                           OperationStore* background)
    : options_(std::move(options)),
      redis_(redis),
      store_(store),
      background_redis_(background_redis != nullptr ? background_redis : redis),
      background_(background != nullptr ? background : store),
      jobs_(jobs),
      operations_(operations),
      rebuild_(std::move(rebuild)),
      clock_(options_.clock != nullptr ? options_.clock : Clock::Real()),
      log_(options_.log, options_.log_interval, clock_),
      inbox_(std::make_shared<Inbox>()) {}

OperationCoordinator::~OperationCoordinator() {
  Stop();
  if (thread_.joinable()) thread_.join();
  std::vector<std::shared_ptr<jobs::Job>> holds;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [key, owned] : owned_) {
      if (owned.hold != nullptr) holds.push_back(std::move(owned.hold));
    }
    owned_.clear();
    for (auto& [name, unpublished] : unpublished_) {
      if (unpublished.hold != nullptr) holds.push_back(std::move(unpublished.hold));
    }
    unpublished_.clear();
  }
  for (const std::shared_ptr<jobs::Job>& hold : holds) jobs_->Release(hold);
}

void OperationCoordinator::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void OperationCoordinator::Stop() {
  absl::MutexLock lock(&inbox_->mu);
  inbox_->stopping = true;
}

absl::Status OperationCoordinator::RedisUnavailable(const absl::Status& cause) const {
  return status_payloads::WithRetryDelay(
      absl::UnavailableError(absl::StrCat(
          "operations are shared through Redis, which did not answer (", cause.message(),
          "); retry")),
      options_.retry_delay);
}

absl::Status OperationCoordinator::StoreError(const absl::Status& cause) const {
  if (absl::IsUnavailable(cause)) return RedisUnavailable(cause);
  if (absl::IsDataLoss(cause)) return cause;  // a corrupt record: never an answer
  if (cache::IsPassingErrorReply(cause)) {
    // Out of memory, loading, busy: Redis answers, just not now.
    return status_payloads::WithRetryDelay(
        absl::UnavailableError(absl::StrCat(
            "operations are shared through Redis, which cannot serve this now (", cause.message(),
            "); retry")),
        options_.retry_delay);
  }
  // WRONGTYPE, NOAUTH, ...: Redis answered, and the same question gets the same answer.
  return absl::InternalError(absl::StrCat(
      "operations are shared through Redis, which answered with an error: ", cause.message()));
}

void OperationCoordinator::NoteRedisError(absl::string_view what, const absl::Status& status) {
  {
    absl::MutexLock lock(&inbox_->mu);
    if (inbox_->stopping) return;  // the connections were closed on purpose
  }
  const char* kind = ErrorKind(status);
  {
    absl::MutexLock lock(&mu_);
    ++stats_.redis_errors[kind];
  }
  if (std::string(kind) == "oom") {
    log_.Log("oom", absl::StrCat(
                        "shared operations: Redis is out of memory (maxmemory reached; with the "
                        "noeviction policy it refuses every write): ",
                        what, " failed: ", status.message()));
  } else {
    log_.Log(kind, absl::StrCat("shared operations: ", what, " failed: ", status.message()));
  }
}

void OperationCoordinator::NoteStorage(const OperationRecord& record, RequestStorage storage) {
  if (storage == RequestStorage::kStored) return;
  const bool too_large = storage == RequestStorage::kTooLarge;
  {
    absl::MutexLock lock(&mu_);
    ++stats_.requests_not_stored[too_large ? "size" : "tenant_budget"];
  }
  log_.Log(too_large ? "request_size" : "request_budget",
           absl::StrCat("shared operations: the request of ", record.name, " (tenant \"",
                        record.tenant, "\") is not stored in Redis: ",
                        too_large ? absl::StrCat("larger than --operation_max_request_bytes=",
                                                 options_.max_request_bytes)
                                  : absl::StrCat("the tenant's --operation_tenant_request_bytes=",
                                                 options_.tenant_request_bytes, " are in use"),
                        "; the operation is shared, but only this replica can run its job"));
}

absl::Status OperationCoordinator::NotFound(const std::string& name, absl::Status not_found) {
  // A Redis that restarted a moment ago knows nothing yet of the operations replicas made while it
  // was away: they are published within a poll interval or two of Redis answering again.
  absl::StatusOr<absl::Duration> uptime = store_->RedisUptime();
  if (uptime.ok() && *uptime < options_.publish_window) {
    return status_payloads::WithRetryDelay(
        absl::UnavailableError(absl::StrCat(
            "Redis restarted ", absl::FormatDuration(*uptime), " ago and does not know ", name,
            " yet; the replica that created it may still be publishing it: retry")),
        options_.retry_delay);
  }
  return not_found;
}

// ---- Submit ----

absl::StatusOr<std::shared_ptr<jobs::Operation>> OperationCoordinator::SubmitLocally(
    SharedSubmit submit, OperationRecord record, NewJob job, v1::CacheResult* cache,
    const absl::Status& cause) {
  {
    absl::MutexLock lock(&mu_);
    ++stats_.fallbacks["submit"];
  }
  NoteRedisError("a submit", cause);
  log_.Log("fallback", absl::StrCat(
                           "shared operations: Redis failed for a submit (", cause.message(),
                           "): operation ", record.name,
                           " runs on this replica and is published to Redis once it answers"));
  absl::StatusOr<jobs::Admission> admission = jobs_->Acquire(submit.make_job());
  if (!admission.ok()) return admission.status();
  // The cluster's hold, kept until the operation is published (its owner then holds the job).
  std::shared_ptr<jobs::Job> hold = admission->job;
  jobs_->Join(hold);
  *cache = admission->coalesced ? v1::COALESCED : v1::MISS;
  // The same name: if the submit script ran after all (a Redis that stalled runs what was queued),
  // publishing finds that record and adopts its job instead of leaving an orphan to be solved again.
  absl::StatusOr<std::shared_ptr<jobs::Operation>> op =
      operations_->AddPending(std::move(submit.operation), *std::move(admission));
  if (!op.ok()) {
    jobs_->Release(hold);
    return op;
  }
  std::shared_ptr<jobs::Job> dropped;
  {
    const std::string name = record.name;
    absl::MutexLock lock(&mu_);
    if (unpublished_.size() >= kMaxUnpublished) {
      dropped = std::move(hold);  // stays local-only: Redis has been away for long
    } else {
      unpublished_[name] = Unpublished{.operation = *op,
                                       .hold = std::move(hold),
                                       .record = std::move(record),
                                       .job = std::move(job)};
    }
  }
  if (dropped != nullptr) jobs_->Release(dropped);
  return op;
}

absl::StatusOr<std::shared_ptr<jobs::Operation>> OperationCoordinator::Submit(
    SharedSubmit submit, v1::CacheResult* cache) {
  jobs::OperationSpec& spec = submit.operation;
  spec.name = jobs::NewOperationName();
  OperationRecord record;
  record.name = spec.name;
  record.tenant = spec.tenant;
  record.request_id = spec.request_id;
  record.request_digest = spec.request_digest;
  record.algorithm = spec.algorithm;
  record.job_key = submit.job_key;
  if (spec.request_index != nullptr) record.request_index = *spec.request_index;
  record.num_devices = submit.num_devices;
  record.cache = v1::MISS;
  record.created_at_ns = absl::ToUnixNanos(clock_->Now());
  NewJob job;
  job.job_key = submit.job_key;
  job.tenant = spec.tenant;
  job.tenant_request_budget_bytes = options_.tenant_request_bytes;
  // Long enough for the job to wait, run and be taken over once; refreshed to ttl_after_done when it
  // ends.
  job.lifetime = submit.time_limit + options_.ttl_after_done + 4 * options_.lease;
  job.lease = options_.lease;
  job.time_limit = submit.time_limit;
  if (static_cast<int64_t>(submit.serialized_request.size()) > options_.max_request_bytes) {
    job.storage = RequestStorage::kTooLarge;
  } else {
    job.serialized_request = std::move(submit.serialized_request);
  }
  absl::StatusOr<SubmitOutcome> outcome = store_->Submit(record, job);
  if (!outcome.ok()) {
    return SubmitLocally(std::move(submit), std::move(record), std::move(job), cache,
                         outcome.status());
  }
  if (outcome->result == SubmitResult::kCreated) NoteStorage(record, outcome->storage);

  if (outcome->result != SubmitResult::kCreated && outcome->owner != store_->consumer()) {
    // Another replica runs it: one solve for the cluster; this replica follows it.
    absl::StatusOr<std::shared_ptr<jobs::Operation>> mirror =
        operations_->AddMirror(spec, v1::COALESCED);
    if (!mirror.ok()) {
      (void)store_->Cancel(record.name, record.tenant);  // one waiter less; best effort
      return mirror.status();
    }
    Follow(*mirror);
    *cache = v1::COALESCED;
    return mirror;
  }

  const bool created = outcome->result == SubmitResult::kCreated;
  absl::StatusOr<jobs::Admission> admission = jobs_->Acquire(submit.make_job());
  if (!admission.ok()) {
    if (created) {
      (void)store_->Abandon(record.name, submit.job_key, outcome->entry_id);
    } else {
      (void)store_->Cancel(record.name, record.tenant);
    }
    return admission.status();
  }
  std::shared_ptr<jobs::Job> hold;
  if (created) {
    // The cluster's hold on the very job just admitted: a second Acquire could find it finished
    // already (a fast job) and admit it again — one more solve.
    hold = admission->job;
    jobs_->Join(hold);
  }
  *cache = admission->coalesced ? v1::COALESCED : v1::MISS;
  const std::string request_digest = spec.request_digest;
  absl::StatusOr<std::shared_ptr<jobs::Operation>> op =
      operations_->AddPending(std::move(spec), *std::move(admission));
  if (!op.ok()) {
    if (hold != nullptr) jobs_->Release(hold);
    if (created) {
      (void)store_->Abandon(record.name, submit.job_key, outcome->entry_id);
    } else {
      (void)store_->Cancel(record.name, record.tenant);
    }
    return op.status();
  }
  if (hold != nullptr) Own(submit.job_key, outcome->entry_id, request_digest, std::move(hold));
  Follow(*op);  // a cancel from another replica must reach this operation too
  return op;
}

void OperationCoordinator::RecordDone(const jobs::Operation& operation, int32_t num_devices) {
  const jobs::Operation::Snapshot snapshot = operation.snapshot();
  if (snapshot.placement == nullptr) return;
  OperationRecord record;
  record.name = operation.name();
  record.tenant = operation.tenant();
  record.request_id = operation.request_id();
  record.request_digest = operation.request_digest();
  record.algorithm = operation.algorithm();
  if (operation.request_index() != nullptr) record.request_index = *operation.request_index();
  record.num_devices = num_devices;
  record.state = OperationState::kDone;
  record.cache = snapshot.cache;
  record.created_at_ns = absl::ToUnixNanos(operation.created_at());
  absl::Duration value_ttl = options_.ttl_after_done;
  if (snapshot.placement->provenance().time_limited() || !Finite(options_.result_ttl)) {
    record.result_key = store_->ResultKey(operation.name());
  } else {
    record.result_key = absl::StrCat(options_.result_key_prefix,
                                     cache::RedisResultCache::kKeyVersion, record.request_digest);
    value_ttl = options_.result_ttl;
  }
  std::string value = cache::RedisResultCache::EncodeValue(*snapshot.placement);
  absl::Status recorded = store_->RecordDone(record, value, value_ttl, options_.ttl_after_done);
  if (recorded.ok()) return;
  {
    absl::MutexLock lock(&mu_);
    ++stats_.fallbacks["record"];
  }
  NoteRedisError("recording a cache hit", recorded);
  // Published once Redis answers, like a submit that fell back.
  std::shared_ptr<jobs::Operation> op = operations_->Find(record.name, record.tenant).value_or(nullptr);
  if (op == nullptr) return;
  absl::MutexLock lock(&mu_);
  if (unpublished_.size() >= kMaxUnpublished) return;
  const std::string name = record.name;
  unpublished_[name] = Unpublished{.operation = op,
                                   .record = std::move(record),
                                   .value_ttl = value_ttl,
                                   .value = std::move(value)};
}

void OperationCoordinator::Own(const std::string& job_key, const std::string& entry_id,
                               const std::string& request_digest,
                               std::shared_ptr<jobs::Job> hold) {
  std::shared_ptr<jobs::Job> job = hold;
  std::shared_ptr<jobs::Job> replaced;
  {
    absl::MutexLock lock(&mu_);
    OwnedJob& owned = owned_[job_key];
    replaced = std::move(owned.hold);  // a stale record of the same key (its job ended)
    owned = OwnedJob{.entry_id = entry_id, .request_digest = request_digest,
                     .hold = std::move(hold)};
  }
  if (replaced != nullptr) jobs_->Release(replaced);
  // The listener only marks the job: Redis is written by the coordinator's thread, never a worker.
  std::shared_ptr<Inbox> inbox = inbox_;
  if (job->AddListener([inbox, job_key](const jobs::Job&) { inbox->Mark(job_key); }) == 0) {
    inbox->Mark(job_key);  // already done
  }
}

void OperationCoordinator::Follow(const std::shared_ptr<jobs::Operation>& operation) {
  if (operation->done()) return;
  absl::MutexLock lock(&mu_);
  followed_[operation->name()] = operation;
}

// ---- Find / Cancel ----

absl::StatusOr<jobs::PlacementPtr> OperationCoordinator::VerifiedResult(
    const OperationView& view) const {
  const OperationRecord& op = view.operation;
  if (!view.result_value.has_value()) {
    return absl::AbortedError(
        "the operation's result is no longer in the shared store (evicted or expired); submit the "
        "request again");
  }
  absl::StatusOr<cache::CachedPlacement> decoded =
      cache::RedisResultCache::DecodeValue(*view.result_value);
  const char* mismatch = nullptr;
  if (!decoded.ok()) {
    mismatch = "it does not decode";
  } else if ((*decoded)->provenance().request_digest() != op.request_digest) {
    mismatch = "its digest is another request's";
  } else if (static_cast<size_t>((*decoded)->device_size()) != op.request_index.size()) {
    mismatch = "its op count differs";
  } else {
    for (int32_t device : (*decoded)->device()) {
      if (device < 0 || device >= op.num_devices) {
        mismatch = "a device is out of range";
        break;
      }
    }
  }
  if (mismatch != nullptr) {
    // Never an answer: a value written by an incompatible build, or tampered with.
    return absl::DataLossError(absl::StrCat(
        "the operation's stored result failed verification (", mismatch,
        "); submit the request again"));
  }
  return jobs::PlacementPtr(*std::move(decoded));
}

bool OperationCoordinator::Apply(jobs::Operation& mirror, const OperationView& view) {
  const OperationRecord& op = view.operation;
  if (op.state == OperationState::kCancelled) {
    mirror.Finish(absl::CancelledError("the operation was cancelled"), absl::ZeroDuration(),
                  absl::ZeroDuration());
    return true;
  }
  if (op.state == OperationState::kDone) {
    mirror.Finish(VerifiedResult(view), absl::ZeroDuration(), absl::ZeroDuration());
    return true;
  }
  if (!view.job.has_value()) {
    mirror.Finish(absl::AbortedError("the operation's job is gone from the shared store (expired, "
                                     "or Redis lost its data); submit the request again"),
                  absl::ZeroDuration(), absl::ZeroDuration());
    return true;
  }
  const JobRecord& job = *view.job;
  if (job.state == JobRecordState::kDone) {
    mirror.Finish(VerifiedResult(view), absl::Nanoseconds(job.queue_ns),
                  absl::Nanoseconds(job.solve_ns));
    return true;
  }
  if (job.state == JobRecordState::kFailed) {
    mirror.Finish(RemoteError(job.error_code, job.error_message), absl::Nanoseconds(job.queue_ns),
                  absl::Nanoseconds(job.solve_ns));
    return true;
  }
  mirror.UpdateProgress({.stage = job.stage.empty() ? std::string("queued") : job.stage,
                         .fraction = job.fraction,
                         .best_makespan_ns = job.best_makespan_ns});
  return false;
}

absl::StatusOr<std::shared_ptr<jobs::Operation>> OperationCoordinator::Mirror(
    const OperationView& view, v1::CacheResult cache) {
  const OperationRecord& op = view.operation;
  jobs::OperationSpec spec;
  spec.name = op.name;
  spec.tenant = op.tenant;
  spec.request_id = op.request_id;
  spec.request_digest = op.request_digest;
  spec.request_index = std::make_shared<const std::vector<int32_t>>(op.request_index);
  spec.algorithm = op.algorithm;
  absl::StatusOr<std::shared_ptr<jobs::Operation>> mirror =
      operations_->AddMirror(std::move(spec), cache);
  if (!mirror.ok()) return mirror;
  if ((*mirror)->mirror() && !Apply(**mirror, view)) Follow(*mirror);
  return mirror;
}

absl::StatusOr<std::shared_ptr<jobs::Operation>> OperationCoordinator::Find(
    const std::string& name, const std::string& tenant) {
  absl::StatusOr<std::shared_ptr<jobs::Operation>> local = operations_->Find(name, tenant);
  if (local.ok()) {
    if ((*local)->mirror() && !(*local)->done()) {
      // A Get must not be a poll interval behind: refresh now (a failure keeps what we know).
      ViewOrGone view = store_->Lookup(name);
      if (view.ok() && view->has_value() && (*view)->operation.tenant == tenant) {
        Apply(**local, **view);
      }
    }
    return local;
  }
  if (!absl::IsNotFound(local.status()) || !IsOperationName(name)) return local;
  ViewOrGone view = store_->Lookup(name);
  if (!view.ok()) return StoreError(view.status());
  if (!view->has_value()) return NotFound(name, local.status());
  if ((*view)->operation.tenant != tenant || (*view)->operation.name != name) {
    return local.status();  // another tenant's: NOT_FOUND as before
  }
  return Mirror(**view, static_cast<v1::CacheResult>((*view)->operation.cache));
}

absl::StatusOr<std::shared_ptr<jobs::Operation>> OperationCoordinator::Cancel(
    const std::string& name, const std::string& tenant) {
  absl::StatusOr<std::shared_ptr<jobs::Operation>> local = operations_->Find(name, tenant);
  if (!local.ok() && (!absl::IsNotFound(local.status()) || !IsOperationName(name))) {
    return local;
  }
  ViewOrGone view = store_->Cancel(name, tenant);
  if (local.ok()) {
    // Known here: cancel it here whatever Redis said (a local-only operation is not in Redis).
    return operations_->Cancel(name, tenant);
  }
  if (!view.ok()) return StoreError(view.status());
  if (!view->has_value()) return NotFound(name, local.status());
  if ((*view)->operation.name != name) return local.status();
  return Mirror(**view, static_cast<v1::CacheResult>((*view)->operation.cache));
}

// ---- Drain ----

void OperationCoordinator::HandBack() {
  std::vector<std::string> entries;
  std::vector<std::shared_ptr<jobs::Job>> holds;
  {
    absl::MutexLock lock(&mu_);
    draining_ = true;
    for (auto& [key, owned] : owned_) {
      if (owned.lease_lost || owned.handed_back) continue;
      owned.handed_back = true;
      entries.push_back(owned.entry_id);
      if (owned.hold != nullptr) holds.push_back(std::move(owned.hold));
    }
  }
  // Idle beyond the lease: the next claim of any other replica takes them.
  if (absl::Status handed = background_->HandBack(entries, options_.lease + absl::Seconds(1));
      !handed.ok()) {
    NoteRedisError("handing jobs back at shutdown", handed);
  }
  for (const std::shared_ptr<jobs::Job>& hold : holds) jobs_->Release(hold);
}

// ---- The background thread ----

void OperationCoordinator::Loop() {
  absl::Time now = clock_->Now();
  absl::Time next_poll = now;
  absl::Time next_cancel_poll = now;
  absl::Time next_renewal = now + options_.lease / 3;
  absl::Time next_takeover = now + options_.takeover_interval;
  absl::Time next_consumer_cleanup = now + kConsumerCleanupInterval;
  while (true) {
    const absl::Time wake = std::min({next_poll, next_cancel_poll, next_renewal, next_takeover});
    {
      absl::MutexLock lock(&inbox_->mu);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(inbox_->mu) {
        return inbox_->stopping || !inbox_->changed.empty();
      };
      // Waits in real time for what is left by the injected clock (a fake one moves by hand).
      inbox_->mu.AwaitWithTimeout(absl::Condition(&ready), wake - clock_->Now());
      if (inbox_->stopping) return;
    }
    now = clock_->Now();
    WriteChanges(now);
    if (now >= next_poll) {
      PollFollowed();
      PublishUnpublished();
      next_poll = now + options_.poll_interval;
    }
    if (now >= next_cancel_poll) {
      PollCancelFlags();
      next_cancel_poll = now + options_.cancel_poll_interval;
    }
    if (now >= next_renewal) {
      RenewLeases();
      next_renewal = now + options_.lease / 3;
    }
    if (now >= next_takeover) {
      TakeOverExpired();
      next_takeover = now + options_.takeover_interval;
    }
    if (now >= next_consumer_cleanup) {
      // Every process start adds a consumer to the group; those of replicas long gone go.
      (void)background_->ForgetIdleConsumers(kConsumerIdleBeforeForgotten);
      next_consumer_cleanup = now + kConsumerCleanupInterval;
    }
  }
}

Completion OperationCoordinator::CompletionOf(const std::string& job_key,
                                              const std::string& entry_id,
                                              const std::string& request_digest,
                                              const absl::StatusOr<jobs::PlacementPtr>& placement,
                                              absl::Duration queue_time,
                                              absl::Duration solve_time) const {
  Completion completion;
  completion.job_key = job_key;
  completion.entry_id = entry_id;
  completion.queue_time = queue_time;
  completion.solve_time = solve_time;
  completion.ttl_after_done = options_.ttl_after_done;
  completion.result_ttl = options_.ttl_after_done;
  if (!placement.ok() || *placement == nullptr) {
    completion.error = placement.ok() ? absl::InternalError("the job ended without a result")
                                      : placement.status();
    completion.result_key = store_->ResultKey(job_key);
    return completion;
  }
  const v1::Placement& result = **placement;
  completion.result_value = cache::RedisResultCache::EncodeValue(result);
  if (result.provenance().time_limited() || !Finite(options_.result_ttl)) {
    // Never in the shared tier (#14): only operations read it.
    completion.result_key = store_->ResultKey(job_key);
  } else {
    completion.result_key = absl::StrCat(options_.result_key_prefix,
                                         cache::RedisResultCache::kKeyVersion, request_digest);
    completion.result_ttl = options_.result_ttl;
  }
  return completion;
}

void OperationCoordinator::WriteChanges(absl::Time now) {
  absl::flat_hash_set<std::string> changed;
  {
    absl::MutexLock lock(&inbox_->mu);
    changed.swap(inbox_->changed);
  }
  std::vector<ProgressUpdate> updates;
  std::vector<std::pair<std::string, Completion>> completions;
  std::vector<std::string> finished;  // owned jobs that end without a write from here
  std::vector<std::shared_ptr<jobs::Job>> released;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [key, owned] : owned_) {
      if (!changed.contains(key) && !owned.progress_dirty) continue;
      owned.progress_dirty = false;
      std::shared_ptr<jobs::Job> job = owned.hold;
      if (job == nullptr) continue;  // released (cancelled, lost or handed back): nothing to write
      if (job->done()) {
        const jobs::JobResult& result = job->result();
        const bool shutting_down =
            !result.placement.ok() && absl::IsUnavailable(result.placement.status());
        if (owned.lease_lost || owned.handed_back || shutting_down) {
          // Not an answer for the cluster: whoever takes the job over writes it.
          finished.push_back(key);
          continue;
        }
        completions.emplace_back(key, CompletionOf(key, owned.entry_id, owned.request_digest,
                                                   result.placement, result.queue_time,
                                                   result.solve_time));
        continue;
      }
      const jobs::JobProgress progress = job->progress();
      const jobs::JobState state = job->state();
      if (progress.stage != owned.last_stage || state != owned.last_state ||
          now - owned.last_progress_write >= options_.progress_interval) {
        owned.last_stage = progress.stage;
        owned.last_state = state;
        owned.last_progress_write = now;
        updates.push_back({.job_key = key, .state = RecordState(state), .stage = progress.stage,
                           .fraction = progress.fraction,
                           .best_makespan_ns = progress.best_makespan_ns});
      } else {
        owned.progress_dirty = true;  // throttled: written at a later tick
      }
    }
    for (const std::string& key : finished) {
      auto it = owned_.find(key);
      if (it->second.hold != nullptr) released.push_back(std::move(it->second.hold));
      owned_.erase(it);
    }
  }
  if (!updates.empty()) {
    if (absl::Status written = background_->WriteProgress(updates); !written.ok()) {
      NoteRedisError("writing progress", written);
    }
  }
  for (auto& [key, completion] : completions) {
    absl::StatusOr<bool> written = background_->Complete(completion);
    bool give_up = false;
    if (!written.ok()) {
      NoteRedisError(absl::StrCat("writing the result of job ", key), written.status());
      if (cache::ErrorReplyCode(written.status()) == "OOM") {
        // Redis refuses every write (maxmemory with noeviction): retrying would leave the replicas
        // that follow the job waiting forever. Record the failure in the little room a script
        // allowed over maxmemory may take; this replica's own callers have their answer.
        Completion unstored = completion;
        unstored.error = absl::AbortedError(absl::StrCat(
            "the job finished on replica ", store_->consumer(),
            ", but Redis is out of memory and could not store its result for the other replicas; "
            "ask that replica, or submit the request again"));
        written = background_->RecordUnstoredResult(unstored);
        if (!written.ok()) NoteRedisError("recording an unstored result", written.status());
      } else if (!absl::IsUnavailable(written.status()) &&
                 !cache::IsPassingErrorReply(written.status())) {
        absl::MutexLock lock(&mu_);
        auto it = owned_.find(key);
        give_up = it != owned_.end() && ++it->second.refused_completions >= kMaxRefusedCompletions;
      }
    }
    if (!written.ok() && !give_up) {
      // Redis is away: try again at the next tick (local waiters have their answer already).
      absl::MutexLock lock(&mu_);
      if (auto it = owned_.find(key); it != owned_.end()) it->second.progress_dirty = true;
      continue;
    }
    absl::MutexLock lock(&mu_);
    auto it = owned_.find(key);
    if (it == owned_.end()) continue;
    if (it->second.hold != nullptr) released.push_back(std::move(it->second.hold));
    owned_.erase(it);
  }
  for (const std::shared_ptr<jobs::Job>& job : released) jobs_->Release(job);
}

void OperationCoordinator::PollFollowed() {
  std::vector<std::string> names;
  std::vector<std::shared_ptr<jobs::Operation>> ops;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = followed_.begin(); it != followed_.end();) {
      std::shared_ptr<jobs::Operation> op = it->second.lock();
      if (op == nullptr || op->done()) {
        followed_.erase(it++);
        continue;
      }
      names.push_back(it->first);
      ops.push_back(std::move(op));
      ++it;
    }
    stats_.followed_operations = static_cast<int64_t>(names.size());
  }
  if (names.empty()) return;
  absl::StatusOr<std::vector<ViewOrGone>> views = background_->LookupMany(names);
  if (!views.ok()) {
    // Redis away: the mirrors stay as they are until it is back.
    NoteRedisError("following operations of other replicas", views.status());
    return;
  }
  std::vector<std::string> ended;
  for (size_t i = 0; i < ops.size(); ++i) {
    jobs::Operation& op = *ops[i];
    const ViewOrGone& view = (*views)[i];
    if (!op.mirror()) {
      // This replica's own operation: only a cancel from elsewhere concerns it.
      if (view.ok() && !view->has_value()) {
        ended.push_back(names[i]);
      } else if (view.ok() && (*view)->operation.state == OperationState::kCancelled) {
        (void)operations_->Cancel(op.name(), op.tenant());
        ended.push_back(names[i]);
      }
      continue;
    }
    if (!view.ok()) {
      op.Finish(view.status(), absl::ZeroDuration(), absl::ZeroDuration());  // corrupt: DATA_LOSS
      ended.push_back(names[i]);
    } else if (!view->has_value()) {
      op.Finish(absl::AbortedError("the operation is gone from the shared store (expired, or Redis "
                                   "lost its data); submit the request again"),
                absl::ZeroDuration(), absl::ZeroDuration());
      ended.push_back(names[i]);
    } else if (Apply(op, **view)) {
      ended.push_back(names[i]);
    }
  }
  absl::MutexLock lock(&mu_);
  for (const std::string& name : ended) followed_.erase(name);
}

void OperationCoordinator::PublishUnpublished() {
  std::vector<std::string> names;
  std::vector<std::shared_ptr<jobs::Job>> released;
  {
    absl::MutexLock lock(&mu_);
    stats_.unpublished = static_cast<int64_t>(unpublished_.size());
    if (unpublished_.empty()) return;
    for (auto& [name, unpublished] : unpublished_) {
      names.push_back(name);
      // An operation that ended here (cancelled by its caller, say) needs no job any more, however
      // long Redis stays away; what it ended with is published from the operation itself.
      std::shared_ptr<jobs::Operation> op = unpublished.operation.lock();
      if ((op == nullptr || op->done()) && unpublished.hold != nullptr) {
        released.push_back(std::move(unpublished.hold));
      }
    }
  }
  for (const std::shared_ptr<jobs::Job>& hold : released) jobs_->Release(hold);
  for (const std::string& name : names) {
    Unpublished item;
    {
      absl::MutexLock lock(&mu_);
      auto it = unpublished_.find(name);
      if (it == unpublished_.end()) continue;
      item = std::move(it->second);
      unpublished_.erase(it);
    }
    std::shared_ptr<jobs::Operation> op = item.operation.lock();
    auto keep = [&] {
      absl::MutexLock lock(&mu_);
      unpublished_[name] = std::move(item);
    };
    if (op == nullptr) continue;  // expired or evicted here: nothing left to publish
    if (item.record.job_key.empty()) {  // done from the start (a cache hit)
      absl::Status recorded = background_->RecordDone(item.record, item.value, item.value_ttl,
                                                      options_.ttl_after_done);
      if (!recorded.ok()) {
        NoteRedisError("publishing an operation made while Redis was away", recorded);
        keep();
        return;  // Redis is still away: the others wait for the next tick
      }
    } else {
      absl::StatusOr<SubmitOutcome> outcome = background_->Submit(item.record, item.job);
      if (!outcome.ok()) {
        NoteRedisError("publishing an operation made while Redis was away", outcome.status());
        keep();
        return;
      }
      if (outcome->result == SubmitResult::kCreated) NoteStorage(item.record, outcome->storage);
      const bool ours = outcome->owner == store_->consumer() && !outcome->entry_id.empty() &&
                        outcome->result != SubmitResult::kJoined;
      if (!ours) {
        // Another replica's live job (or an identical one of ours already shared): that owner
        // writes the answer; this replica's job goes on for its own callers only.
        if (item.hold != nullptr) jobs_->Release(item.hold);
      } else if (op->done() || item.hold == nullptr) {
        // Ended before Redis was back: write its end at once (the job created, or adopted from a
        // submit script Redis ran late, has nothing left to run).
        const jobs::Operation::Snapshot snapshot = op->snapshot();
        absl::StatusOr<jobs::PlacementPtr> result =
            snapshot.error.ok() ? absl::StatusOr<jobs::PlacementPtr>(snapshot.placement)
                                : absl::StatusOr<jobs::PlacementPtr>(snapshot.error);
        absl::StatusOr<bool> written = background_->Complete(
            CompletionOf(item.record.job_key, outcome->entry_id, item.record.request_digest,
                         result, snapshot.queue_time, absl::ZeroDuration()));
        if (!written.ok()) NoteRedisError("publishing a finished operation", written.status());
        if (item.hold != nullptr) jobs_->Release(item.hold);
      } else {
        Own(item.record.job_key, outcome->entry_id, item.record.request_digest,
            std::move(item.hold));
        // A job a stalled Redis created late has been idle since: renew its lease now, before
        // another replica counts it as expired.
        absl::StatusOr<std::vector<std::string>> kept = background_->Renew({outcome->entry_id});
        if (kept.ok() && kept->empty()) ReleaseHold(item.record.job_key);  // taken over already
      }
      Follow(op);
    }
    {
      absl::MutexLock lock(&mu_);
      ++stats_.published;
    }
    log_.Log("published", absl::StrCat("shared operations: published ", name,
                                       ", made while Redis was away, now that Redis answers"));
  }
}

void OperationCoordinator::PollCancelFlags() {
  std::vector<std::string> keys;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [key, owned] : owned_) {
      if (owned.hold != nullptr) keys.push_back(key);
    }
  }
  if (keys.empty()) return;
  absl::StatusOr<std::vector<bool>> flags = background_->CancelFlags(keys);
  if (!flags.ok()) {
    NoteRedisError("reading cancel flags", flags.status());
    return;
  }
  for (size_t i = 0; i < keys.size() && i < flags->size(); ++i) {
    if (!(*flags)[i]) continue;
    {
      absl::MutexLock lock(&mu_);
      ++stats_.remote_cancels;
    }
    // Every operation waiting for the job was cancelled: the cluster no longer holds it. Its end
    // (CANCELLED, once no local caller waits either) is recorded now, and its stream entry goes at
    // once, so that no replica ever has to look at it again.
    const std::string entry = ReleaseHold(keys[i]);
    if (entry.empty()) continue;
    absl::StatusOr<bool> finished =
        background_->FinishCancelled(keys[i], entry, options_.ttl_after_done);
    if (!finished.ok()) NoteRedisError("ending a cancelled job", finished.status());
  }
}

std::string OperationCoordinator::ReleaseHold(const std::string& job_key) {
  std::shared_ptr<jobs::Job> hold;
  std::string entry;
  {
    absl::MutexLock lock(&mu_);
    auto it = owned_.find(job_key);
    if (it == owned_.end()) return "";
    hold = std::move(it->second.hold);
    entry = it->second.entry_id;
    owned_.erase(it);
  }
  if (hold != nullptr) jobs_->Release(hold);
  return entry;
}

void OperationCoordinator::RenewLeases() {
  std::vector<std::string> keys;
  std::vector<std::string> entries;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [key, owned] : owned_) {
      if (owned.hold == nullptr || owned.handed_back || owned.lease_lost) continue;
      keys.push_back(key);
      entries.push_back(owned.entry_id);
    }
  }
  if (entries.empty()) return;
  absl::StatusOr<std::vector<std::string>> kept = background_->Renew(entries);
  if (!kept.ok()) {
    // The job goes on here; its completion is written when Redis is back.
    {
      absl::MutexLock lock(&mu_);
      ++stats_.lease_renewals_failed;
    }
    NoteRedisError("renewing leases", kept.status());
    return;
  }
  const absl::flat_hash_set<std::string> still_ours(kept->begin(), kept->end());
  for (size_t i = 0; i < entries.size(); ++i) {
    if (still_ours.contains(entries[i])) continue;
    {
      absl::MutexLock lock(&mu_);
      ++stats_.leases_lost;
    }
    log_.Log("lease_lost", absl::StrCat("shared operations: another replica took job ", keys[i],
                                        " over (this replica's lease ran out while it was alive; "
                                        "is Redis slow, or --operation_lease too short?)"));
    // Another replica took it over (we were too slow to renew): its copy is the cluster's now.
    // Local callers still waiting here keep this copy running for themselves.
    ReleaseHold(keys[i]);
  }
}

void OperationCoordinator::TakeOverExpired() {
  {
    absl::MutexLock lock(&mu_);
    if (draining_) return;
  }
  const jobs::JobManagerStats load = jobs_->Stats();
  const int64_t free_workers =
      load.admitting ? std::max<int64_t>(0, load.workers - load.running - load.queued) : 0;
  // Also with no worker free: the entries of ended jobs go (they cost no worker).
  absl::StatusOr<ClaimOutcome> claimed =
      background_->ClaimExpired(options_.lease, static_cast<int>(free_workers));
  if (!claimed.ok()) {
    NoteRedisError("claiming expired jobs", claimed.status());
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    stats_.dead_entries_dropped += claimed->dropped;
  }
  if (claimed->waiting_for_longer_lease > 0) {
    log_.Log("lease_mismatch",
             absl::StrCat("shared operations: ", claimed->waiting_for_longer_lease,
                          " jobs of other replicas renew with a longer lease (",
                          absl::FormatDuration(claimed->longest_lease),
                          ") than this replica's --operation_lease=",
                          absl::FormatDuration(options_.lease),
                          "; they are taken over only once their own lease has expired"));
  }
  for (const ClaimedEntry& entry : claimed->claimed) {
    absl::StatusOr<std::optional<TakenJob>> taken = background_->TakeOver(entry, options_.lease);
    if (!taken.ok()) {
      NoteRedisError("taking a job over", taken.status());
      continue;
    }
    if (!taken->has_value()) continue;
    absl::StatusOr<RebuiltJob> rebuilt =
        rebuild_((*taken)->serialized_request, (*taken)->tenant, (*taken)->time_limit);
    if (rebuilt.ok() && rebuilt->spec.request_digest != entry.job_key) {
      rebuilt = absl::FailedPreconditionError(
          "the request was submitted to a replica of another version (its job key differs here)");
    }
    if (!rebuilt.ok()) {
      // Nobody can run it: the operations end with the reason instead of waiting forever.
      log_.Log("takeover_failed",
               absl::StrCat("shared operations: job ", entry.job_key,
                            " of a replica that went away cannot run here: ",
                            rebuilt.status().ToString()));
      (void)background_->Complete({.job_key = entry.job_key,
                                   .entry_id = entry.entry_id,
                                   .error = rebuilt.status(),
                                   .result_key = store_->ResultKey(entry.job_key),
                                   .result_ttl = options_.ttl_after_done,
                                   .ttl_after_done = options_.ttl_after_done});
      continue;
    }
    const std::string request_digest = rebuilt->request_digest;
    absl::StatusOr<jobs::Admission> admission = jobs_->Acquire(std::move(rebuilt->spec));
    if (!admission.ok()) {
      (void)background_->HandBack({entry.entry_id}, options_.lease + absl::Seconds(1));
      continue;
    }
    {
      absl::MutexLock lock(&mu_);
      ++stats_.taken_over;
    }
    log_.Log("takeover", absl::StrCat("shared operations: took over job ", entry.job_key,
                                      " (its replica stopped renewing its lease)"));
    Own(entry.job_key, entry.entry_id, request_digest, std::move(admission->job));
  }
}

CoordinatorStats OperationCoordinator::Stats() const {
  absl::MutexLock lock(&mu_);
  CoordinatorStats stats = stats_;
  stats.round_trips = redis_->round_trips() +
                      (background_redis_ != redis_ ? background_redis_->round_trips() : 0);
  stats.owned_jobs = static_cast<int64_t>(owned_.size());
  stats.unpublished = static_cast<int64_t>(unpublished_.size());
  return stats;
}

}  // namespace placement::shared_ops
