#include "service/server/service_metrics.h"

#include <dirent.h>
#include <unistd.h>

#include <fstream>
#include <initializer_list>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/text_serializer.h"

namespace placement::server {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildHistogram;
using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// project(... VERSION) of the top-level CMakeLists.txt; the Python client's package has the same.
#ifndef PLACEMENT_VERSION
#define PLACEMENT_VERSION "0.0.0-unknown"
#endif
constexpr char kVersion[] = PLACEMENT_VERSION;

const prometheus::Histogram::BucketBoundaries& RequestBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
      1,      2.5,   5,      10,    30,   60,    120,  300, 600};
  return *buckets;
}

const prometheus::Histogram::BucketBoundaries& SolveBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600};
  return *buckets;
}

std::string CodeName(absl::StatusCode code) {
  return absl::StatusCodeToString(code);
}

MetricFamily Gauge(std::string name, std::string help, double value,
                   std::vector<ClientMetric::Label> labels = {}) {
  MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = MetricType::Gauge;
  ClientMetric metric;
  metric.label = std::move(labels);
  metric.gauge.value = value;
  family.metric.push_back(std::move(metric));
  return family;
}

MetricFamily Counter(std::string name, std::string help, double value) {
  MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = MetricType::Counter;
  ClientMetric metric;
  metric.counter.value = value;
  family.metric.push_back(std::move(metric));
  return family;
}

// One family with a sample per label set, e.g. {{"op", "get"}} → 3.
MetricFamily LabeledCounters(
    std::string name, std::string help,
    std::vector<std::pair<std::vector<ClientMetric::Label>, double>> samples) {
  MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = MetricType::Counter;
  for (auto& [labels, value] : samples) {
    ClientMetric metric;
    metric.label = std::move(labels);
    metric.counter.value = value;
    family.metric.push_back(std::move(metric));
  }
  return family;
}

// Resident set size, CPU seconds and open file descriptors of this process, from /proc.
struct ProcessStats {
  double resident_bytes = 0;
  double cpu_seconds = 0;
  double open_fds = 0;
};

ProcessStats ReadProcessStats() {
  ProcessStats stats;
  std::ifstream statm("/proc/self/statm");
  long total_pages = 0;
  long resident_pages = 0;
  if (statm >> total_pages >> resident_pages) {
    stats.resident_bytes = static_cast<double>(resident_pages) * sysconf(_SC_PAGESIZE);
  }
  std::ifstream stat_file("/proc/self/stat");
  std::string line;
  if (std::getline(stat_file, line)) {
    // Fields after the command name (which may contain spaces) start after the last ')'.
    const size_t close = line.rfind(')');
    if (close != std::string::npos) {
      std::istringstream rest(line.substr(close + 2));
      std::string field;
      // rest starts at field 3 (state); utime and stime are fields 14 and 15.
      std::vector<std::string> fields;
      while (rest >> field && fields.size() < 13) fields.push_back(field);
      if (fields.size() >= 13) {
        const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
        stats.cpu_seconds = (std::stod(fields[11]) + std::stod(fields[12])) / ticks;
      }
    }
  }
  if (DIR* dir = opendir("/proc/self/fd")) {
    int count = 0;
    while (readdir(dir) != nullptr) ++count;
    closedir(dir);
    stats.open_fds = count - 3;  // ".", ".." and the directory's own descriptor
  }
  return stats;
}

}  // namespace

absl::string_view MethodName(Method method) {
  switch (method) {
    case Method::kPlace: return "Place";
    case Method::kSubmitPlacement: return "SubmitPlacement";
    case Method::kGetOperation: return "GetOperation";
    case Method::kWaitOperation: return "WaitOperation";
    case Method::kCancelOperation: return "CancelOperation";
    case Method::kWatchOperation: return "WatchOperation";
    case Method::kEvaluate: return "Evaluate";
    case Method::kListAlgorithms: return "ListAlgorithms";
    case Method::kRecommend: return "Recommend";
  }
  return "Unknown";
}

