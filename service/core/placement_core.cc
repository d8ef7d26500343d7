#include "service/core/placement_core.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "service/cache/canonical_order.h"
#include "service/common/status_payloads.h"
#include "service/core/log_line.h"
#include "service/core/status_proto.h"
#include "service/engine/solve/solve.h"

namespace placement::core {
namespace {

absl::Duration FromProto(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

// INVALID_ARGUMENT with every violation both in the message and as a BadRequest payload.
absl::Status InvalidRequest(const std::vector<std::pair<std::string, std::string>>& violations) {
  std::vector<std::string> lines;
  lines.reserve(violations.size());
  for (const auto& [field, description] : violations) {
    lines.push_back(field.empty() ? description : absl::StrCat(field, ": ", description));
  }
  return common::WithFieldViolations(absl::InvalidArgumentError(absl::StrJoin(lines, "\n")),
                                   violations);
}

// Why the cached `placement` cannot answer a request (digest, ops, devices, time limit), or null.
// Nothing here trusts the value: it may come from the shared tier, written by anyone.
const char* Mismatch(const v1::Placement& placement, absl::string_view request_digest,
                     size_t num_ops, int num_devices, absl::Duration time_limit) {
  if (placement.provenance().request_digest() != request_digest) return "digest";
  if (static_cast<size_t>(placement.device_size()) != num_ops) return "ops";
  for (int32_t device : placement.device()) {
    if (device < 0 || device >= num_devices) return "device";
  }
  if (placement.provenance().time_limited() &&
      placement.provenance().time_limit_ns() < absl::ToInt64Nanoseconds(time_limit)) {
    return "time_limited";
  }
  return nullptr;
}

}  // namespace

int64_t EstimateJobMemoryBytes(int64_t num_ops, int64_t num_edges, int64_t num_devices,
                               int64_t microbatches) {
  // The model (names, SoA attributes, CSR both ways) plus an algorithm's per-op and per-edge scratch;
  // a training plan's simulations keep state per op copy and per copy of each transfer.
  const int64_t copies = std::max<int64_t>(1, microbatches) - 1;
  return (int64_t{64} << 10) + num_ops * 512 + num_edges * 96 + num_devices * num_devices * 16 +
         copies * (num_ops * 48 + num_edges * 16);
}

PlacementCore::PlacementCore(PlacementCoreOptions options, const AlgorithmCatalog* catalog,
                             cache::ResultCache* cache, jobs::JobManager* jobs,
                             jobs::OperationRegistry* operations, CoreObserver* observer)
    : options_(std::move(options)),
      catalog_(catalog),
      cache_(cache),
      jobs_(jobs),
      operations_(operations),
      observer_(observer),
      fingerprints_({.max_bytes = options_.fingerprint_bytes}) {}

absl::Duration PlacementCore::TimeLimitOf(const v1::PlacementOptions& options) const {
  absl::Duration limit = options_.default_time_limit;
  if (options.has_time_limit()) {
    const absl::Duration asked = FromProto(options.time_limit());
    if (asked > absl::ZeroDuration()) limit = asked;
  }
  return std::min(limit, options_.max_time_limit);
}

cache::CachedPlacement PlacementCore::LookupFor(const std::string& request_digest, size_t num_ops,
                                                int num_devices, absl::Duration time_limit) {
  cache::CachedPlacement hit = cache_->Lookup(request_digest);
  if (hit == nullptr) return nullptr;
  const char* reason = Mismatch(*hit, request_digest, num_ops, num_devices, time_limit);
  if (reason == nullptr) return hit;
  if (observer_ != nullptr) observer_->RecordCacheRejected(reason);
  // Once per reason and process: a poisoned shared tier must not flood the log.
  static constexpr const char* kReasons[] = {"digest", "ops", "device", "time_limited"};
  for (uint32_t i = 0; i < 4; ++i) {
    if (absl::string_view(kReasons[i]) != reason) continue;
    if ((logged_rejections_.fetch_or(1u << i) & (1u << i)) == 0 && reason != kReasons[3]) {
      LogLine(absl::StrCat("cache: ignoring a stored result for digest=",
                           absl::string_view(request_digest).substr(0, 12),
                           " that does not match its request (", reason,
                           "); recomputing and overwriting it (logged once per reason; counted "
                           "in placement_cache_rejected_total)"));
    }
  }
  return nullptr;
}

bool PlacementCore::TryRepeatHit(const v1::PlaceRequest& request, std::string* fingerprint,
                                 std::string* request_digest, v1::PlaceResponse* out) {
  fingerprint->clear();
  if (options_.fingerprint_bytes <= 0 || request.options().skip_cache()) return false;
  *fingerprint = RequestFingerprints::Of(request);
  std::optional<RequestFingerprints::Known> known = fingerprints_.Find(*fingerprint);
  if (!known.has_value()) return false;
  cache::CachedPlacement hit =
      LookupFor(known->request_digest, known->request_index->size(),
                request.cluster().devices_size(), TimeLimitOf(request.options()));
  // Evicted or unfit: take the full path (which re-fills the cache).
  if (hit == nullptr) return false;
  CountLookup(v1::HIT);
  *request_digest = known->request_digest;
  v1::Placement* placement = out->mutable_placement();
  cache::ToRequestOrder(*hit, *known->request_index, placement);
  placement->mutable_provenance()->set_cache(v1::HIT);
  placement->mutable_provenance()->set_queue_ns(0);
  return true;
}

void PlacementCore::RememberFingerprint(const std::string& fingerprint,
                                        const PreparedRequest& prepared) {
  if (fingerprint.empty()) return;
  fingerprints_.Insert(fingerprint, prepared.request_digest, prepared.request_index());
}

void PlacementCore::CountLookup(v1::CacheResult result) const {
  if (observer_ != nullptr) observer_->RecordCacheLookup(result);
}

absl::StatusOr<std::shared_ptr<const PreparedRequest>> PlacementCore::Prepare(
    const v1::PlaceRequest& request) const {
  std::vector<engine::FieldViolation> found;
  absl::StatusOr<engine::Model> model = engine::BuildModel(request, &found, options_.model_limits);
  absl::StatusOr<const Algorithm*> algorithm = catalog_->Find(request.options().algorithm());
  if (!model.ok() || !algorithm.ok()) {
    if (!model.ok() && model.status().code() != absl::StatusCode::kInvalidArgument) {
      return model.status();
    }
    std::vector<std::pair<std::string, std::string>> violations;
    violations.reserve(found.size() + 1);
    for (engine::FieldViolation& v : found) {
      violations.emplace_back(std::move(v.field), std::move(v.description));
    }
    if (!model.ok() && violations.empty()) {
      violations = ViolationsFromMessage(model.status().message());
    }
    if (!algorithm.ok()) {
      for (auto& violation : ViolationsFromMessage(algorithm.status().message())) {
        violations.push_back(std::move(violation));
      }
    }
    return InvalidRequest(violations);
  }

  auto prepared = std::make_shared<PreparedRequest>();
  prepared->algorithm = *algorithm;
  prepared->options = request.options();
  prepared->options.set_algorithm((*algorithm)->name());
  prepared->request_id = request.request_id();
  auto shared_model = std::make_shared<const engine::Model>(*std::move(model));
  prepared->request_digest = (*algorithm)->RequestDigest(*shared_model, prepared->options);
  prepared->estimated_memory_bytes =
      EstimateJobMemoryBytes(shared_model->num_ops(), shared_model->num_edges(),
                             shared_model->num_devices(), shared_model->plan.microbatches);
  prepared->model = std::move(shared_model);
  prepared->time_limit = TimeLimitOf(request.options());
  return prepared;
}

jobs::JobWork PlacementCore::MakeSolveWork(std::shared_ptr<const PreparedRequest> prepared) {
  cache::ResultCache* cache = cache_;
  const bool cache_time_limited = options_.cache_time_limited_results;
  return [prepared = std::move(prepared), cache,
          cache_time_limited](const jobs::JobContext& context) -> absl::StatusOr<jobs::PlacementPtr> {
    engine::SolveContext solve;
    solve.deadline = context.deadline();
    solve.cancelled = context.cancelled_flag();
    solve.seed = prepared->options.seed();
    const jobs::Clock* clock = &context.clock();
    solve.now = [clock] { return clock->Now(); };
    solve.on_progress = [&context](const engine::Progress& progress) {
      context.ReportProgress(absl::string_view(progress.stage.data(), progress.stage.size()),
                             progress.fraction, progress.best_makespan_ns);
    };
    // The budget this run really has: the time limit, or less when a caller's deadline is nearer.
    // (The job's deadline is min(start + time limit, the callers' deadlines), taken just before this
    // runs: within a few tens of ms of the time limit, it is the time limit.)
    absl::Duration budget = prepared->time_limit;
    const absl::Duration left = context.deadline() - clock->Now();
    if (left < budget - absl::Milliseconds(50)) budget = left;
    absl::StatusOr<v1::Placement> placement =
        prepared->algorithm->Solve(*prepared->model, prepared->options, solve);
    if (!placement.ok()) return placement.status();
    placement->mutable_provenance()->set_time_limit_ns(
        absl::ToInt64Nanoseconds(std::max(budget, absl::ZeroDuration())));
    jobs::PlacementPtr canonical =
        cache::ToCanonicalOrder(*placement, prepared->request_index());
    const bool cut_short = canonical->provenance().time_limited();
    if (!context.cancelled() && (cache_time_limited || !cut_short)) {
      cache->Insert(prepared->request_digest, canonical);
    }
    return canonical;
  };
}

std::string PlacementCore::SingleFlightKey(const PreparedRequest& prepared) {
  // The key covers the time limit: a caller with a larger budget must not be handed a result cut
  // short by someone else's smaller one.
  return absl::StrCat(prepared.request_digest, "@", absl::ToInt64Nanoseconds(prepared.time_limit));
}

jobs::JobSpec PlacementCore::MakeJobSpec(std::shared_ptr<const PreparedRequest> prepared,
                                         absl::Time deadline, const std::string& tenant) {
  jobs::JobSpec spec;
  spec.request_digest = SingleFlightKey(*prepared);
  spec.tenant = tenant;
  if (options_.tenant_limits) spec.tenant_limits = options_.tenant_limits(tenant);
  spec.algorithm = prepared->algorithm->name();
  spec.time_limit = prepared->time_limit;
  spec.deadline =
      deadline == absl::InfiniteFuture() ? deadline : deadline - options_.reply_margin;
  spec.estimated_memory_bytes = prepared->estimated_memory_bytes;
  spec.work = MakeSolveWork(std::move(prepared));
  return spec;
}

absl::StatusOr<PlaceStart> PlacementCore::StartPlace(
    std::shared_ptr<const PreparedRequest> prepared, absl::Time deadline,
    const std::string& tenant) {
  PlaceStart start;
  if (!prepared->options.skip_cache()) {
    start.hit = LookupFor(prepared->request_digest, prepared->request_index().size(),
                          prepared->model->num_devices(), prepared->time_limit);
    if (start.hit != nullptr) {
      CountLookup(v1::HIT);
      return start;
    }
  }
  absl::StatusOr<jobs::Admission> admission =
      jobs_->Acquire(MakeJobSpec(std::move(prepared), deadline, tenant));
  if (!admission.ok()) return admission.status();
  CountLookup(admission->coalesced ? v1::COALESCED : v1::MISS);
  start.admission = *std::move(admission);
  return start;
}

void PlacementCore::FillPlaceResponse(const PreparedRequest& prepared,
                                      const v1::Placement& canonical, v1::CacheResult cache,
                                      absl::Duration queue_time, v1::PlaceResponse* out) const {
  v1::Placement* placement = out->mutable_placement();
  cache::ToRequestOrder(canonical, prepared.request_index(), placement);
  v1::Provenance* provenance = placement->mutable_provenance();
  provenance->set_cache(cache);
  provenance->set_queue_ns(cache == v1::HIT ? 0 : absl::ToInt64Nanoseconds(queue_time));
}

absl::StatusOr<std::shared_ptr<jobs::Operation>> PlacementCore::Submit(
    const v1::PlaceRequest& request, const std::string& tenant, v1::CacheResult* cache,
    std::string* request_digest) {
  absl::StatusOr<std::shared_ptr<const PreparedRequest>> prepared = Prepare(request);
  if (!prepared.ok()) return prepared.status();
  const PreparedRequest& p = **prepared;
  *request_digest = p.request_digest;

  if (std::shared_ptr<jobs::Operation> existing =
          operations_->FindByRequestId(tenant, p.request_id)) {
    if (existing->request_digest() != p.request_digest) {
      return absl::AlreadyExistsError(absl::StrCat("request_id: \"", p.request_id,
                                                   "\" was already used for another request (",
                                                   existing->name(), ")"));
    }
    *cache = existing->snapshot().cache;
    return existing;
  }

  jobs::OperationSpec spec;
  spec.tenant = tenant;
  spec.request_id = p.request_id;
  spec.request_digest = p.request_digest;
  // A copy of the op order only: the operation outlives the job, the model need not.
  spec.request_index = std::make_shared<const std::vector<int32_t>>(p.request_index());
  spec.algorithm = p.algorithm->name();

  if (!p.options.skip_cache()) {
    if (cache::CachedPlacement hit = LookupFor(p.request_digest, p.request_index().size(),
                                               p.model->num_devices(), p.time_limit)) {
      CountLookup(v1::HIT);
      *cache = v1::HIT;
      absl::StatusOr<std::shared_ptr<jobs::Operation>> done =
          operations_->AddDone(std::move(spec), std::move(hit), v1::HIT);
      if (done.ok() && shared_ != nullptr) shared_->RecordDone(**done, p.model->num_devices());
      return done;
    }
  }
  if (shared_ != nullptr) {
    shared_ops::SharedSubmit submit;
    submit.operation = std::move(spec);
    submit.job_key = SingleFlightKey(p);
    submit.num_devices = p.model->num_devices();
    submit.time_limit = p.time_limit;
    submit.serialized_request = request.SerializeAsString();
    submit.make_job = [this, prepared = *prepared, tenant] {
      return MakeJobSpec(prepared, absl::InfiniteFuture(), tenant);
    };
    absl::StatusOr<std::shared_ptr<jobs::Operation>> op = shared_->Submit(std::move(submit), cache);
    if (op.ok()) CountLookup(*cache);
    return op;
  }
  absl::StatusOr<jobs::Admission> admission =
      jobs_->Acquire(MakeJobSpec(*std::move(prepared), absl::InfiniteFuture(), tenant));
  if (!admission.ok()) return admission.status();
  *cache = admission->coalesced ? v1::COALESCED : v1::MISS;
  CountLookup(*cache);
  return operations_->AddPending(std::move(spec), *std::move(admission));
}

absl::StatusOr<std::shared_ptr<jobs::Operation>> PlacementCore::FindOperation(
    const std::string& name, const std::string& tenant) {
  if (shared_ != nullptr) return shared_->Find(name, tenant);
  return operations_->Find(name, tenant);
}

absl::StatusOr<std::shared_ptr<jobs::Operation>> PlacementCore::CancelOperation(
    const std::string& name, const std::string& tenant) {
  if (shared_ != nullptr) return shared_->Cancel(name, tenant);
  return operations_->Cancel(name, tenant);
}

absl::StatusOr<shared_ops::RebuiltJob> PlacementCore::RebuildSharedJob(
    const std::string& serialized_request, const std::string& tenant, absl::Duration time_limit) {
  v1::PlaceRequest request;
  if (!request.ParseFromString(serialized_request)) {
    return absl::InvalidArgumentError("the shared request does not parse as a PlaceRequest");
  }
  absl::StatusOr<std::shared_ptr<const PreparedRequest>> prepared = Prepare(request);
  if (!prepared.ok()) return prepared.status();
  if (time_limit > absl::ZeroDuration() && time_limit != (*prepared)->time_limit) {
    // The job runs with what it was submitted with, not with this replica's --default_time_limit
    // (a rolling update may change it): the time limit is part of the job key.
    if (time_limit > options_.max_time_limit) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the job was submitted with a time limit of ", absl::FormatDuration(time_limit),
          ", above this replica's --max_time_limit=", absl::FormatDuration(options_.max_time_limit)));
    }
    auto carried = std::make_shared<PreparedRequest>(**prepared);
    carried->time_limit = time_limit;
    prepared = std::shared_ptr<const PreparedRequest>(std::move(carried));
  }
  std::string request_digest = (*prepared)->request_digest;
  return shared_ops::RebuiltJob{MakeJobSpec(*std::move(prepared), absl::InfiniteFuture(), tenant),
                                std::move(request_digest)};
}

