#include "service/core/placement_core.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/time_util.h"
#include "service/engine/model/model_builder.h"
#include "service/cache/canonical_order.h"
#include "service/core/caller_order.h"
#include "service/core/log_line.h"
#include "service/core/recommend_answer.h"
#include "service/core/sizing.h"
#include "service/core/status_proto.h"
#include "service/engine/solve/solve.h"

namespace placement::core {
namespace {

absl::Duration FromProto(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
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

PlaceCall PlaceCall::Of(const v1::PlaceRequest& request) {
  PlaceCall call;
  call.decode = [&request]() -> absl::StatusOr<const v1::PlaceRequest*> { return &request; };
  return call;
}

// The request as the shared path of Place and SubmitPlacement knows it.
struct PlacementCore::Resolution {
  // Digest, op order, device count, time limit, request_id: from the repeat index or from `prepared`.
  KnownRequest known;
  // The validated request; null while it is known from its bytes alone (nothing decoded).
  std::shared_ptr<const PreparedRequest> prepared;
  // The decoded request, when it was decoded (valid during the core call only).
  const v1::PlaceRequest* request = nullptr;
  // The answer from the cache (settled).
  cache::CachedPlacement hit;
  // SubmitPlacement: the live operation the tenant created with the same request_id (settled).
  std::shared_ptr<jobs::Operation> existing;
};

PlacementCore::PlacementCore(PlacementCoreOptions options,
                             const engine::AlgorithmRegistry* algorithms,
                             cache::ResultCache* cache, jobs::JobManager* jobs,
                             jobs::OperationRegistry* operations, CoreObserver* observer)
    : options_(std::move(options)),
      algorithms_(algorithms),
      cache_(cache),
      jobs_(jobs),
      operations_(operations),
      observer_(observer),
      repeat_index_({.max_bytes = options_.repeat_index_bytes}) {}

absl::Duration PlacementCore::TimeLimitOf(const v1::PlacementOptions& options) const {
  absl::Duration limit = options_.default_time_limit;
  if (options.has_time_limit()) {
    const absl::Duration asked = FromProto(options.time_limit());
    if (asked > absl::ZeroDuration()) limit = asked;
  }
  return std::min(limit, options_.max_time_limit);
}

cache::CachedPlacement PlacementCore::LookUp(const KnownRequest& known) {
  cache::CachedPlacement hit = cache_->Lookup(known.request_digest);
  if (hit == nullptr) return nullptr;
  const char* reason = Mismatch(*hit, known.request_digest, known.request_index->size(),
                                known.num_devices, known.time_limit);
  if (reason == nullptr) return hit;
  if (observer_ != nullptr) observer_->RecordCacheRejected(reason);
  // Once per reason and process: a poisoned shared tier must not flood the log.
  static constexpr const char* kReasons[] = {"digest", "ops", "device", "time_limited"};
  for (uint32_t i = 0; i < 4; ++i) {
    if (absl::string_view(kReasons[i]) != reason) continue;
    if ((logged_rejections_.fetch_or(1u << i) & (1u << i)) == 0 && reason != kReasons[3]) {
      LogLine(absl::StrCat("cache: ignoring a stored result for digest=",
                           absl::string_view(known.request_digest).substr(0, 12),
                           " that does not match its request (", reason,
                           "); recomputing and overwriting it (logged once per reason; counted "
                           "in placement_cache_rejected_total)"));
    }
  }
  return nullptr;
}

void PlacementCore::CountLookup(v1::CacheResult result) const {
  if (observer_ != nullptr) observer_->RecordCacheLookup(result);
}

absl::StatusOr<std::shared_ptr<const PreparedRequest>> PlacementCore::Prepare(
    const v1::PlaceRequest& request) const {
  absl::StatusOr<engine::Model> model =
      engine::BuildModel(request, /*violations=*/nullptr, options_.model_limits);
  absl::StatusOr<const engine::Partitioner*> algorithm =
      algorithms_->Find(request.options().algorithm());
  if (!model.ok() || !algorithm.ok()) {
    if (!model.ok() && model.status().code() != absl::StatusCode::kInvalidArgument) {
      return model.status();
    }
    // Every violation at once: the request's and the algorithm name's, as the engine gave them.
    std::vector<engine::FieldViolation> violations;
    if (!model.ok()) violations = engine::ViolationsOf(model.status());
    if (!algorithm.ok()) {
      for (engine::FieldViolation& violation : engine::ViolationsOf(algorithm.status())) {
        violations.push_back(std::move(violation));
      }
    }
    return engine::ViolationsError(violations);
  }

  auto prepared = std::make_shared<PreparedRequest>();
  prepared->algorithm = *algorithm;
  prepared->options = request.options();
  prepared->options.set_algorithm(std::string((*algorithm)->name()));
  prepared->request_id = request.request_id();
  auto shared_model = std::make_shared<const engine::Model>(*std::move(model));
  prepared->request_digest =
      engine::RequestDigestFor(*shared_model, **algorithm, prepared->options);
  prepared->estimated_memory_bytes =
      EstimateJobMemoryBytes(shared_model->num_ops(), shared_model->num_edges(),
                             shared_model->num_devices(), shared_model->plan.microbatches);
  prepared->model = std::move(shared_model);
  prepared->time_limit = TimeLimitOf(request.options());
  return prepared;
}

absl::StatusOr<PlacementCore::Resolution> PlacementCore::Resolve(const PlaceCall& call, bool submit,
                                                                 CallNotes* notes) {
  Resolution resolution;
  // A byte-identical repeat: known without decoding. When its answer is no longer cached (evicted,
  // or unfit for it) it takes the decoding path below, which admits the job.
  std::string key;
  if (repeat_index_.enabled() && !call.wire.empty()) {
    key = RepeatIndex::KeyOf(call.wire);
    if (std::optional<KnownRequest> known = repeat_index_.Find(key)) {
      resolution.known = *std::move(known);
      notes->request_digest = resolution.known.request_digest;
      if (Settle(resolution, call.tenant, submit)) return resolution;
      key.clear();  // known already: nothing to remember below
    }
  }
  const bool settled_from_bytes = !resolution.known.request_digest.empty();

  absl::StatusOr<const v1::PlaceRequest*> request = call.decode();
  if (!request.ok()) return request.status();
  absl::StatusOr<std::shared_ptr<const PreparedRequest>> prepared = Prepare(**request);
  if (!prepared.ok()) return prepared.status();
  resolution.request = *request;
  resolution.prepared = *std::move(prepared);
  const PreparedRequest& p = *resolution.prepared;
  notes->request_digest = p.request_digest;
  resolution.known = KnownRequest{
      .request_digest = p.request_digest,
      .request_id = p.request_id,
      .algorithm = std::string(p.algorithm->name()),
      // The model's own op order (no copy); the repeat index and operations keep copies.
      .request_index = std::shared_ptr<const std::vector<int32_t>>(p.model, &p.model->request_index),
      .num_devices = p.model->num_devices(),
      .time_limit = p.time_limit};
  if (!p.options.skip_cache() && !key.empty()) repeat_index_.Insert(key, resolution.known);
  if (!settled_from_bytes) Settle(resolution, call.tenant, submit);
  return resolution;
}

bool PlacementCore::Settle(Resolution& resolution, const std::string& tenant, bool submit) {
  const KnownRequest& known = resolution.known;
  if (submit) {
    if (std::shared_ptr<jobs::Operation> existing =
            operations_->FindByRequestId(tenant, known.request_id)) {
      resolution.existing = std::move(existing);
      return true;
    }
  }
  // A request known from its bytes alone never asked to skip the cache (those are not remembered).
  if (resolution.prepared != nullptr && resolution.prepared->options.skip_cache()) return false;
  resolution.hit = LookUp(known);
  if (resolution.hit == nullptr) return false;
  CountLookup(v1::HIT);
  return true;
}

absl::StatusOr<std::shared_ptr<PendingAnswer>> PlacementCore::Place(const PlaceCall& call,
                                                                    v1::PlaceResponse* response,
                                                                    CallNotes* notes) {
  absl::StatusOr<Resolution> resolution = Resolve(call, /*submit=*/false, notes);
  if (!resolution.ok()) return resolution.status();
  if (resolution->hit != nullptr) {
    notes->cache = v1::HIT;
    WriteInCallerOrder(*resolution->hit, resolution->known.request_index.get(), v1::HIT,
                       absl::ZeroDuration(), response->mutable_placement());
    return nullptr;
  }
  std::shared_ptr<const PreparedRequest> prepared = std::move(resolution->prepared);
  absl::StatusOr<jobs::Admission> admission =
      jobs_->Acquire(MakeSolveJobSpec(prepared, call.deadline, call.tenant));
  if (!admission.ok()) return admission.status();
  const v1::CacheResult cache = admission->coalesced ? v1::COALESCED : v1::MISS;
  CountLookup(cache);
  notes->cache = cache;
  return std::make_shared<JobAnswer>(
      jobs_, std::move(admission->job),
      [prepared = std::move(prepared), cache, response](const jobs::JobResult& result) {
        WriteInCallerOrder(**result.placement, &prepared->request_index(), cache,
                           result.queue_time, response->mutable_placement());
        return absl::OkStatus();
      });
}

absl::Status PlacementCore::Submit(const PlaceCall& call, v1::Operation* operation,
                                   CallNotes* notes) {
  absl::StatusOr<Resolution> resolution = Resolve(call, /*submit=*/true, notes);
  if (!resolution.ok()) return resolution.status();
  absl::StatusOr<std::shared_ptr<jobs::Operation>> op = SubmitOperation(call, *resolution, notes);
  if (!op.ok()) return op.status();
  notes->operation = (*op)->name();
  OperationHandle(*std::move(op)).Fill(operation);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<jobs::Operation>> PlacementCore::SubmitOperation(
    const PlaceCall& call, Resolution& resolution, CallNotes* notes) {
  const KnownRequest& known = resolution.known;
  if (resolution.existing != nullptr) {
    if (resolution.existing->request_digest() != known.request_digest) {
      return absl::AlreadyExistsError(absl::StrCat(
          "request_id: \"", known.request_id, "\" was already used for another request (",
          resolution.existing->name(), ")"));
    }
    notes->cache = resolution.existing->snapshot().cache;
    return resolution.existing;
  }

  jobs::OperationSpec spec;
  spec.tenant = call.tenant;
  spec.request_id = known.request_id;
  spec.request_digest = known.request_digest;
  // The operation outlives the job and may outlive the model: it keeps its own op order (the repeat
  // index's is immutable and shared already).
  spec.request_index = resolution.prepared == nullptr
                           ? known.request_index
                           : std::make_shared<const std::vector<int32_t>>(*known.request_index);
  spec.algorithm = known.algorithm;

  if (resolution.hit != nullptr) {
    notes->cache = v1::HIT;
    absl::StatusOr<std::shared_ptr<jobs::Operation>> done =
        operations_->AddDone(std::move(spec), std::move(resolution.hit), v1::HIT);
    if (done.ok() && shared_ != nullptr) shared_->RecordDone(**done, known.num_devices);
    return done;
  }
  const std::shared_ptr<const PreparedRequest> prepared = std::move(resolution.prepared);
  v1::CacheResult cache = v1::CACHE_RESULT_UNSPECIFIED;
  if (shared_ != nullptr) {
    shared_ops::SharedSubmit submit;
    submit.operation = std::move(spec);
    submit.job_key = SingleFlightKey(*prepared);
    submit.num_devices = known.num_devices;
    submit.time_limit = known.time_limit;
    if (!call.wire.empty()) {
      submit.serialized_request = absl::StrJoin(call.wire, "");
    } else {
      submit.serialized_request = resolution.request->SerializeAsString();
    }
    submit.make_job = [this, prepared, tenant = call.tenant] {
      return MakeSolveJobSpec(prepared, absl::InfiniteFuture(), tenant);
    };
    absl::StatusOr<std::shared_ptr<jobs::Operation>> op = shared_->Submit(std::move(submit), &cache);
    if (op.ok()) {
      CountLookup(cache);
      notes->cache = cache;
    }
    return op;
  }
  absl::StatusOr<jobs::Admission> admission =
      jobs_->Acquire(MakeSolveJobSpec(prepared, absl::InfiniteFuture(), call.tenant));
  if (!admission.ok()) return admission.status();
  cache = admission->coalesced ? v1::COALESCED : v1::MISS;
  CountLookup(cache);
  notes->cache = cache;
  return operations_->AddPending(std::move(spec), *std::move(admission));
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
    const Clock* clock = &context.clock();
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
        engine::Solve(*prepared->model, *prepared->algorithm, prepared->options, solve);
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

jobs::JobSpec PlacementCore::MakeJobSpec(std::string key, std::string algorithm,
                                         absl::Duration time_limit,
                                         int64_t estimated_memory_bytes, absl::Time deadline,
                                         const std::string& tenant, jobs::JobWork work) const {
  jobs::JobSpec spec;
  spec.request_digest = std::move(key);
  spec.tenant = tenant;
  if (options_.tenant_limits) spec.tenant_limits = options_.tenant_limits(tenant);
  spec.algorithm = std::move(algorithm);
  spec.time_limit = time_limit;
  spec.deadline =
      deadline == absl::InfiniteFuture() ? deadline : deadline - options_.reply_margin;
  spec.estimated_memory_bytes = estimated_memory_bytes;
  spec.work = std::move(work);
  return spec;
}

jobs::JobSpec PlacementCore::MakeSolveJobSpec(std::shared_ptr<const PreparedRequest> prepared,
                                              absl::Time deadline, const std::string& tenant) {
  std::string key = SingleFlightKey(*prepared);
  std::string algorithm(prepared->algorithm->name());
  const absl::Duration time_limit = prepared->time_limit;
  const int64_t memory = prepared->estimated_memory_bytes;
  return MakeJobSpec(std::move(key), std::move(algorithm), time_limit, memory, deadline, tenant,
                     MakeSolveWork(std::move(prepared)));
}

absl::Status PlacementCore::GetOperation(const std::string& name, const std::string& tenant,
                                         v1::Operation* operation, CallNotes* notes) {
  absl::StatusOr<OperationHandle> found = FindOperation(name, tenant);
  if (!found.ok()) return found.status();
  notes->request_digest = found->request_digest();
  found->Fill(operation);
  return absl::OkStatus();
}

absl::Status PlacementCore::CancelOperation(const std::string& name, const std::string& tenant,
                                            v1::Operation* operation, CallNotes* notes) {
  absl::StatusOr<std::shared_ptr<jobs::Operation>> cancelled =
      shared_ != nullptr ? shared_->Cancel(name, tenant) : operations_->Cancel(name, tenant);
  if (!cancelled.ok()) return cancelled.status();
  const OperationHandle handle(*std::move(cancelled));
  notes->request_digest = handle.request_digest();
  handle.Fill(operation);
  return absl::OkStatus();
}

absl::StatusOr<OperationHandle> PlacementCore::FindOperation(const std::string& name,
                                                             const std::string& tenant) {
  absl::StatusOr<std::shared_ptr<jobs::Operation>> found =
      shared_ != nullptr ? shared_->Find(name, tenant) : operations_->Find(name, tenant);
  if (!found.ok()) return found.status();
  return OperationHandle(*std::move(found));
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
  return shared_ops::RebuiltJob{
      MakeSolveJobSpec(*std::move(prepared), absl::InfiniteFuture(), tenant),
      std::move(request_digest)};
}

absl::StatusOr<std::shared_ptr<PendingAnswer>> PlacementCore::Evaluate(
    v1::EvaluateRequest request, absl::Time deadline, const std::string& tenant,
    v1::EvaluateResponse* response) {
  const int64_t memory =
      EstimateJobMemoryBytes(request.graph().ops_size(), request.graph().edges_size(),
                             request.cluster().devices_size(), request.options().microbatches());
  auto moved = std::make_shared<v1::EvaluateRequest>(std::move(request));
  // Where the worker leaves the answer; the job's placement points into it.
  auto output = std::make_shared<v1::EvaluateResponse>();
  jobs::JobWork work = [moved, output, limits = options_.model_limits](
                           const jobs::JobContext&) -> absl::StatusOr<jobs::PlacementPtr> {
    // Errors carry their violations as data already (engine::ViolationsError).
    absl::StatusOr<v1::EvaluateResponse> evaluated = engine::Evaluate(*moved, limits);
    if (!evaluated.ok()) return evaluated.status();
    *output = *std::move(evaluated);
    return jobs::PlacementPtr(output, &output->placement());
  };
  absl::StatusOr<jobs::Admission> admission =
      jobs_->Acquire(MakeJobSpec(/*key=*/"", "evaluate", options_.max_time_limit, memory, deadline,
                                 tenant, std::move(work)));
  if (!admission.ok()) return admission.status();
  return std::make_shared<JobAnswer>(
      jobs_, std::move(admission->job), [output, response](const jobs::JobResult&) {
        // Nobody else reads the output of an Evaluate job (it is never shared).
        response->Swap(output.get());
        return absl::OkStatus();
      });
}

// What both rounds of a Recommend place from: the graph (once, with a scratch cluster and options
// each candidate swaps in), its bytes, the pool's cluster and options, and the candidates. Shared with
// the second round, which runs after the call returned.
struct PlacementCore::RecommendRound {
  std::vector<SizingCandidate> candidates;
  v1::PlaceRequest place;
  std::string graph_bytes;
  v1::Cluster pool;
  v1::PlacementOptions options;
  absl::Time deadline;
  std::string tenant;
};

absl::StatusOr<std::vector<RecommendAnswer::Part>> PlacementCore::PlaceRecommendCandidates(
    RecommendRound& round, const std::vector<int32_t>& rows, absl::Duration share, bool refine,
    const v1::RecommendRequest& settings, v1::RecommendResponse* response) {
  std::vector<RecommendAnswer::Part> parts;
  const auto release_all = [&parts] {
    for (RecommendAnswer::Part& part : parts) part.pending->Release();
  };
  for (const int32_t k : rows) {
    const SizingCandidate& candidate = round.candidates[k];
    v1::RecommendCandidate* row = response->mutable_candidates(k);
    v1::PlaceRequest own;  // the candidate's cluster and options: what its bytes add to the graph's
    *own.mutable_cluster() = CandidateCluster(round.pool, candidate);
    *own.mutable_options() = CandidateOptions(round.options, own.cluster(), candidate.data_parallel);
    *own.mutable_options()->mutable_time_limit() =
        google::protobuf::util::TimeUtil::NanosecondsToDuration(absl::ToInt64Nanoseconds(share));
    const std::string own_bytes = own.SerializeAsString();
    round.place.mutable_cluster()->Swap(own.mutable_cluster());
    round.place.mutable_options()->Swap(own.mutable_options());
    PlaceCall call;
    call.wire = {round.graph_bytes, own_bytes};
    call.decode = [&round]() -> absl::StatusOr<const v1::PlaceRequest*> { return &round.place; };
    call.deadline = round.deadline;
    call.tenant = round.tenant;
    CallNotes candidate_notes;
    if (settings.submit_only()) {
      v1::Operation operation;
      const absl::Status submitted = Submit(call, &operation, &candidate_notes);
      row->set_request_digest(candidate_notes.request_digest);
      if (!submitted.ok()) {
        if (submitted.code() != absl::StatusCode::kInvalidArgument) return submitted;
        *row->mutable_error() = StatusToProto(submitted);
        continue;
      }
      row->set_operation(operation.name());
      row->set_cache(candidate_notes.cache);
      if (operation.done() && operation.has_response()) {
        FillRowFromPlacement(operation.response().placement(), row);
      }
      continue;
    }
    auto answer = std::make_unique<v1::PlaceResponse>();
    absl::StatusOr<std::shared_ptr<PendingAnswer>> pending = Place(call, answer.get(), &candidate_notes);
    if (!pending.ok()) {
      // A second solve that cannot start (the workers are full) leaves the first one's row.
      if (refine) continue;
      row->set_request_digest(candidate_notes.request_digest);
      if (pending.status().code() != absl::StatusCode::kInvalidArgument) {
        release_all();
        return pending.status();
      }
      *row->mutable_error() = StatusToProto(pending.status());
      continue;
    }
    row->set_request_digest(candidate_notes.request_digest);
    if (*pending == nullptr) {  // from the cache
      FillRowFromPlacement(answer->placement(), row);
      row->set_cache(candidate_notes.cache);
      if (settings.include_placements()) row->mutable_placement()->Swap(answer->mutable_placement());
      continue;
    }
    if (!refine) row->set_cache(candidate_notes.cache);
    parts.push_back(RecommendAnswer::Part{*std::move(pending), std::move(answer), k, refine});
  }
  return parts;
}

absl::StatusOr<std::shared_ptr<PendingAnswer>> PlacementCore::Recommend(
    const v1::RecommendRequest& request, absl::Time deadline, const std::string& tenant,
    v1::RecommendResponse* response, CallNotes* notes) {
  const absl::Time started = absl::Now();
  absl::StatusOr<std::vector<SizingCandidate>> candidates =
      PlanSizingCandidates(request, options_.max_recommend_candidates);
  if (!candidates.ok()) return candidates.status();
  auto round = std::make_shared<RecommendRound>();
  round->candidates = *std::move(candidates);
  round->deadline = deadline;
  round->tenant = tenant;
  // One request object for every candidate: the graph is copied once, and serialized once — each
  // candidate's bytes are the graph's and its own cluster and options', so a repeat of a candidate is
  // answered through the repeat index without modelling it again (repeat_index.h).
  v1::PlaceRequest& place = round->place;
  *place.mutable_graph() = request.graph();
  round->graph_bytes = place.SerializeAsString();
  // The graph and the whole pool as one request: violations named as in a PlaceRequest.
  *place.mutable_cluster() = request.cluster();
  *place.mutable_options() = request.options();
  place.mutable_options()->clear_data_parallel();
  absl::StatusOr<std::shared_ptr<const PreparedRequest>> pool = Prepare(place);
  if (!pool.ok()) return pool.status();
  notes->request_digest = (*pool)->request_digest;
  round->pool = request.cluster();
  round->options = request.options();

  // One budget for the whole call, the request's time limit (or the default), shared out so that the
  // candidates end together on the workers, and the rest kept for the contenders (sizing.h); the
  // caller's deadline caps each of them as it caps a Place. (Not derived from the deadline: a
  // candidate's bytes, and so its repeat, must not change with it.)
  const absl::Duration budget = TimeLimitOf(request.options());
  const int32_t workers = std::max(1, jobs_->workers());
  const int32_t count = static_cast<int32_t>(round->candidates.size());
  const absl::Duration first_share = FirstRoundShare(budget, workers, count);

  v1::RecommendRequest settings = request;
  settings.clear_graph();
  settings.clear_cluster();
  for (const SizingCandidate& candidate : round->candidates) {
    v1::RecommendCandidate* row = response->add_candidates();
    row->set_devices(candidate.devices);
    row->set_data_parallel(candidate.data_parallel);
    for (const int32_t i : candidate.pool_devices) row->add_device_names(request.cluster().devices(i).name());
  }
  // The largest placement problems (devices per replica) first: the workers take jobs in order, and
  // the long ones started early end with the short ones.
  std::vector<int32_t> order(count);
  for (int32_t k = 0; k < count; ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&round](int32_t a, int32_t b) {
    const SizingCandidate& x = round->candidates[a];
    const SizingCandidate& y = round->candidates[b];
    return x.devices / x.data_parallel > y.devices / y.data_parallel;
  });
  absl::StatusOr<std::vector<RecommendAnswer::Part>> first =
      PlaceRecommendCandidates(*round, order, first_share, /*refine=*/false, settings, response);
  if (!first.ok()) return first.status();

  // The second round, once every row has its first answer: the contenders, re-solved with the rest
  // of the budget (their rows then show that answer; a second solve that fails keeps the first).
  // The second share is what the budget has left once the first round is done, less the most a
  // first-round solve ran past its share (SecondRoundShare), so that a late first round (a loaded
  // machine) shortens or skips the second instead of ending the call past its budget.
  RecommendAnswer::Refine refine = [this, round, settings, budget, first_share, started, workers](
                                       v1::RecommendResponse* rows,
                                       absl::Duration longest_first_solve) -> std::vector<RecommendAnswer::Part> {
    CompleteRecommendation(settings, rows);
    std::vector<int32_t> contenders = RowsToRefine(settings, *rows, first_share, workers);
    const absl::Duration overrun = longest_first_solve - first_share;
    const absl::Duration left =
        options_.recommend_second_round_within_budget ? started + budget - absl::Now() : absl::InfiniteDuration();
    const absl::Duration share = SecondRoundShare(budget, workers, first_share, left, overrun,
                                                  static_cast<int32_t>(contenders.size()));
    if (share == absl::ZeroDuration()) contenders.clear();
    rows->set_refined(static_cast<int32_t>(contenders.size()));
    if (contenders.empty()) return {};
    absl::StatusOr<std::vector<RecommendAnswer::Part>> parts =
        PlaceRecommendCandidates(*round, contenders, share, /*refine=*/true, settings, rows);
    return parts.ok() ? *std::move(parts) : std::vector<RecommendAnswer::Part>{};
  };
  if (request.submit_only()) refine = nullptr;
  if (first->empty()) {
    // Every first answer is at hand (the cache): the second round starts here.
    std::vector<RecommendAnswer::Part> second =
        refine != nullptr ? refine(response, absl::ZeroDuration()) : std::vector<RecommendAnswer::Part>{};
    if (second.empty()) {
      FinishRecommendation(settings, started, observer_, response);
      return nullptr;
    }
    return std::make_shared<RecommendAnswer>(std::move(second), nullptr, std::move(settings), response,
                                             started, observer_);
  }
  return std::make_shared<RecommendAnswer>(*std::move(first), std::move(refine), std::move(settings),
                                           response, started, observer_);
}

v1::ListAlgorithmsResponse PlacementCore::ListAlgorithms() const {
  v1::ListAlgorithmsResponse response;
  for (const engine::Partitioner* algorithm : algorithms_->All()) {
    v1::AlgorithmInfo* info = response.add_algorithms();
    info->set_name(std::string(algorithm->name()));
    info->set_description(std::string(algorithm->description()));
    info->set_version(std::string(algorithm->version()));
  }
  return response;
}

}  // namespace placement::core
