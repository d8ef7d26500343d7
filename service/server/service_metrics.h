// service_metrics.h — every Prometheus metric of the placement service, defined in one place.
//
// Counters and histograms are updated as requests and jobs finish; gauges (queue depth, running jobs,
// cache bytes, process RSS, ...) are read from their sources at scrape time by a collector, so nothing
// has to remember to update them. Names follow the Prometheus naming rules (prefix `placement_`, base
// units, `_total` for counters) and are checked with `promtool check metrics` in the end-to-end tests.
//
//   placement_requests_total{method,code}           counter   RPCs by method and gRPC status code
//   placement_request_duration_seconds{method}      histogram RPC latency (handler start → reply)
//   placement_cache_lookups_total{result}           counter   hit | miss | coalesced
//   placement_solves_total{algorithm}               counter   computations that ran on a worker
//   placement_solve_duration_seconds{algorithm}     histogram their run time
//   placement_queue_wait_seconds                    histogram time jobs waited for a worker
//   placement_admission_rejections_total{reason}    counter   queue_full | memory | draining | deadline
//                                                             | tenant_queued
//   placement_auth_failures_total{reason}           counter   UNAUTHENTICATED calls: missing | invalid
//   placement_tenant_rejections_total{tenant,reason} counter  RESOURCE_EXHAUSTED for a tenant's own
//                                                             limit: rate | queued (tenants come from
//                                                             the tokens file, so labels are bounded)
//   placement_queue_depth, placement_jobs_running   gauge     jobs waiting / running
//   placement_workers, placement_queue_capacity     gauge     configuration
//   placement_job_memory_bytes                      gauge     estimated memory of admitted jobs
//   placement_cache_bytes, placement_cache_max_bytes, placement_cache_entries       gauge
//   placement_cache_evictions_total                 counter
//   placement_cache_rejected_total{reason}          counter   cached values that did not match the
//                                                             request (ops | device | digest |
//                                                             time_limited): treated as misses
//   placement_decoding_rejections_total             counter   calls refused: --max_decoding_bytes full
//   placement_recommend_candidates                  histogram candidates per Recommend call answered
//   placement_recommend_candidate_cache_hits_total  counter   of those, answered from the cache
//   placement_recommend_refined_total               counter   of those, contenders solved a second time
//                                                             (the call's time: placement_request_
//                                                             duration_seconds{method="Recommend"})
//   with --redis (the shared tier):
//   placement_cache_tier_lookups_total{result,tier} counter   hit|miss × local|redis
//   placement_redis_lookups_total{result}           counter   hit | miss | error | skipped (backing off)
//   placement_redis_errors_total{op}                counter   connect | get | set | decode
//   placement_redis_writes_total{result}            counter   stored | too_large | dropped
//   placement_redis_connections, placement_redis_pending_writes                    gauge
//   placement_operations                            gauge     operations kept (pending + finished)
//   with --redis (shared operations):
//   placement_operations_taken_over_total, placement_operation_remote_cancels_total,
//   placement_operation_lease_renewals_failed_total, placement_operation_leases_lost_total  counters
//   placement_shared_operations_fallback_total{reason}  counter  submit | record (stayed local)
//   placement_shared_operations_published_total      counter  of those, published once Redis answered
//   placement_shared_operations_unpublished          gauge    of those, waiting to be published
//   placement_shared_operations_redis_errors_total{kind} counter connection | oom | reply
//   placement_shared_requests_not_stored_total{reason} counter size | tenant_budget
//   placement_shared_operations_dead_entries_dropped_total  counter  entries of ended jobs dropped
//   placement_shared_operations_redis_round_trips_total      counter
//   placement_repeat_index_bytes                    gauge     index of byte-identical repeats
//   placement_build_info{version}                   gauge     always 1
//   process_resident_memory_bytes, process_cpu_seconds_total, process_open_fds
//
// Example:
//   ServiceMetrics metrics;
//   metrics.SetSources({.jobs = [&] { return jobs.Stats(); }, ...});
//   metrics.RecordRequest(Method::kPlace, absl::StatusCode::kOk, absl::Milliseconds(3));
//   exposer.RegisterCollectable(metrics.registry()); exposer.RegisterCollectable(metrics.gauges());
#ifndef PLACEMENT_SERVICE_SERVER_SERVICE_METRICS_H_
#define PLACEMENT_SERVICE_SERVER_SERVICE_METRICS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "placement/v1/placement.pb.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "service/cache/redis_result_cache.h"
#include "service/cache/result_cache.h"
#include "service/cache/tiered_result_cache.h"
#include "service/core/core_observer.h"
#include "service/jobs/job_manager.h"
#include "service/jobs/operation_registry.h"
#include "service/shared_ops/operation_coordinator.h"

