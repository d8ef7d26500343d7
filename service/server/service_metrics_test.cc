#include "service/server/service_metrics.h"

#include <regex>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace placement::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(ServiceMetricsTest, CountsRequestsByMethodAndCode) {
  ServiceMetrics metrics;
  metrics.RecordRequest(Method::kPlace, absl::StatusCode::kOk, absl::Milliseconds(2));
  metrics.RecordRequest(Method::kPlace, absl::StatusCode::kOk, absl::Milliseconds(3));
  metrics.RecordRequest(Method::kPlace, absl::StatusCode::kInvalidArgument, absl::Milliseconds(1));
  const std::string text = metrics.Serialize();
  EXPECT_THAT(text, HasSubstr("placement_requests_total{code=\"OK\",method=\"Place\"} 2"));
  EXPECT_THAT(text,
              HasSubstr("placement_requests_total{code=\"INVALID_ARGUMENT\",method=\"Place\"} 1"));
  EXPECT_THAT(text, HasSubstr("placement_request_duration_seconds_count{method=\"Place\"} 3"));
}

TEST(ServiceMetricsTest, CountsCacheLookupsAndOnlySolvesThatRan) {
  ServiceMetrics metrics;
  metrics.RecordCacheLookup(v1::HIT);
  metrics.RecordCacheLookup(v1::HIT);
  metrics.RecordCacheLookup(v1::COALESCED);
  FakeClock clock;
  jobs::Job job(1, "d", "", "pardnn", 0, clock.Now(), nullptr, &clock, absl::Milliseconds(100));
  jobs::JobResult ran;
  ran.ran = true;
  ran.solve_time = absl::Milliseconds(40);
  metrics.OnJobFinished(job, ran);
  metrics.OnJobFinished(job, jobs::JobResult{});  // never ran (cancelled while queued)
  metrics.OnAdmissionRejected("queue_full");
  const std::string text = metrics.Serialize();
  EXPECT_THAT(text, HasSubstr("placement_cache_lookups_total{result=\"hit\"} 2"));
  EXPECT_THAT(text, HasSubstr("placement_cache_lookups_total{result=\"coalesced\"} 1"));
  EXPECT_THAT(text, HasSubstr("placement_cache_lookups_total{result=\"miss\"} 0"));
  EXPECT_THAT(text, HasSubstr("placement_solves_total{algorithm=\"pardnn\"} 1"));
  EXPECT_THAT(text, HasSubstr("placement_solve_duration_seconds_count{algorithm=\"pardnn\"} 1"));
  EXPECT_THAT(text, HasSubstr("placement_admission_rejections_total{reason=\"queue_full\"} 1"));
}

TEST(ServiceMetricsTest, GaugesAreReadFromTheirSourcesAtScrapeTime) {
  ServiceMetrics metrics;
  int64_t queued = 3;
  metrics.SetSources({.jobs =
                          [&queued] {
                            jobs::JobManagerStats stats;
                            stats.workers = 2;
                            stats.queued = queued;
                            stats.running = 1;
                            return stats;
                          },
                      .cache =
                          [] {
                            cache::CacheStats stats;
                            stats.bytes = 12345;
                            stats.max_bytes = 1 << 20;
                            return stats;
                          },
                      .operations =
                          [] {
                            return jobs::OperationRegistry::Counts{.pending = 7, .done = 2};
                          },
                      .queue_capacity = 64});
  std::string text = metrics.Serialize();
  EXPECT_THAT(text, HasSubstr("placement_queue_depth 3"));
  EXPECT_THAT(text, HasSubstr("placement_jobs_running 1"));
  EXPECT_THAT(text, HasSubstr("placement_cache_bytes 12345"));
  EXPECT_THAT(text, HasSubstr("placement_operations{state=\"pending\"} 7"));
  EXPECT_THAT(text, HasSubstr("placement_operations{state=\"done\"} 2"));
  EXPECT_THAT(text, HasSubstr("placement_queue_capacity 64"));
  queued = 0;
  EXPECT_THAT(metrics.Serialize(), HasSubstr("placement_queue_depth 0"));
}

