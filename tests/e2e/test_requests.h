// test_requests.h — the requests end-to-end tests send: small seeded random layered graphs
// (tests/testutil), requests that hold a worker, and seeds no earlier run can have cached.
//
// Example:
//   PlacementClient client(...);
//   client.Place(RandomRequest(40, FreshSeed(), "round_robin"));
//   client.Submit(SlowRequest(FreshSeed(), absl::Minutes(5)));  // needs --testing_algorithms
#ifndef PLACEMENT_TESTS_E2E_TEST_REQUESTS_H_
#define PLACEMENT_TESTS_E2E_TEST_REQUESTS_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "placement/v1/placement.pb.h"

namespace placement::e2e {

// A random layered DAG of `ops` ops on `devices` devices, placed with `algorithm`.
v1::PlaceRequest RandomRequest(int32_t ops, uint64_t seed, const std::string& algorithm,
                               int32_t devices = 4, double avg_out_degree = 2.5);

// Sets options.time_limit to `limit` (to the nanosecond).
void SetTimeLimit(absl::Duration limit, v1::PlaceRequest* request);

// A request that holds a worker for `limit` or until cancelled (the `testing_wait` algorithm, so the
// server needs --testing_algorithms); `seed` makes its digest unique.
v1::PlaceRequest SlowRequest(uint64_t seed, absl::Duration limit);

// Seeds that count up from the current time in nanoseconds: distinct within a run and from every
// earlier run's, so a request made with one is never a cache hit, not even in a shared Redis.
uint64_t FreshSeed();

}  // namespace placement::e2e

#endif  // PLACEMENT_TESTS_E2E_TEST_REQUESTS_H_
