#include "service/jobs/operation_registry.h"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "service/status_payloads/status_payloads.h"

namespace placement::jobs {
namespace {

std::string RequestIdKey(const std::string& tenant, const std::string& request_id) {
  return absl::StrCat(tenant, absl::string_view("\0", 1), request_id);
}

}  // namespace

std::string NewOperationName() {
  unsigned char bytes[16];
  size_t filled = 0;
  while (filled < sizeof(bytes)) {
    const ssize_t got = getrandom(bytes + filled, sizeof(bytes) - filled, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      // No entropy source at all is a broken environment, not bad input.
      std::abort();
    }
    filled += static_cast<size_t>(got);
  }
  return absl::StrCat(
      "operations/",
      absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes))));
}

// ---- Operation ----

Operation::Operation(std::string name, OperationSpec spec, absl::Time created_at, JobManager* jobs,
                     std::weak_ptr<OperationIndex> index, const Clock* clock, bool mirror)
    : name_(std::move(name)),
      spec_(std::move(spec)),
      created_at_(created_at),
      jobs_(jobs),
      index_(std::move(index)),
      clock_(clock),
      mirror_(mirror) {}

Operation::~Operation() = default;

Operation::Snapshot Operation::snapshot() const {
  absl::MutexLock lock(&mu_);
  return state_;
}

bool Operation::done() const {
  absl::MutexLock lock(&mu_);
  return state_.done;
}

uint64_t Operation::AddListener(Listener listener) {
  absl::MutexLock lock(&mu_);
  if (state_.done) return 0;
  return listeners_.Add(std::move(listener));
}

void Operation::RemoveListener(uint64_t id) {
  absl::MutexLock lock(&mu_);
  listeners_.Remove(id);
}

void Operation::Notify(const SubscriberList<const Operation&>::Taken& listeners) const {
  SubscriberList<const Operation&>::Call(listeners, *this);
}

void Operation::NoteDone() const {
  std::shared_ptr<OperationIndex> index = index_.lock();
  if (index == nullptr) return;
  const absl::Time now = clock_ != nullptr ? clock_->Now() : absl::Now();
  absl::MutexLock lock(&index->mu);
  index->expiry.emplace_back(now + index->ttl, name_);
}

void Operation::Attach(std::shared_ptr<Job> job, bool coalesced) {
  bool cancelled_already = false;
  {
    absl::MutexLock lock(&mu_);
    state_.cache = coalesced ? v1::COALESCED : v1::MISS;
    if (state_.done) {
      cancelled_already = true;
    } else {
      job_ = job;
      state_.progress = job->progress();
    }
  }
  if (cancelled_already) {
    jobs_->Release(job);
    return;
  }
  // The listener holds only a weak reference: the registry may drop a finished operation.
  std::weak_ptr<Operation> self = weak_from_this();
  const uint64_t id = job->AddListener([self](const Job& changed) {
    if (std::shared_ptr<Operation> op = self.lock()) op->OnJobChanged(changed);
  });
  if (id == 0) {
    OnJobChanged(*job);  // the job was done already
    return;
  }
  bool stale = false;
  {
    absl::MutexLock lock(&mu_);
    if (job_ == job) {
      job_listener_ = id;
    } else {
      stale = true;  // finished or cancelled while the listener was being added
    }
  }
  if (stale) job->RemoveListener(id);
}

void Operation::OnJobChanged(const Job& job) {
  SubscriberList<const Operation&>::Taken to_notify;
  std::shared_ptr<Job> finished;
  {
    absl::MutexLock lock(&mu_);
    if (state_.done || job_.get() != &job) return;
    state_.progress = job.progress();
    if (job.done()) {
      const JobResult& result = job.result();
      state_.done = true;
      state_.queue_time = result.queue_time;
      state_.solve_time = result.solve_time;
      if (result.placement.ok()) {
        state_.placement = *result.placement;
      } else {
        state_.error = result.placement.status();
      }
      finished = std::move(job_);
      job_ = nullptr;
      job_listener_ = 0;
    }
    to_notify = listeners_.Take(/*clear=*/finished != nullptr);
  }
  if (finished != nullptr) {
    jobs_->Release(finished);
    NoteDone();
  }
  Notify(to_notify);
}

void Operation::InitDone(PlacementPtr placement, v1::CacheResult cache) {
  absl::MutexLock lock(&mu_);
  state_.done = true;
  state_.cache = cache;
  state_.placement = std::move(placement);
  state_.progress.stage = "done";
  state_.progress.fraction = 1.0;
}

