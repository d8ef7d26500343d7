// What a cache hit costs inside the server, without gRPC: Prepare (validation, compact model, request
// digest), the lookup, and mapping the cached placement to the caller's op order — next to parsing and
// serializing the same messages, which every RPC pays (the echo baseline of cache_hit_benchmark.cc).
#include <memory>
#include <string>

#include "absl/synchronization/notification.h"
#include "benchmark/benchmark.h"
#include "service/cache/lru_cache.h"
#include "service/core/placement_core.h"
#include "tests/testutil/random_graph.h"

namespace placement::core {
namespace {

v1::PlaceRequest Request(int ops) {
  testutil::RandomGraphOptions options;
  options.num_ops = ops;
  options.avg_out_degree = 2.5;
  options.num_devices = 8;
  options.num_nodes = 2;
  options.algorithm = "round_robin";
  options.seed = 42;
  return testutil::RandomLayeredRequest(options);
}

struct Fixture {
  AlgorithmCatalog catalog;
  cache::LruResultCache cache{{.max_bytes = 256 << 20}};
  jobs::JobManager jobs{{.workers = 1}};
  jobs::OperationRegistry operations{{}, &jobs};
  PlacementCore core{PlacementCoreOptions(), &catalog, &cache, &jobs, &operations, nullptr};

  // Places `request` once through the real path and waits for its job, so that the cache holds the
  // result the timed loop then hits.
  std::shared_ptr<const PreparedRequest> PlaceOnce(const v1::PlaceRequest& request) {
    std::shared_ptr<const PreparedRequest> prepared = core.Prepare(request).value();
    auto start = core.StartPlace(prepared, absl::InfiniteFuture(), "").value();
    auto done = std::make_shared<absl::Notification>();  // a listener may outlive this call
    if (start.admission.job->AddListener([done](const jobs::Job& job) {
          if (job.done() && !done->HasBeenNotified()) done->Notify();
        }) != 0) {
      done->WaitForNotification();
    }
    core.Release(start.admission.job);
    return prepared;
  }
};

void BM_CacheHitInCore(benchmark::State& state) {
  Fixture fixture;
  const v1::PlaceRequest request = Request(static_cast<int>(state.range(0)));
  fixture.PlaceOnce(request);
  for (auto _ : state) {
    auto prepared = fixture.core.Prepare(request).value();
    auto start = fixture.core.StartPlace(prepared, absl::InfiniteFuture(), "").value();
    v1::PlaceResponse response;
    fixture.core.FillPlaceResponse(*prepared, *start.hit, v1::HIT, absl::ZeroDuration(),
                                   &response);
    benchmark::DoNotOptimize(response);
  }
}
BENCHMARK(BM_CacheHitInCore)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);

// A byte-identical repeat: fingerprint, lookups, mapping (what PlaceReactor does first).
void BM_RepeatHitInCore(benchmark::State& state) {
  Fixture fixture;
  const v1::PlaceRequest request = Request(static_cast<int>(state.range(0)));
  fixture.core.RememberFingerprint(RequestFingerprints::Of(request), *fixture.PlaceOnce(request));
  std::string fingerprint;
  std::string digest;
  for (auto _ : state) {
    v1::PlaceResponse response;
    if (!fixture.core.TryRepeatHit(request, &fingerprint, &digest, &response)) std::abort();
    benchmark::DoNotOptimize(response);
  }
}
BENCHMARK(BM_RepeatHitInCore)->Arg(10000)->Unit(benchmark::kMicrosecond);

void BM_PrepareOnly(benchmark::State& state) {
  Fixture fixture;
  const v1::PlaceRequest request = Request(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(fixture.core.Prepare(request));
}
BENCHMARK(BM_PrepareOnly)->Arg(10000)->Unit(benchmark::kMicrosecond);

// What gRPC does for any Place call carrying this request: parse it, serialize a response.
void BM_ParseRequestSerializeResponse(benchmark::State& state) {
  const v1::PlaceRequest request = Request(static_cast<int>(state.range(0)));
  const std::string bytes = request.SerializeAsString();
  v1::PlaceResponse response;
  response.mutable_placement()->mutable_device()->Resize(request.graph().ops_size(), 1);
  for (auto _ : state) {
    v1::PlaceRequest parsed;
    benchmark::DoNotOptimize(parsed.ParseFromString(bytes));
    benchmark::DoNotOptimize(response.SerializeAsString());
  }
  state.counters["request_bytes"] = static_cast<double>(bytes.size());
}
BENCHMARK(BM_ParseRequestSerializeResponse)->Arg(10000)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace placement::core
