// testing_algorithms.h — algorithms that exist for end-to-end tests only, registered when asked for
// (AlgorithmRegistryOptions::include_testing_algorithms; placement_server --testing_algorithms).
//
//   testing_wait     holds a worker deterministically: reports progress ("waiting") until cancelled or
//                    out of time, then places op v on device v mod D (time_limited unless cancelled).
//   testing_throw    throws a C++ exception from the worker: the job fails with INTERNAL, the server
//                    lives on.
//   testing_overrun  ignores its time limit until cancelled (or ten times its budget, at most a minute),
//                    then fails: tests see the caller's deadline end the call and the job cancelled
//                    once nobody waits for it.
//
// Example:
//   AlgorithmRegistry registry({.include_testing_algorithms = true});
//   registry.Find("testing_wait");
#ifndef PLACEMENT_SERVICE_ENGINE_SOLVE_TESTING_ALGORITHMS_H_
#define PLACEMENT_SERVICE_ENGINE_SOLVE_TESTING_ALGORITHMS_H_

#include <memory>
#include <vector>

#include "service/engine/partition/partitioner.h"

namespace placement::engine {

// testing_wait, testing_throw, testing_overrun.
std::vector<std::unique_ptr<Partitioner>> MakeTestingPartitioners();

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_SOLVE_TESTING_ALGORITHMS_H_
