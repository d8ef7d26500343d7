// What a cache hit costs inside the server, without gRPC: a byte-identical repeat (SHA-256 of the bytes,
// lookups, mapping to the caller's op order), a hit that is not one (Prepare: validation, compact model,
// request digest; then the same), next to parsing and serializing the same messages, which every RPC
// pays (the echo baseline of cache_hit_benchmark.cc).
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
  cache::LruResultCache cache{{.max_bytes = 256 << 20}};
  jobs::JobManager jobs{{.workers = 1}};
  jobs::OperationRegistry operations{{}, &jobs};
  PlacementCore core{PlacementCoreOptions(), &engine::AlgorithmRegistry::Default(), &cache, &jobs, &operations, nullptr};

  // Places `call` once through the real path and waits for its job, so that the cache (and the
  // repeat index, for a call with bytes) holds what the timed loop then hits.
  void PlaceOnce(const PlaceCall& call) {
    v1::PlaceResponse response;
    CallNotes notes;
    std::shared_ptr<PendingAnswer> pending = core.Place(call, &response, &notes).value();
    if (pending == nullptr) return;
    auto done = std::make_shared<absl::Notification>();  // the callback may outlive this call
    pending->OnDone([done] { done->Notify(); });
    done->WaitForNotification();
    if (!pending->Finish().ok()) std::abort();
  }

  // Times `call`, a hit every time.
  void TimeHits(benchmark::State& state, const PlaceCall& call) {
    for (auto _ : state) {
      v1::PlaceResponse response;
      CallNotes notes;
      if (core.Place(call, &response, &notes).value() != nullptr) std::abort();
      benchmark::DoNotOptimize(response);
    }
  }
};

// A hit of a request that is not a byte-identical repeat: decoded, validated, modelled and digested,
// then looked up and mapped to the caller's op order.
void BM_CacheHitInCore(benchmark::State& state) {
  Fixture fixture;
  const v1::PlaceRequest request = Request(static_cast<int>(state.range(0)));
  const PlaceCall call = PlaceCall::Of(request);
  fixture.PlaceOnce(call);
  fixture.TimeHits(state, call);
}
BENCHMARK(BM_CacheHitInCore)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);

// A byte-identical repeat, as the server receives it: SHA-256 of the bytes, two lookups, mapping to
// the caller's op order — nothing decoded.
void BM_RepeatHitInCore(benchmark::State& state) {
  Fixture fixture;
  const v1::PlaceRequest request = Request(static_cast<int>(state.range(0)));
  const std::string bytes = request.SerializeAsString();
  PlaceCall call = PlaceCall::Of(request);
  call.wire = {bytes};
  fixture.PlaceOnce(call);
  fixture.TimeHits(state, call);
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
