// core_observer.h — what PlacementCore reports about its cache lookups, as an interface, so that the
// core needs no metrics library (and no gRPC).
//
// service/server's ServiceMetrics implements it with the Prometheus counters
// placement_cache_lookups_total{result} and placement_cache_rejected_total{reason}; a core built
// without one (tests, benchmarks) passes null.
//
// Example:
//   class CountingObserver : public core::CoreObserver {
//     void RecordCacheLookup(v1::CacheResult result) override { ++lookups[result]; }
//     void RecordCacheRejected(absl::string_view reason) override { ++rejected; }
//   };
#ifndef PLACEMENT_SERVICE_CORE_CORE_OBSERVER_H_
#define PLACEMENT_SERVICE_CORE_CORE_OBSERVER_H_

#include <cstdint>

#include "absl/strings/string_view.h"
#include "placement/v1/placement.pb.h"

namespace placement::core {

// Called from gRPC's and the workers' threads at once: implementations must be thread-safe.
class CoreObserver {
 public:
  virtual ~CoreObserver() = default;
  // result: HIT, MISS or COALESCED.
  virtual void RecordCacheLookup(v1::CacheResult result) = 0;
  // A cached value that did not fit the request it was found for (a miss); reason is one of a fixed
  // few ("ops", "device", "digest", "time_limited").
  virtual void RecordCacheRejected(absl::string_view reason) = 0;
  // A Recommend call answered: its candidates and how many of them came from the cache.
  virtual void RecordRecommendation(int32_t candidates, int32_t cache_hits, int32_t refined) {}
};

}  // namespace placement::core

#endif  // PLACEMENT_SERVICE_CORE_CORE_OBSERVER_H_
