// algorithm_registry.h — the algorithms the service offers, by api.md name.
//
// Example:
//   const Partitioner* algorithm = FindAlgorithm("pardnn");
//   if (algorithm == nullptr) return absl::InvalidArgumentError("unknown algorithm");
#ifndef PLACEMENT_SERVICE_ENGINE_SOLVE_ALGORITHM_REGISTRY_H_
#define PLACEMENT_SERVICE_ENGINE_SOLVE_ALGORITHM_REGISTRY_H_

#include <string_view>
#include <vector>

#include "service/engine/partition/partitioner.h"

namespace placement::engine {

inline constexpr std::string_view kDefaultAlgorithm = "auto";

// The registered algorithm called `name` ("" = the default), or null when there is none.
const Partitioner* FindAlgorithm(std::string_view name);

// Every registered algorithm, in a fixed order (pardnn first, auto last).
const std::vector<const Partitioner*>& AllAlgorithms();

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_SOLVE_ALGORITHM_REGISTRY_H_