bool Operation::Cancel(absl::Status error) {
  SubscriberList<const Operation&>::Taken to_notify;
  std::shared_ptr<Job> job;
  uint64_t job_listener = 0;
  {
    absl::MutexLock lock(&mu_);
    if (state_.done) return false;
    state_.done = true;
    state_.error = std::move(error);
    state_.progress.stage = "cancelled";
    job = std::move(job_);
    job_ = nullptr;
    job_listener = job_listener_;
    job_listener_ = 0;
    to_notify = listeners_.Take(/*clear=*/true);
  }
  if (job != nullptr) {
    job->RemoveListener(job_listener);
    jobs_->Release(job);
  }
  NoteDone();
  Notify(to_notify);
  return true;
}

void Operation::UpdateProgress(const JobProgress& progress) {
  if (!mirror_) return;
  SubscriberList<const Operation&>::Taken to_notify;
  {
    absl::MutexLock lock(&mu_);
    if (state_.done) return;
    const JobProgress& old = state_.progress;
    if (old.stage == progress.stage && old.fraction == progress.fraction &&
        old.best_makespan_ns == progress.best_makespan_ns) {
      return;
    }
    state_.progress = progress;
    to_notify = listeners_.Take(/*clear=*/false);
  }
  Notify(to_notify);
}

bool Operation::Finish(absl::StatusOr<PlacementPtr> placement, absl::Duration queue_time,
                       absl::Duration solve_time) {
  if (!mirror_) return false;
  SubscriberList<const Operation&>::Taken to_notify;
  {
    absl::MutexLock lock(&mu_);
    if (state_.done) return false;
    state_.done = true;
    state_.queue_time = queue_time;
    state_.solve_time = solve_time;
    if (placement.ok() && *placement != nullptr) {
      state_.placement = *std::move(placement);
      state_.progress.stage = "done";
      state_.progress.fraction = 1.0;
    } else {
      state_.error = placement.ok() ? absl::InternalError("finished without a result")
                                    : placement.status();
    }
    to_notify = listeners_.Take(/*clear=*/true);
  }
  NoteDone();
  Notify(to_notify);
  return true;
}

// ---- OperationRegistry ----

OperationRegistry::OperationRegistry(OperationRegistryOptions options, JobManager* jobs)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : Clock::Real()),
      jobs_(jobs),
      index_(std::make_shared<OperationIndex>()) {
  index_->ttl = options_.ttl_after_done;
}

OperationRegistry::~OperationRegistry() = default;

bool OperationRegistry::DropOldestFinishedLocked() {
  while (!index_->expiry.empty()) {
    const std::string name = std::move(index_->expiry.front().second);
    index_->expiry.pop_front();
    auto it = index_->by_name.find(name);
    if (it == index_->by_name.end()) continue;  // dropped already
    const std::shared_ptr<Operation>& op = it->second;
    if (!op->request_id().empty()) {
      auto by_id = index_->by_request_id.find(RequestIdKey(op->tenant(), op->request_id()));
      if (by_id != index_->by_request_id.end() && by_id->second == name) {
        index_->by_request_id.erase(by_id);
      }
    }
    index_->by_name.erase(it);
    return true;
  }
  return false;
}

void OperationRegistry::ExpireLocked(absl::Time now) {
  // `expiry` is in the order operations finished, and every one gets the same TTL.
  while (!index_->expiry.empty() && index_->expiry.front().first <= now) {
    DropOldestFinishedLocked();
  }
}

std::shared_ptr<Operation> OperationRegistry::NewOperation(OperationSpec spec, bool mirror) {
  std::string name = spec.name.empty() ? NewOperationName() : spec.name;
  return std::make_shared<Operation>(std::move(name), std::move(spec), clock_->Now(), jobs_, index_,
                                     clock_, mirror);
}

absl::StatusOr<std::shared_ptr<Operation>> OperationRegistry::Insert(std::shared_ptr<Operation> op,
                                                                     bool* inserted) {
  *inserted = false;
  absl::MutexLock lock(&index_->mu);
  ExpireLocked(clock_->Now());
  if (auto same_name = index_->by_name.find(op->name()); same_name != index_->by_name.end()) {
    return same_name->second;
  }
  if (!op->request_id().empty()) {
    auto by_id = index_->by_request_id.find(RequestIdKey(op->tenant(), op->request_id()));
    if (by_id != index_->by_request_id.end()) {
      auto it = index_->by_name.find(by_id->second);
      if (it != index_->by_name.end()) {
        if (it->second->request_digest() != op->request_digest()) {
          return absl::AlreadyExistsError(absl::StrCat(
              "request_id: \"", op->request_id(), "\" was already used for another request (",
              it->second->name(), ")"));
        }
        return it->second;
      }
    }
  }
  // Full: finished operations make room (oldest first) before anyone is refused, so that the table
  // never fills with results nobody can get any more. Only when every kept operation is still
  // running is a new one refused; the retry hint is then true as soon as one of them finishes.
  while (index_->by_name.size() >= options_.max_operations && DropOldestFinishedLocked()) {
    ++evicted_early_;
  }
  if (index_->by_name.size() >= options_.max_operations) {
    return status_payloads::WithRetryDelay(
        absl::UnavailableError(absl::StrCat(
            "too many operations are running (", index_->by_name.size(),
            ", the limit of --max_operations); retry once one has finished")),
        options_.retry_delay);
  }
  if (!op->request_id().empty()) {
    index_->by_request_id[RequestIdKey(op->tenant(), op->request_id())] = op->name();
  }
  index_->by_name.emplace(op->name(), op);
  *inserted = true;
  return op;
}

