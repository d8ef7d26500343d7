#include "service/shared_ops/operation_coordinator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "service/cache/redis_result_cache.h"
#include "service/status_payloads/status_payloads.h"

namespace placement::shared_ops {
namespace {

const char* StateName(jobs::JobState state) {
  return state == jobs::JobState::kQueued ? "queued" : "running";
}

absl::Status RemoteError(int code, const std::string& message) {
  if (code <= 0 || code > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
    return absl::UnknownError(absl::StrCat("the job failed on another replica: ", message));
  }
  return absl::Status(static_cast<absl::StatusCode>(code), message);
}

// Only names this service could have made go to Redis: anything else is NOT_FOUND without a round
// trip (and a megabyte of garbage never becomes a key).
bool LooksLikeOperationName(const std::string& name) {
  constexpr absl::string_view kPrefix = "operations/";
  if (name.size() != kPrefix.size() + 32 || !absl::StartsWith(name, kPrefix)) return false;
  for (size_t i = kPrefix.size(); i < name.size(); ++i) {
    const char c = name[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

constexpr absl::Duration kConsumerCleanupInterval = absl::Minutes(1);
constexpr absl::Duration kConsumerIdleBeforeForgotten = absl::Hours(1);

bool Finite(absl::Duration duration) {
  return duration > absl::ZeroDuration() && duration != absl::InfiniteDuration();
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
      inbox_(std::make_shared<Inbox>()) {}

OperationCoordinator::~OperationCoordinator() {
  {
    absl::MutexLock lock(&inbox_->mu);
    inbox_->stopping = true;
  }
  if (thread_.joinable()) thread_.join();
  std::vector<std::shared_ptr<jobs::Job>> holds;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [key, owned] : owned_) {
      if (owned.hold != nullptr) holds.push_back(std::move(owned.hold));
    }
    owned_.clear();
  }
  for (const std::shared_ptr<jobs::Job>& hold : holds) jobs_->Release(hold);
}

void OperationCoordinator::Start() {
  thread_ = std::thread([this] { Loop(); });
}

absl::Status OperationCoordinator::RedisUnavailable(const absl::Status& cause) const {
  return status_payloads::WithRetryDelay(
      absl::UnavailableError(absl::StrCat(
          "operations are shared through Redis, which did not answer (", cause.message(),
          "); retry")),
      options_.retry_delay);
}

// ---- Submit ----

absl::StatusOr<std::shared_ptr<jobs::Operation>> OperationCoordinator::SubmitLocally(
    SharedSubmit submit, v1::CacheResult* cache, absl::string_view reason) {
  {
    absl::MutexLock lock(&mu_);
    ++stats_.fallbacks[std::string(reason)];
  }
  submit.operation.name.clear();
  absl::StatusOr<jobs::Admission> admission = jobs_->Acquire(submit.make_job());
  if (!admission.ok()) return admission.status();
  *cache = admission->coalesced ? v1::COALESCED : v1::MISS;
  return operations_->AddPending(std::move(submit.operation), *std::move(admission));
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
  record.created_at_ns = absl::ToUnixNanos(absl::Now());
  // Long enough for the job to wait, run and be taken over once; refreshed to ttl_after_done when it
  // ends.
  const absl::Duration lifetime =
      submit.time_limit + options_.ttl_after_done + 4 * options_.lease;
  absl::StatusOr<SubmitOutcome> outcome = store_->Submit(
      record, NewJob{.job_key = submit.job_key, .tenant = spec.tenant,
                     .serialized_request = std::move(submit.serialized_request),
                     .lifetime = lifetime});
  if (!outcome.ok()) return SubmitLocally(std::move(submit), cache, "submit");

  if (outcome->joined && outcome->owner != store_->consumer()) {
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

  absl::StatusOr<jobs::Admission> admission = jobs_->Acquire(submit.make_job());
  if (!admission.ok()) {
    if (outcome->joined) {
      (void)store_->Cancel(record.name, record.tenant);
    } else {
      (void)store_->Abandon(record.name, submit.job_key, outcome->entry_id);
    }
    return admission.status();
  }
  std::shared_ptr<jobs::Job> hold;
  if (!outcome->joined) {
    absl::StatusOr<jobs::Admission> held = jobs_->Acquire(submit.make_job());
    if (!held.ok()) {
      jobs_->Release(admission->job);
      (void)store_->Abandon(record.name, submit.job_key, outcome->entry_id);
      return held.status();
    }
    hold = std::move(held->job);
  }
  *cache = admission->coalesced ? v1::COALESCED : v1::MISS;
  const std::string request_digest = spec.request_digest;
  absl::StatusOr<std::shared_ptr<jobs::Operation>> op =
      operations_->AddPending(std::move(spec), *std::move(admission));
  if (!op.ok()) {
    if (hold != nullptr) jobs_->Release(hold);
    if (outcome->joined) {
      (void)store_->Cancel(record.name, record.tenant);
    } else {
      (void)store_->Abandon(record.name, submit.job_key, outcome->entry_id);
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
  record.state = "done";
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
  absl::Status recorded =
      store_->RecordDone(record, cache::RedisResultCache::EncodeValue(*snapshot.placement),
                         value_ttl, options_.ttl_after_done);
  if (!recorded.ok()) {
    absl::MutexLock lock(&mu_);
    ++stats_.fallbacks["record"];
  }
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
    return absl::UnavailableError(
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
  if (op.state == "cancelled") {
    mirror.Finish(absl::CancelledError("the operation was cancelled"), absl::ZeroDuration(),
                  absl::ZeroDuration());
    return true;
  }
  if (op.state == "done") {
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
  if (job.state == "done") {
    mirror.Finish(VerifiedResult(view), absl::Nanoseconds(job.queue_ns),
                  absl::Nanoseconds(job.solve_ns));
    return true;
  }
  if (job.state == "failed") {
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
      absl::StatusOr<std::optional<OperationView>> view = store_->Lookup(name);
      if (view.ok() && view->has_value() && (*view)->operation.tenant == tenant) {
        Apply(**local, **view);
      }
    }
    return local;
  }
  if (!absl::IsNotFound(local.status()) || !LooksLikeOperationName(name)) return local;
  absl::StatusOr<std::optional<OperationView>> view = store_->Lookup(name);
  if (!view.ok()) return RedisUnavailable(view.status());
  if (!view->has_value() || (*view)->operation.tenant != tenant ||
      (*view)->operation.name != name) {
    return local.status();  // unknown, expired or another tenant's: NOT_FOUND as before
  }
  return Mirror(**view, static_cast<v1::CacheResult>((*view)->operation.cache));
}

absl::StatusOr<std::shared_ptr<jobs::Operation>> OperationCoordinator::Cancel(
    const std::string& name, const std::string& tenant) {
  absl::StatusOr<std::shared_ptr<jobs::Operation>> local = operations_->Find(name, tenant);
  if (!local.ok() && (!absl::IsNotFound(local.status()) || !LooksLikeOperationName(name))) {
    return local;
  }
  absl::StatusOr<std::optional<OperationView>> view = store_->Cancel(name, tenant);
  if (local.ok()) {
    // Known here: cancel it here whatever Redis said (a local-only operation is not in Redis).
    return operations_->Cancel(name, tenant);
  }
  if (!view.ok()) return RedisUnavailable(view.status());
  if (!view->has_value() || (*view)->operation.name != name) return local.status();
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
  // Idle beyond the lease: the next XAUTOCLAIM of any other replica takes them.
  (void)background_->HandBack(entries, options_.lease + absl::Seconds(1));
  for (const std::shared_ptr<jobs::Job>& hold : holds) jobs_->Release(hold);
}

// ---- The background thread ----

void OperationCoordinator::Loop() {
  absl::Time now = absl::Now();
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
      inbox_->mu.AwaitWithDeadline(absl::Condition(&ready), wake);
      if (inbox_->stopping) return;
    }
    now = absl::Now();
    WriteChanges(now);
    if (now >= next_poll) {
      PollFollowed();
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
        Completion completion;
        completion.job_key = key;
        completion.entry_id = owned.entry_id;
        completion.queue_time = result.queue_time;
        completion.solve_time = result.solve_time;
        completion.ttl_after_done = options_.ttl_after_done;
        completion.result_ttl = options_.ttl_after_done;
        if (!result.placement.ok()) {
          completion.error = result.placement.status();
          completion.result_key = store_->ResultKey(key);
        } else {
          const v1::Placement& placement = **result.placement;
          completion.result_value = cache::RedisResultCache::EncodeValue(placement);
          if (placement.provenance().time_limited() || !Finite(options_.result_ttl)) {
            // Never in the shared tier (#14): only operations read it.
            completion.result_key = store_->ResultKey(key);
          } else {
            completion.result_key = absl::StrCat(options_.result_key_prefix,
                                                 cache::RedisResultCache::kKeyVersion,
                                                 owned.request_digest);
            completion.result_ttl = options_.result_ttl;
          }
        }
        completions.emplace_back(key, std::move(completion));
        continue;
      }
      const jobs::JobProgress progress = job->progress();
      const jobs::JobState state = job->state();
      if (progress.stage != owned.last_stage || state != owned.last_state ||
          now - owned.last_progress_write >= options_.progress_interval) {
        owned.last_stage = progress.stage;
        owned.last_state = state;
        owned.last_progress_write = now;
        updates.push_back({.job_key = key, .state = StateName(state), .stage = progress.stage,
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
  if (!updates.empty()) (void)background_->WriteProgress(updates);
  for (auto& [key, completion] : completions) {
    absl::StatusOr<bool> written = background_->Complete(completion);
    if (!written.ok()) {
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
  absl::StatusOr<std::vector<std::optional<OperationView>>> views = background_->LookupMany(names);
  if (!views.ok()) return;  // Redis away: the mirrors stay as they are until it is back
  std::vector<std::string> ended;
  for (size_t i = 0; i < ops.size(); ++i) {
    jobs::Operation& op = *ops[i];
    const std::optional<OperationView>& view = (*views)[i];
    if (!op.mirror()) {
      // This replica's own operation: only a cancel from elsewhere concerns it.
      if (!view.has_value()) {
        ended.push_back(names[i]);
      } else if (view->operation.state == "cancelled") {
        (void)operations_->Cancel(op.name(), op.tenant());
        ended.push_back(names[i]);
      }
      continue;
    }
    if (!view.has_value()) {
      op.Finish(absl::AbortedError("the operation is gone from the shared store (expired, or Redis "
                                   "lost its data); submit the request again"),
                absl::ZeroDuration(), absl::ZeroDuration());
      ended.push_back(names[i]);
    } else if (Apply(op, *view)) {
      ended.push_back(names[i]);
    }
  }
  absl::MutexLock lock(&mu_);
  for (const std::string& name : ended) followed_.erase(name);
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
  if (!flags.ok()) return;
  for (size_t i = 0; i < keys.size() && i < flags->size(); ++i) {
    if (!(*flags)[i]) continue;
    {
      absl::MutexLock lock(&mu_);
      ++stats_.remote_cancels;
    }
    // Every operation waiting for the job was cancelled: the cluster no longer holds it. Its end
    // (CANCELLED, once no local caller waits either) is not written; the flag already says it all.
    ReleaseHold(keys[i]);
  }
}

void OperationCoordinator::ReleaseHold(const std::string& job_key) {
  std::shared_ptr<jobs::Job> hold;
  {
    absl::MutexLock lock(&mu_);
    auto it = owned_.find(job_key);
    if (it == owned_.end()) return;
    hold = std::move(it->second.hold);
    owned_.erase(it);
  }
  if (hold != nullptr) jobs_->Release(hold);
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
    absl::MutexLock lock(&mu_);
    ++stats_.lease_renewals_failed;
    return;
  }
  const absl::flat_hash_set<std::string> still_ours(kept->begin(), kept->end());
  for (size_t i = 0; i < entries.size(); ++i) {
    if (still_ours.contains(entries[i])) continue;
    {
      absl::MutexLock lock(&mu_);
      ++stats_.leases_lost;
    }
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
  const int64_t free_workers = load.workers - load.running - load.queued;
  if (!load.admitting || free_workers <= 0) return;
  absl::StatusOr<std::vector<ClaimedEntry>> claimed =
      background_->ClaimExpired(options_.lease, static_cast<int>(free_workers));
  if (!claimed.ok()) return;
  for (const ClaimedEntry& entry : *claimed) {
    absl::StatusOr<std::optional<TakenJob>> taken = background_->TakeOver(entry);
    if (!taken.ok() || !taken->has_value()) continue;
    absl::StatusOr<RebuiltJob> rebuilt =
        rebuild_((*taken)->serialized_request, (*taken)->tenant);
    if (rebuilt.ok() && rebuilt->spec.request_digest != entry.job_key) {
      rebuilt = absl::FailedPreconditionError(
          "the request was submitted to a replica of another version (its job key differs here)");
    }
    if (!rebuilt.ok()) {
      // Nobody can run it: the operations end with the reason instead of waiting forever.
      (void)background_->Complete({.job_key = entry.job_key, .entry_id = entry.entry_id,
                              .error = rebuilt.status(), .result_key = store_->ResultKey(entry.job_key),
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
    Own(entry.job_key, entry.entry_id, request_digest, std::move(admission->job));
  }
}

CoordinatorStats OperationCoordinator::Stats() const {
  absl::MutexLock lock(&mu_);
  CoordinatorStats stats = stats_;
  stats.round_trips = redis_->round_trips() +
                      (background_redis_ != redis_ ? background_redis_->round_trips() : 0);
  stats.owned_jobs = static_cast<int64_t>(owned_.size());
  return stats;
}

}  // namespace placement::shared_ops
