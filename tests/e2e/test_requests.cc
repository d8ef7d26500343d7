#include "tests/e2e/test_requests.h"

#include <atomic>

#include "absl/time/clock.h"
#include "tests/testutil/random_graph.h"

namespace placement::e2e {

v1::PlaceRequest RandomRequest(int32_t ops, uint64_t seed, const std::string& algorithm,
                               int32_t devices, double avg_out_degree) {
  testutil::RandomGraphOptions options;
  options.num_ops = ops;
  options.avg_out_degree = avg_out_degree;
  options.num_devices = devices;
  options.seed = seed;
  options.algorithm = algorithm;
  return testutil::RandomLayeredRequest(options);
}

void SetTimeLimit(absl::Duration limit, v1::PlaceRequest* request) {
  const int64_t nanos = absl::ToInt64Nanoseconds(limit);
  request->mutable_options()->mutable_time_limit()->set_seconds(nanos / 1'000'000'000);
  request->mutable_options()->mutable_time_limit()->set_nanos(
      static_cast<int32_t>(nanos % 1'000'000'000));
}

v1::PlaceRequest SlowRequest(uint64_t seed, absl::Duration limit) {
  v1::PlaceRequest request = RandomRequest(50, 7, "testing_wait");
  request.mutable_options()->set_seed(seed);
  SetTimeLimit(limit, &request);
  return request;
}

uint64_t FreshSeed() {
  static std::atomic<uint64_t> next{static_cast<uint64_t>(absl::ToUnixNanos(absl::Now()))};
  return next++;
}

}  // namespace placement::e2e