// Gauges read from their sources at scrape time.
class ServiceMetrics::GaugeCollector : public prometheus::Collectable {
 public:
  void SetSources(Sources sources) {
    absl::MutexLock lock(&mu_);
    sources_ = std::move(sources);
  }

  std::vector<MetricFamily> Collect() const override {
    Sources sources;
    {
      absl::MutexLock lock(&mu_);
      sources = sources_;
    }
    std::vector<MetricFamily> families;
    if (sources.jobs) {
      const jobs::JobManagerStats stats = sources.jobs();
      families.push_back(Gauge("placement_queue_depth", "Jobs waiting for a worker.",
                               static_cast<double>(stats.queued)));
      families.push_back(Gauge("placement_jobs_running", "Jobs running on a worker.",
                               static_cast<double>(stats.running)));
      families.push_back(Gauge("placement_workers", "Worker threads.", stats.workers));
      families.push_back(Gauge("placement_job_memory_bytes",
                               "Estimated memory of all queued and running jobs.",
                               static_cast<double>(stats.memory_in_use_bytes)));
      families.push_back(Gauge("placement_queue_capacity",
                               "Jobs that may wait for a worker before admission says UNAVAILABLE.",
                               sources.queue_capacity));
    }
    if (sources.cache) {
      const cache::CacheStats stats = sources.cache();
      families.push_back(Gauge("placement_cache_bytes", "Accounted size of the result cache.",
                               static_cast<double>(stats.bytes)));
      families.push_back(Gauge("placement_cache_max_bytes", "Bound of the result cache.",
                               static_cast<double>(stats.max_bytes)));
      families.push_back(Gauge("placement_cache_entries", "Entries in the result cache.",
                               static_cast<double>(stats.entries)));
      families.push_back(Counter("placement_cache_evictions_total",
                                 "Entries evicted from the result cache to make room or expired.",
                                 static_cast<double>(stats.evictions)));
    }
    if (sources.cache_tiers) {
      const cache::TierStats tiers = sources.cache_tiers();
      auto d = [](int64_t v) { return static_cast<double>(v); };
      families.push_back(LabeledCounters(
          "placement_cache_tier_lookups_total",
          "Result cache lookups by result and tier (local = in-process, redis = shared).",
          {{{{"result", "hit"}, {"tier", "local"}}, d(tiers.local_hits)},
           {{{"result", "miss"}, {"tier", "local"}}, d(tiers.local_misses)},
           {{{"result", "hit"}, {"tier", "redis"}}, d(tiers.shared_hits)},
           {{{"result", "miss"}, {"tier", "redis"}}, d(tiers.shared_misses)}}));
    }
    if (sources.redis) {
      const cache::RedisCacheStats redis = sources.redis();
      auto d = [](int64_t v) { return static_cast<double>(v); };
      families.push_back(LabeledCounters(
          "placement_redis_lookups_total",
          "Shared-tier lookups: hit, miss, error (failed; served as a miss) or skipped (not tried "
          "while backing off after a failure).",
          {{{{"result", "hit"}}, d(redis.hits)},
           {{{"result", "miss"}}, d(redis.misses)},
           {{{"result", "error"}}, d(redis.lookup_errors)},
           {{{"result", "skipped"}}, d(redis.lookups_skipped)}}));
      families.push_back(LabeledCounters(
          "placement_redis_errors_total", "Failed Redis operations, by operation.",
          {{{{"op", "connect"}}, d(redis.connect_errors)},
           {{{"op", "get"}}, d(redis.get_errors)},
           {{{"op", "set"}}, d(redis.set_errors)},
           {{{"op", "decode"}}, d(redis.decode_errors)}}));
      families.push_back(LabeledCounters(
          "placement_redis_writes_total",
          "Shared-tier writes: stored, too_large (over --redis_max_value_bytes) or dropped "
          "(queue full, backing off, or failed).",
          {{{{"result", "stored"}}, d(redis.writes_stored)},
           {{{"result", "too_large"}}, d(redis.writes_too_large)},
           {{{"result", "dropped"}}, d(redis.writes_dropped)}}));
      families.push_back(Gauge("placement_redis_connections", "Open connections to Redis.",
                               d(redis.connections_open)));
      families.push_back(Gauge("placement_redis_pending_writes",
                               "Writes queued for the shared tier.", d(redis.pending_writes)));
    }
    if (sources.operations) {
      const jobs::OperationRegistry::Counts counts = sources.operations();
      MetricFamily operations =
          Gauge("placement_operations",
                "Long-running operations kept by this replica (pending and finished, not expired; "
                "with --redis also those of other replicas it follows), by state.",
                static_cast<double>(counts.pending), {{"state", "pending"}});
      ClientMetric done;
      done.label = {{"state", "done"}};
      done.gauge.value = static_cast<double>(counts.done);
      operations.metric.push_back(std::move(done));
      families.push_back(std::move(operations));
    }
    if (sources.shared_operations) {
      const shared_ops::CoordinatorStats shared = sources.shared_operations();
      auto d = [](int64_t v) { return static_cast<double>(v); };
      families.push_back(Counter("placement_operations_taken_over_total",
                                 "Jobs this replica took over after their replica's lease expired.",
                                 d(shared.taken_over)));
      families.push_back(Counter(
          "placement_operation_remote_cancels_total",
          "Jobs this replica runs that it stopped holding because every operation waiting for them "
          "was cancelled (on any replica; read from Redis).",
          d(shared.remote_cancels)));
      families.push_back(Counter("placement_operation_lease_renewals_failed_total",
                                 "Lease renewals that failed (Redis unreachable or slow); the jobs "
                                 "go on.",
                                 d(shared.lease_renewals_failed)));
      families.push_back(Counter("placement_operation_leases_lost_total",
                                 "Jobs another replica took over from this one (its lease ran out "
                                 "while it was alive).",
                                 d(shared.leases_lost)));
      // One series per value, zero for those that never happened (a stable set of series).
      auto by_label = [&](const char* label, std::initializer_list<const char*> values,
                          const std::map<std::string, int64_t>& counts) {
        std::vector<std::pair<std::vector<ClientMetric::Label>, double>> series;
        for (const char* value : values) {
          auto it = counts.find(value);
          series.push_back({{{label, value}}, it == counts.end() ? 0 : d(it->second)});
        }
        return series;
      };
      families.push_back(LabeledCounters(
          "placement_shared_operations_fallback_total",
          "Operations that stayed local to this replica because Redis failed (published once it "
          "answers): submit (a new operation), record (a cache hit not recorded for the other "
          "replicas).",
          by_label("reason", {"submit", "record"}, shared.fallbacks)));
      families.push_back(Counter("placement_shared_operations_redis_round_trips_total",
                                 "Round trips to Redis for shared operations (tried, successful "
                                 "or not).",
                                 d(shared.round_trips)));
      families.push_back(LabeledCounters(
          "placement_shared_operations_redis_errors_total",
          "Failed round trips of shared operations by kind: connection (Redis did not answer), oom "
          "(out of memory: maxmemory with noeviction refuses writes), reply (another error reply).",
          by_label("kind", {"connection", "oom", "reply"}, shared.redis_errors)));
      families.push_back(LabeledCounters(
          "placement_shared_requests_not_stored_total",
          "Shared operations whose request was not stored in Redis (no takeover possible): size "
          "(over --operation_max_request_bytes), tenant_budget (the tenant's "
          "--operation_tenant_request_bytes in use).",
          by_label("reason", {"size", "tenant_budget"}, shared.requests_not_stored)));
      families.push_back(Counter("placement_shared_operations_published_total",
                                 "Operations made while Redis did not answer, published to it "
                                 "once it did.",
                                 d(shared.published)));
      families.push_back(Gauge("placement_shared_operations_unpublished",
                               "Operations made while Redis did not answer that wait to be "
                               "published.",
                               d(shared.unpublished)));
      families.push_back(Counter("placement_shared_operations_dead_entries_dropped_total",
                                 "Stream entries of ended, cancelled or unknown jobs dropped by "
                                 "this replica's claims.",
                                 d(shared.dead_entries_dropped)));
    }
    if (sources.repeat_index_bytes) {
      families.push_back(Gauge("placement_repeat_index_bytes",
                               "Bytes held by the index of byte-identical repeat requests.",
                               static_cast<double>(sources.repeat_index_bytes())));
    }
    families.push_back(Gauge("placement_build_info", "Build information; always 1.", 1.0,
                             {{"version", kVersion}}));
    const ProcessStats process = ReadProcessStats();
    families.push_back(Gauge("process_resident_memory_bytes", "Resident memory size in bytes.",
                             process.resident_bytes));
    families.push_back(Counter("process_cpu_seconds_total",
                               "Total user and system CPU time spent in seconds.",
                               process.cpu_seconds));
    families.push_back(Gauge("process_open_fds", "Number of open file descriptors.",
                             process.open_fds));
    return families;
  }