TEST(ServiceMetricsTest, SharedTierFamiliesOnlyWithRedis) {
  ServiceMetrics metrics;
  metrics.SetSources({.cache = [] { return cache::CacheStats{}; }});
  EXPECT_THAT(metrics.Serialize(), Not(HasSubstr("placement_redis")));
  EXPECT_THAT(metrics.Serialize(), Not(HasSubstr("placement_cache_tier_lookups_total")));

  ServiceMetrics::Sources sources{.cache = [] { return cache::CacheStats{}; }};
  sources.cache_tiers = [] {
    return cache::TierStats{.local_hits = 5, .local_misses = 4, .shared_hits = 3, .shared_misses = 1};
  };
  sources.redis = [] {
    cache::RedisCacheStats stats;
    stats.hits = 3;
    stats.lookup_errors = 2;
    stats.lookups_skipped = 6;
    stats.connect_errors = 1;
    stats.get_errors = 1;
    stats.writes_stored = 9;
    stats.connections_open = 2;
    return stats;
  };
  metrics.SetSources(sources);
  const std::string text = metrics.Serialize();
  EXPECT_THAT(text, HasSubstr("placement_cache_tier_lookups_total{result=\"hit\",tier=\"local\"} 5"));
  EXPECT_THAT(text, HasSubstr("placement_cache_tier_lookups_total{result=\"hit\",tier=\"redis\"} 3"));
  EXPECT_THAT(text, HasSubstr("placement_cache_tier_lookups_total{result=\"miss\",tier=\"redis\"} 1"));
  EXPECT_THAT(text, HasSubstr("placement_redis_lookups_total{result=\"error\"} 2"));
  EXPECT_THAT(text, HasSubstr("placement_redis_lookups_total{result=\"skipped\"} 6"));
  EXPECT_THAT(text, HasSubstr("placement_redis_errors_total{op=\"connect\"} 1"));
  EXPECT_THAT(text, HasSubstr("placement_redis_errors_total{op=\"get\"} 1"));
  EXPECT_THAT(text, HasSubstr("placement_redis_writes_total{result=\"stored\"} 9"));
  EXPECT_THAT(text, HasSubstr("placement_redis_connections 2"));
}

TEST(ServiceMetricsTest, SharedOperationsAreExportedWithTheirAnnouncedNames) {
  ServiceMetrics metrics;
  ServiceMetrics::Sources sources;
  sources.shared_operations = [] {
    shared_ops::CoordinatorStats stats;
    stats.taken_over = 2;
    stats.remote_cancels = 3;
    stats.lease_renewals_failed = 4;
    stats.leases_lost = 5;
    stats.fallbacks["submit"] = 6;
    stats.round_trips = 7;
    return stats;
  };
  metrics.SetSources(sources);
  const std::string text = metrics.Serialize();
  EXPECT_THAT(text, HasSubstr("placement_operations_taken_over_total 2"));
  EXPECT_THAT(text, HasSubstr("placement_operation_remote_cancels_total 3"));
  EXPECT_THAT(text, HasSubstr("placement_operation_lease_renewals_failed_total 4"));
  EXPECT_THAT(text, HasSubstr("placement_operation_leases_lost_total 5"));
  EXPECT_THAT(text, HasSubstr("placement_shared_operations_fallback_total{reason=\"submit\"} 6"));
  EXPECT_THAT(text, HasSubstr("placement_shared_operations_fallback_total{reason=\"record\"} 0"));
  EXPECT_THAT(text, HasSubstr("placement_shared_operations_redis_round_trips_total 7"));
}

TEST(ServiceMetricsTest, NamesFollowThePrometheusRules) {
  ServiceMetrics metrics;
  ServiceMetrics::Sources sources{.jobs = [] { return jobs::JobManagerStats{}; },
                                  .cache = [] { return cache::CacheStats{}; },
                                  .operations = [] { return jobs::OperationRegistry::Counts{}; }};
  sources.cache_tiers = [] { return cache::TierStats{}; };
  sources.redis = [] { return cache::RedisCacheStats{}; };
  sources.shared_operations = [] { return shared_ops::CoordinatorStats{}; };
  metrics.SetSources(sources);
  const std::regex name("[a-z_][a-z0-9_]*");
  for (absl::string_view line : absl::StrSplit(metrics.Serialize(), '\n')) {
    if (!absl::StartsWith(line, "# TYPE ")) continue;
    std::vector<std::string> parts = absl::StrSplit(line, ' ');
    ASSERT_EQ(parts.size(), 4u) << line;
    const std::string& family = parts[2];
    const std::string& type = parts[3];
    EXPECT_TRUE(std::regex_match(family, name)) << family;
    EXPECT_TRUE(absl::StartsWith(family, "placement_") || absl::StartsWith(family, "process_"))
        << family;
    EXPECT_EQ(type == "counter", absl::EndsWith(family, "_total")) << family;
    EXPECT_EQ(family.find("_ms"), std::string::npos) << family;
  }
}

}  // namespace
}  // namespace placement::server