absl::StatusOr<std::shared_ptr<Operation>> OperationRegistry::AddPending(OperationSpec spec,
                                                                         Admission admission) {
  bool inserted = false;
  absl::StatusOr<std::shared_ptr<Operation>> op =
      Insert(NewOperation(std::move(spec)), &inserted);
  if (!op.ok() || !inserted) {
    jobs_->Release(admission.job);
    return op;
  }
  (*op)->Attach(std::move(admission.job), admission.coalesced);
  return op;
}

absl::StatusOr<std::shared_ptr<Operation>> OperationRegistry::AddDone(OperationSpec spec,
                                                                      PlacementPtr placement,
                                                                      v1::CacheResult cache) {
  std::shared_ptr<Operation> fresh = NewOperation(std::move(spec));
  fresh->InitDone(std::move(placement), cache);
  bool inserted = false;
  absl::StatusOr<std::shared_ptr<Operation>> op = Insert(std::move(fresh), &inserted);
  if (op.ok() && inserted) (*op)->NoteDone();
  return op;
}

absl::StatusOr<std::shared_ptr<Operation>> OperationRegistry::AddMirror(OperationSpec spec,
                                                                        v1::CacheResult cache) {
  if (spec.name.empty()) return absl::InternalError("a mirror needs the name of its operation");
  const std::string tenant = spec.tenant;
  std::shared_ptr<Operation> fresh = NewOperation(std::move(spec), /*mirror=*/true);
  {
    absl::MutexLock lock(&fresh->mu_);
    fresh->state_.cache = cache;
  }
  bool inserted = false;
  absl::StatusOr<std::shared_ptr<Operation>> op = Insert(std::move(fresh), &inserted);
  // Names are unguessable, but a name is never a way into another tenant's operation.
  if (op.ok() && (*op)->tenant() != tenant) return absl::NotFoundError("name: no such operation");
  return op;
}

absl::StatusOr<std::shared_ptr<Operation>> OperationRegistry::Find(const std::string& name,
                                                                   const std::string& tenant) {
  absl::MutexLock lock(&index_->mu);
  ExpireLocked(clock_->Now());
  auto it = index_->by_name.find(name);
  if (it == index_->by_name.end() || it->second->tenant() != tenant) {
    // The name comes from the caller: echo at most a prefix of it.
    constexpr size_t kEcho = 64;
    return absl::NotFoundError(absl::StrCat(
        "name: no operation \"", absl::CHexEscape(absl::string_view(name).substr(0, kEcho)),
        name.size() > kEcho ? "...\"" : "\"", " (unknown, or expired after finishing)"));
  }
  return it->second;
}

std::shared_ptr<Operation> OperationRegistry::FindByRequestId(const std::string& tenant,
                                                              const std::string& request_id) {
  if (request_id.empty()) return nullptr;
  absl::MutexLock lock(&index_->mu);
  ExpireLocked(clock_->Now());
  auto by_id = index_->by_request_id.find(RequestIdKey(tenant, request_id));
  if (by_id == index_->by_request_id.end()) return nullptr;
  auto it = index_->by_name.find(by_id->second);
  return it == index_->by_name.end() ? nullptr : it->second;
}

absl::StatusOr<std::shared_ptr<Operation>> OperationRegistry::Cancel(const std::string& name,
                                                                     const std::string& tenant) {
  absl::StatusOr<std::shared_ptr<Operation>> op = Find(name, tenant);
  if (!op.ok()) return op;
  (*op)->Cancel(absl::CancelledError("the operation was cancelled"));
  return op;
}

int64_t OperationRegistry::evicted_early() {
  absl::MutexLock lock(&index_->mu);
  return evicted_early_;
}

OperationRegistry::Counts OperationRegistry::CountByState() {
  std::vector<std::shared_ptr<Operation>> kept;
  {
    absl::MutexLock lock(&index_->mu);
    ExpireLocked(clock_->Now());
    kept.reserve(index_->by_name.size());
    for (const auto& [name, op] : index_->by_name) kept.push_back(op);
  }
  // Outside the index lock: an operation's own lock is never taken under it.
  Counts counts;
  for (const std::shared_ptr<Operation>& op : kept) ++(op->done() ? counts.done : counts.pending);
  return counts;
}

size_t OperationRegistry::size() {
  absl::MutexLock lock(&index_->mu);
  ExpireLocked(clock_->Now());
  return index_->by_name.size();
}

}  // namespace placement::jobs