 private:
  mutable absl::Mutex mu_;
  Sources sources_ ABSL_GUARDED_BY(mu_);
};

ServiceMetrics::ServiceMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      gauges_(std::make_shared<GaugeCollector>()) {
  requests_ = &BuildCounter()
                   .Name("placement_requests_total")
                   .Help("RPCs handled, by method and gRPC status code.")
                   .Register(*registry_);
  request_duration_ = &BuildHistogram()
                           .Name("placement_request_duration_seconds")
                           .Help("Time from the start of an RPC's handler to its reply.")
                           .Register(*registry_);
  cache_lookups_ = &BuildCounter()
                        .Name("placement_cache_lookups_total")
                        .Help("Placement requests by cache result: hit, miss or coalesced.")
                        .Register(*registry_);
  solves_ = &BuildCounter()
                 .Name("placement_solves_total")
                 .Help("Placement computations that ran on a worker, by algorithm.")
                 .Register(*registry_);
  solve_duration_ = &BuildHistogram()
                         .Name("placement_solve_duration_seconds")
                         .Help("Run time of placement computations, by algorithm.")
                         .Register(*registry_);
  rejections_ = &BuildCounter()
                     .Name("placement_admission_rejections_total")
                     .Help("Jobs refused by admission control, by reason.")
                     .Register(*registry_);
  auth_failures_ = &BuildCounter()
                        .Name("placement_auth_failures_total")
                        .Help("Calls refused as UNAUTHENTICATED, by reason: missing or invalid "
                              "credentials.")
                        .Register(*registry_);
  tenant_rejections_ = &BuildCounter()
                            .Name("placement_tenant_rejections_total")
                            .Help("Calls refused with RESOURCE_EXHAUSTED for a tenant's own limit, "
                                  "by tenant and reason: rate or queued.")
                            .Register(*registry_);
  cache_rejected_ = &BuildCounter()
                         .Name("placement_cache_rejected_total")
                         .Help("Cached results that did not match the request they were found for "
                               "(op count, device range, digest, or a time limit shorter than the "
                               "caller's), treated as misses and overwritten, by reason.")
                         .Register(*registry_);
  decoding_rejected_ = &BuildCounter()
                            .Name("placement_decoding_rejections_total")
                            .Help("Calls refused with UNAVAILABLE because the requests being "
                                  "decoded at once already held --max_decoding_bytes.")
                            .Register(*registry_)
                            .Add({});
  recommend_candidates_ = &BuildHistogram()
                               .Name("placement_recommend_candidates")
                               .Help("Candidates (device counts and data-parallel splits) per "
                                     "Recommend call answered.")
                               .Register(*registry_)
                               .Add({}, prometheus::Histogram::BucketBoundaries{1, 2, 4, 8, 16, 32, 64});
  recommend_candidate_hits_ = &BuildCounter()
                                   .Name("placement_recommend_candidate_cache_hits_total")
                                   .Help("Candidates of answered Recommend calls that came from the "
                                         "cache.")
                                   .Register(*registry_)
                                   .Add({});
  recommend_refined_ = &BuildCounter()
                            .Name("placement_recommend_refined_total")
                            .Help("Candidates of answered Recommend calls solved a second time with "
                                  "a longer share: contenders for the recommendation that the "
                                  "first share cut short.")
                            .Register(*registry_)
                            .Add({});
  queue_wait_ = &BuildHistogram()
                     .Name("placement_queue_wait_seconds")
                     .Help("Time jobs waited for a worker.")
                     .Register(*registry_)
                     .Add({}, SolveBuckets());
  cache_hit_ = &cache_lookups_->Add({{"result", "hit"}});
  cache_miss_ = &cache_lookups_->Add({{"result", "miss"}});
  cache_coalesced_ = &cache_lookups_->Add({{"result", "coalesced"}});
  for (int m = 0; m < kNumMethods; ++m) {
    duration_by_method_[m] = &request_duration_->Add(
        {{"method", std::string(MethodName(static_cast<Method>(m)))}}, RequestBuckets());
    for (auto& counter : requests_by_code_[m]) counter.store(nullptr);
  }
}

