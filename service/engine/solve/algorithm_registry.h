// algorithm_registry.h — the algorithms by api.md name: the one place a name is resolved (the service,
// placement_offline and the bench tools all ask here) and the one place "unknown algorithm" is said.
//
// The engine's own algorithms are always there, in a fixed order: pardnn first, the baselines, and
// `auto` (the default: the portfolio of all of them) last. Options add more: the testing algorithms
// (testing_algorithms.h) that end-to-end tests use to hold a worker, fail or overrun.
//
// Example:
//   const AlgorithmRegistry& registry = AlgorithmRegistry::Default();
//   absl::StatusOr<const Partitioner*> algorithm = registry.Find("pardnn");
//   if (!algorithm.ok()) return algorithm.status();  // INVALID_ARGUMENT on options.algorithm
#ifndef PLACEMENT_SERVICE_ENGINE_SOLVE_ALGORITHM_REGISTRY_H_
#define PLACEMENT_SERVICE_ENGINE_SOLVE_ALGORITHM_REGISTRY_H_

#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "service/engine/partition/partitioner.h"

namespace placement::engine {

inline constexpr std::string_view kDefaultAlgorithm = "auto";

struct AlgorithmRegistryOptions {
  // Also offer testing_wait, testing_throw and testing_overrun (testing_algorithms.h), after the
  // engine's own; for end-to-end tests only (placement_server --testing_algorithms).
  bool include_testing_algorithms = false;
};

class AlgorithmRegistry {
 public:
  explicit AlgorithmRegistry(AlgorithmRegistryOptions options = {});
  ~AlgorithmRegistry();
  AlgorithmRegistry(const AlgorithmRegistry&) = delete;
  AlgorithmRegistry& operator=(const AlgorithmRegistry&) = delete;

  // The engine's own algorithms; built on first use and never destroyed (usable from any thread,
  // also during shutdown).
  static const AlgorithmRegistry& Default();

  // The algorithm called `name` ("" = `auto`, the default), or INVALID_ARGUMENT
  // "<field>: unknown algorithm "x" (known: ...)" with that violation as data (model_builder.h's
  // ViolationsError). `field` names where the name came from (a request's options, a flag).
  absl::StatusOr<const Partitioner*> Find(std::string_view name,
                                          std::string_view field = "options.algorithm") const;
  // Every algorithm, in the fixed order above.
  const std::vector<const Partitioner*>& All() const { return all_; }

 private:
  void Add(std::unique_ptr<Partitioner> partitioner);

  // Every algorithm, listed or not (`auto`'s re-placement forms of some members are not).
  std::vector<std::unique_ptr<Partitioner>> owned_;
  std::vector<const Partitioner*> all_;
};

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_SOLVE_ALGORITHM_REGISTRY_H_
