// algorithm_catalog.h — the algorithms the server offers: the engine's registry, plus (only when asked
// for, in tests) a slow test algorithm.
//
// The engine's own algorithms run through engine::Solve. `testing_wait` exists so that end-to-end tests
// can hold a worker busy deterministically: it reports progress until it is cancelled or its time limit
// passes, then places op v on device v mod D. `testing_throw` throws a C++ exception from the worker
// (the job fails with INTERNAL, the server lives on); `testing_overrun` ignores its time limit until it
// is cancelled. None is offered unless the server is started with --testing_algorithms.
//
// Example:
//   AlgorithmCatalog catalog({.include_testing_algorithms = false});
//   const Algorithm* algorithm = catalog.Find("");  // the default, pardnn
//   std::string digest = algorithm->RequestDigest(model, request.options());
#ifndef PLACEMENT_SERVICE_CORE_ALGORITHM_CATALOG_H_
#define PLACEMENT_SERVICE_CORE_ALGORITHM_CATALOG_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "placement/v1/placement.pb.h"
#include "service/engine/model/model.h"
#include "service/engine/partition/partitioner.h"

namespace placement::core {

class Algorithm {
 public:
  virtual ~Algorithm() = default;
  virtual std::string name() const = 0;
  virtual std::string version() const = 0;
  virtual std::string description() const = 0;
  // Runs the algorithm and scores its answer: a Placement with `device` in the model's request order,
  // provenance filled except the cache fields.
  virtual absl::StatusOr<v1::Placement> Solve(const engine::Model& model,
                                              const v1::PlacementOptions& options,
                                              const engine::SolveContext& context) const = 0;
  // The cache key of (model, options) for this algorithm.
  std::string RequestDigest(const engine::Model& model, const v1::PlacementOptions& options) const;
};

struct AlgorithmCatalogOptions {
  // Adds `testing_wait`, `testing_throw` and `testing_overrun` (for end-to-end tests only).
  bool include_testing_algorithms = false;
};

class AlgorithmCatalog {
 public:
  static constexpr absl::string_view kTestingWait = "testing_wait";
  static constexpr absl::string_view kTestingThrow = "testing_throw";
  static constexpr absl::string_view kTestingOverrun = "testing_overrun";

  explicit AlgorithmCatalog(AlgorithmCatalogOptions options = {});
  ~AlgorithmCatalog();

  // The algorithm called `name` ("" = the engine's default), or INVALID_ARGUMENT naming the known ones.
  absl::StatusOr<const Algorithm*> Find(absl::string_view name) const;
  // Every algorithm, engine order first.
  const std::vector<const Algorithm*>& All() const { return all_; }

 private:
  std::vector<std::unique_ptr<Algorithm>> owned_;
  std::vector<const Algorithm*> all_;
};

}  // namespace placement::core

#endif  // PLACEMENT_SERVICE_CORE_ALGORITHM_CATALOG_H_