ServiceMetrics::~ServiceMetrics() = default;

std::shared_ptr<prometheus::Collectable> ServiceMetrics::gauges() const { return gauges_; }

void ServiceMetrics::SetSources(Sources sources) { gauges_->SetSources(std::move(sources)); }

void ServiceMetrics::RecordRequest(Method method, absl::StatusCode code, absl::Duration duration) {
  const int m = static_cast<int>(method);
  int c = static_cast<int>(code);
  if (c < 0 || c >= 17) c = static_cast<int>(absl::StatusCode::kUnknown);
  prometheus::Counter* counter = requests_by_code_[m][c].load(std::memory_order_acquire);
  if (counter == nullptr) {
    // Family::Add returns the same counter for the same labels, so a race here is harmless.
    counter = &requests_->Add({{"method", std::string(MethodName(method))},
                               {"code", CodeName(static_cast<absl::StatusCode>(c))}});
    requests_by_code_[m][c].store(counter, std::memory_order_release);
  }
  counter->Increment();
  duration_by_method_[m]->Observe(absl::ToDoubleSeconds(duration));
}

void ServiceMetrics::RecordCacheLookup(v1::CacheResult result) {
  switch (result) {
    case v1::HIT: cache_hit_->Increment(); break;
    case v1::MISS: cache_miss_->Increment(); break;
    case v1::COALESCED: cache_coalesced_->Increment(); break;
    default: break;
  }
}