namespace placement::server {

enum class Method {
  kPlace,
  kSubmitPlacement,
  kGetOperation,
  kWaitOperation,
  kCancelOperation,
  kWatchOperation,
  kEvaluate,
  kListAlgorithms,
  kRecommend,
};
inline constexpr int kNumMethods = 9;
absl::string_view MethodName(Method method);

class ServiceMetrics : public jobs::JobObserver, public core::CoreObserver {
 public:
  // Where gauges come from at scrape time (each may be empty).
  struct Sources {
    std::function<jobs::JobManagerStats()> jobs = nullptr;
    std::function<cache::CacheStats()> cache = nullptr;
    // placement_operations{state}: kept operations (mirrors of other replicas' included).
    std::function<jobs::OperationRegistry::Counts()> operations = nullptr;
    std::function<int64_t()> repeat_index_bytes = nullptr;
    int queue_capacity = 0;
    // Only with a shared (Redis) tier.
    std::function<cache::TierStats()> cache_tiers = nullptr;
    std::function<cache::RedisCacheStats()> redis = nullptr;
    // Only with shared operations (--redis).
    std::function<shared_ops::CoordinatorStats()> shared_operations = nullptr;
  };

  ServiceMetrics();
  ~ServiceMetrics() override;

  void SetSources(Sources sources);

  void RecordRequest(Method method, absl::StatusCode code, absl::Duration duration);
  // core::CoreObserver. result: HIT, MISS or COALESCED.
  void RecordCacheLookup(v1::CacheResult result) override;

  // reason: "missing" or "invalid" credentials.
  void RecordAuthFailure(absl::string_view reason);
  // A cached value that did not fit the request it was found for (a miss); reason is one of a fixed
  // few ("ops", "device", "digest", "time_limited").
  void RecordCacheRejected(absl::string_view reason) override;
  // core::CoreObserver: a Recommend call answered.
  void RecordRecommendation(int32_t candidates, int32_t cache_hits, int32_t refined) override;
  // A call refused because the requests being decoded already hold --max_decoding_bytes.
  void RecordDecodingRejected();

  // jobs::JobObserver (OnTenantRejected is also called for the rate limit, reason "rate").
  void OnAdmissionRejected(absl::string_view reason) override;
  void OnTenantRejected(absl::string_view tenant, absl::string_view reason) override;
  void OnJobFinished(const jobs::Job& job, const jobs::JobResult& result) override;

  // What to register with a prometheus::Exposer.
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }
  std::shared_ptr<prometheus::Collectable> gauges() const;

  // The Prometheus text exposition of everything (for tests and logs).
  std::string Serialize() const;

 private:
  class GaugeCollector;

  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<GaugeCollector> gauges_;
  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Family<prometheus::Histogram>* request_duration_;
  prometheus::Family<prometheus::Counter>* cache_lookups_;
  prometheus::Family<prometheus::Counter>* solves_;
  prometheus::Family<prometheus::Histogram>* solve_duration_;
  prometheus::Family<prometheus::Counter>* rejections_;
  prometheus::Family<prometheus::Counter>* auth_failures_;
  prometheus::Family<prometheus::Counter>* tenant_rejections_;
  prometheus::Family<prometheus::Counter>* cache_rejected_;
  prometheus::Counter* decoding_rejected_;
  prometheus::Histogram* recommend_candidates_;
  prometheus::Counter* recommend_candidate_hits_;
  prometheus::Counter* recommend_refined_;
  prometheus::Histogram* queue_wait_;
  prometheus::Counter* cache_hit_;
  prometheus::Counter* cache_miss_;
  prometheus::Counter* cache_coalesced_;
  std::array<prometheus::Histogram*, kNumMethods> duration_by_method_{};
  // [method][grpc code], resolved on first use.
  std::array<std::array<std::atomic<prometheus::Counter*>, 17>, kNumMethods> requests_by_code_{};
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVICE_SERVER_SERVICE_METRICS_H_