void PlacementCore::FillOperation(const jobs::Operation& operation, v1::Operation* out) const {
  const jobs::Operation::Snapshot snapshot = operation.snapshot();
  out->set_name(operation.name());
  v1::OperationProgress* progress = out->mutable_metadata();
  progress->set_stage(snapshot.progress.stage);
  progress->set_fraction(snapshot.progress.fraction);
  progress->set_best_makespan_ns(snapshot.progress.best_makespan_ns);
  progress->set_request_digest(operation.request_digest());
  out->set_done(snapshot.done);
  if (!snapshot.done) return;
  if (!snapshot.error.ok() || snapshot.placement == nullptr) {
    *out->mutable_error() = StatusToProto(
        snapshot.error.ok() ? absl::InternalError("operation finished without a result")
                            : snapshot.error);
    return;
  }
  v1::Placement* placement = out->mutable_response()->mutable_placement();
  if (operation.request_index() != nullptr) {
    cache::ToRequestOrder(*snapshot.placement, *operation.request_index(), placement);
  } else {
    *placement = *snapshot.placement;
  }
  v1::Provenance* provenance = placement->mutable_provenance();
  provenance->set_cache(snapshot.cache);
  provenance->set_queue_ns(
      snapshot.cache == v1::HIT ? 0 : absl::ToInt64Nanoseconds(snapshot.queue_time));
}