void ServiceMetrics::OnAdmissionRejected(absl::string_view reason) {
  rejections_->Add({{"reason", std::string(reason)}}).Increment();
}

void ServiceMetrics::RecordAuthFailure(absl::string_view reason) {
  auth_failures_->Add({{"reason", std::string(reason)}}).Increment();
}

void ServiceMetrics::RecordCacheRejected(absl::string_view reason) {
  cache_rejected_->Add({{"reason", std::string(reason)}}).Increment();
}

void ServiceMetrics::RecordDecodingRejected() { decoding_rejected_->Increment(); }

void ServiceMetrics::RecordRecommendation(int32_t candidates, int32_t cache_hits, int32_t refined) {
  recommend_candidates_->Observe(candidates);
  recommend_candidate_hits_->Increment(cache_hits);
  recommend_refined_->Increment(refined);
}

void ServiceMetrics::OnTenantRejected(absl::string_view tenant, absl::string_view reason) {
  // Tenants are authenticated names from the tokens file (or "" without authentication): bounded.
  tenant_rejections_->Add({{"tenant", std::string(tenant)}, {"reason", std::string(reason)}})
      .Increment();
}

void ServiceMetrics::OnJobFinished(const jobs::Job& job, const jobs::JobResult& result) {
  if (!result.ran) return;
  const std::string algorithm = job.algorithm().empty() ? "unknown" : job.algorithm();
  solves_->Add({{"algorithm", algorithm}}).Increment();
  solve_duration_->Add({{"algorithm", algorithm}}, SolveBuckets())
      .Observe(absl::ToDoubleSeconds(result.solve_time));
  queue_wait_->Observe(absl::ToDoubleSeconds(result.queue_time));
}

std::string ServiceMetrics::Serialize() const {
  std::vector<MetricFamily> families = registry_->Collect();
  std::vector<MetricFamily> gauges = gauges_->Collect();
  families.insert(families.end(), gauges.begin(), gauges.end());
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace placement::server
