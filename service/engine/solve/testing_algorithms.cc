#include "service/engine/solve/testing_algorithms.h"

#include <algorithm>
#include <stdexcept>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace placement::engine {
namespace {

class TestingWait final : public Partitioner {
 public:
  std::string_view name() const override { return "testing_wait"; }
  std::string_view version() const override { return "testing-1"; }
  std::string_view description() const override {
    return "For tests only: reports progress until cancelled or out of time, then places op v on "
           "device v mod D.";
  }
  absl::StatusOr<PartitionResult> Partition(const Model& model,
                                            const SolveContext& context) const override {
    const absl::Time start = context.Now();
    const absl::Duration budget = context.deadline - start;
    while (!context.ShouldStop()) {
      const double fraction =
          budget == absl::InfiniteDuration() ? 0.0 : (context.Now() - start) / budget;
      context.Report("waiting", std::min(1.0, fraction));
      absl::SleepFor(absl::Milliseconds(5));
    }
    PartitionResult result;
    result.assignment.resize(model.num_ops());
    for (OpId v = 0; v < model.num_ops(); ++v) result.assignment[v] = v % model.num_devices();
    result.time_limited = !context.Cancelled();
    return result;
  }
};

class TestingThrow final : public Partitioner {
 public:
  std::string_view name() const override { return "testing_throw"; }
  std::string_view version() const override { return "testing-1"; }
  std::string_view description() const override {
    return "For tests only: throws a std::runtime_error from the worker thread.";
  }
  absl::StatusOr<PartitionResult> Partition(const Model& model,
                                            const SolveContext&) const override {
    throw std::runtime_error(
        absl::StrCat("testing_throw: deliberate failure on a graph of ", model.num_ops(), " ops"));
  }
};

class TestingOverrun final : public Partitioner {
 public:
  std::string_view name() const override { return "testing_overrun"; }
  std::string_view version() const override { return "testing-1"; }
  std::string_view description() const override {
    return "For tests only: ignores its time limit until cancelled (or 10x the limit), then fails.";
  }
  absl::StatusOr<PartitionResult> Partition(const Model&,
                                            const SolveContext& context) const override {
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

std::vector<std::unique_ptr<Partitioner>> MakeTestingPartitioners() {
  std::vector<std::unique_ptr<Partitioner>> partitioners;
  partitioners.push_back(std::make_unique<TestingWait>());
  partitioners.push_back(std::make_unique<TestingThrow>());
  partitioners.push_back(std::make_unique<TestingOverrun>());
  return partitioners;
}

}  // namespace placement::engine