absl::StatusOr<EvaluateStart> PlacementCore::StartEvaluate(const v1::EvaluateRequest& request,
                                                           absl::Time deadline,
                                                           const std::string& tenant) {
  auto copy = std::make_shared<const v1::EvaluateRequest>(request);
  auto output = std::make_shared<EvaluateOutput>();
  jobs::JobSpec spec;
  spec.tenant = tenant;
  if (options_.tenant_limits) spec.tenant_limits = options_.tenant_limits(tenant);
  spec.algorithm = "evaluate";
  spec.deadline =
      deadline == absl::InfiniteFuture() ? deadline : deadline - options_.reply_margin;
  spec.time_limit = options_.max_time_limit;
  spec.estimated_memory_bytes =
      EstimateJobMemoryBytes(request.graph().ops_size(), request.graph().edges_size(),
                             request.cluster().devices_size(), request.options().microbatches());
  spec.work = [copy, output, limits = options_.model_limits](
                  const jobs::JobContext&) -> absl::StatusOr<jobs::PlacementPtr> {
    absl::StatusOr<v1::EvaluateResponse> response = engine::Evaluate(*copy, limits);
    if (!response.ok()) {
      if (response.status().code() == absl::StatusCode::kInvalidArgument) {
        return InvalidRequest(ViolationsFromMessage(response.status().message()));
      }
      return response.status();
    }
    output->response = *std::move(response);
    // Points into `output`, which the waiter also holds.
    return jobs::PlacementPtr(output, &output->response.placement());
  };
  absl::StatusOr<jobs::Admission> admission = jobs_->Acquire(std::move(spec));
  if (!admission.ok()) return admission.status();
  return EvaluateStart{*std::move(admission), std::move(output)};
}

v1::ListAlgorithmsResponse PlacementCore::ListAlgorithms() const {
  v1::ListAlgorithmsResponse response;
  for (const Algorithm* algorithm : catalog_->All()) {
    v1::AlgorithmInfo* info = response.add_algorithms();
    info->set_name(algorithm->name());
    info->set_description(algorithm->description());
    info->set_version(algorithm->version());
  }
  return response;
}

}  // namespace placement::core
