#include "service/core/algorithm_catalog.h"

#include <algorithm>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "service/engine/model/digest.h"
#include "service/engine/solve/algorithm_registry.h"
#include "service/engine/solve/solve.h"

namespace placement::core {
namespace {

std::string ToString(std::string_view s) { return std::string(s.data(), s.size()); }

// One of the engine's algorithms.
class EngineAlgorithm : public Algorithm {
 public:
  explicit EngineAlgorithm(const engine::Partitioner* partitioner) : partitioner_(partitioner) {}
  std::string name() const override { return ToString(partitioner_->name()); }
  std::string version() const override { return ToString(partitioner_->version()); }
  std::string description() const override { return ToString(partitioner_->description()); }
  absl::StatusOr<v1::Placement> Solve(const engine::Model& model,
                                      const v1::PlacementOptions& options,
                                      const engine::SolveContext& context) const override {
    v1::PlacementOptions canonical = options;
    canonical.set_algorithm(name());
    return engine::Solve(model, canonical, context);
  }

 private:
  const engine::Partitioner* partitioner_;
};

// Holds a worker until cancelled or out of time (tests only).
class TestingWaitAlgorithm : public Algorithm {
 public:
  std::string name() const override { return std::string(AlgorithmCatalog::kTestingWait); }
  std::string version() const override { return "testing-1"; }
  std::string description() const override {
    return "For tests only: reports progress until cancelled or out of time, then places op v on "
           "device v mod D.";
  }
  absl::StatusOr<v1::Placement> Solve(const engine::Model& model,
                                      const v1::PlacementOptions& options,
                                      const engine::SolveContext& context) const override {
    const absl::Time start = context.Now();
    const absl::Duration budget = context.deadline - start;
    while (!context.ShouldStop()) {
      const double fraction =
          budget == absl::InfiniteDuration() ? 0.0 : (context.Now() - start) / budget;
      context.Report("waiting", std::min(1.0, fraction));
      absl::SleepFor(absl::Milliseconds(5));
    }
    engine::Assignment assignment(model.num_ops());
    for (engine::OpId v = 0; v < model.num_ops(); ++v) assignment[v] = v % model.num_devices();
    v1::Placement placement = engine::ScoreAssignment(model, assignment);
    v1::Provenance* provenance = placement.mutable_provenance();
    provenance->set_algorithm(name());
    provenance->set_requested_algorithm(name());
    provenance->set_algorithm_version(version());
    provenance->set_graph_digest(engine::GraphDigestHex(model));
    provenance->set_request_digest(RequestDigest(model, options));
    provenance->set_cache(v1::MISS);
    provenance->set_solve_ns(absl::ToInt64Nanoseconds(context.Now() - start));
    provenance->set_time_limited(!context.Cancelled());
    return placement;
  }
};

// Fails with a C++ exception (tests only): the worker must turn it into an INTERNAL error of this job
// alone and live on.
class TestingThrowAlgorithm : public Algorithm {
 public:
  std::string name() const override { return std::string(AlgorithmCatalog::kTestingThrow); }
  std::string version() const override { return "testing-1"; }
  std::string description() const override {
    return "For tests only: throws a std::runtime_error from the worker thread.";
  }
  absl::StatusOr<v1::Placement> Solve(const engine::Model& model, const v1::PlacementOptions&,
                                      const engine::SolveContext&) const override {
    throw std::runtime_error(
        absl::StrCat("testing_throw: deliberate failure on a graph of ", model.num_ops(), " ops"));
  }
};

// Ignores its time limit (tests only): it stops only when cancelled, or after ten times its budget
// (at most a minute), so that tests see what happens to a job that overruns — the caller's deadline
// ends the call, and the job is cancelled once nobody waits for it.
class TestingOverrunAlgorithm : public Algorithm {
 public:
  std::string name() const override { return std::string(AlgorithmCatalog::kTestingOverrun); }
  std::string version() const override { return "testing-1"; }
  std::string description() const override {
    return "For tests only: ignores its time limit until cancelled (or 10x the limit), then fails.";
  }
  absl::StatusOr<v1::Placement> Solve(const engine::Model&, const v1::PlacementOptions&,
                                      const engine::SolveContext& context) const override {
    const absl::Time start = context.Now();
    const absl::Duration budget = context.deadline - start;
    const absl::Time give_up = start + std::min(absl::Minutes(1), budget * 10);
    while (!context.Cancelled() && context.Now() < give_up) {
      context.Report("overrunning", 0.5);
      absl::SleepFor(absl::Milliseconds(5));
    }
    return absl::DeadlineExceededError("testing_overrun: ran past its time limit");
  }
};

}  // namespace

std::string Algorithm::RequestDigest(const engine::Model& model,
                                     const v1::PlacementOptions& options) const {
  return engine::RequestDigestHex(model, name(), version(), options.seed());
}

AlgorithmCatalog::AlgorithmCatalog(AlgorithmCatalogOptions options) {
  for (const engine::Partitioner* partitioner : engine::AllAlgorithms()) {
    owned_.push_back(std::make_unique<EngineAlgorithm>(partitioner));
  }
  if (options.include_testing_algorithms) {
    owned_.push_back(std::make_unique<TestingWaitAlgorithm>());
    owned_.push_back(std::make_unique<TestingThrowAlgorithm>());
    owned_.push_back(std::make_unique<TestingOverrunAlgorithm>());
  }
  for (const auto& algorithm : owned_) all_.push_back(algorithm.get());
}

AlgorithmCatalog::~AlgorithmCatalog() = default;

absl::StatusOr<const Algorithm*> AlgorithmCatalog::Find(absl::string_view name) const {
  const std::string wanted =
      name.empty() ? ToString(engine::kDefaultAlgorithm) : std::string(name);
  for (const Algorithm* algorithm : all_) {
    if (algorithm->name() == wanted) return algorithm;
  }
  std::vector<std::string> known;
  for (const Algorithm* algorithm : all_) known.push_back(algorithm->name());
  return absl::InvalidArgumentError(absl::StrCat("options.algorithm: unknown algorithm \"", wanted,
                                                 "\" (known: ", absl::StrJoin(known, ", "), ")"));
}

}  // namespace placement::core
