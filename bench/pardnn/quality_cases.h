// quality_cases.h — (benchmarks and quality tests) the real-workload cases pardnn's quality is reported
// on, as PlaceRequests:
//   * every training graph of msr_dnn_partitioning (throughput-inputs, Layer- and OperatorGraphs) with
//     the file's own device count and memory limit (importers/msr_importer.h);
//   * every PipeDream profile (pipedream_importer.h, expanded into a training step) for K = 2, 4, 8
//     devices of the default cluster's links, each with memory
//         1.25 x (parameters + half of all activations) / K
//     where parameters = the step's persistent bytes (weights and optimizer state) and activations = the
//     step's output bytes (forward activations and backward gradients).
// The workloads live outside the repository: FindSharedDir() looks for $PLACEMENT_SOURCE_DIR/../shared,
// then ../shared; callers skip cleanly when it is absent.
//
// Example:
//   std::string shared = FindSharedDir();
//   if (shared.empty()) GTEST_SKIP() << "no ../shared/workloads";
//   absl::StatusOr<std::vector<QualityCase>> cases = LoadQualityCases(shared);
#ifndef PLACEMENT_BENCH_PARDNN_QUALITY_CASES_H_
#define PLACEMENT_BENCH_PARDNN_QUALITY_CASES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "placement/v1/placement.pb.h"
#include "service/engine/model/model.h"

namespace placement::engine::pardnn {

struct QualityCase {
  std::string name;  // e.g. "msr/OperatorGraphs/bert_l-3_training", "pipedream/resnet50/K=4"
  v1::PlaceRequest request;
};

// The folder holding workloads/ ("" when not found).
std::string FindSharedDir();

// Every case, in a fixed order. NOT_FOUND when `shared_dir`/workloads is missing; import errors pass
// through.
absl::StatusOr<std::vector<QualityCase>> LoadQualityCases(const std::string& shared_dir);

// A proof that no placement fits: some op needs, on its own device at its own start, its group's
// persistent bytes + its temp and output bytes + at least min(output, edge bytes) of every input, and
// that exceeds the largest device's capacity. Returns the op (kNone when there is no such proof).
OpId MemoryProvablyInfeasible(const Model& model, int64_t* needed_bytes = nullptr);

}  // namespace placement::engine::pardnn

#endif  // PLACEMENT_BENCH_PARDNN_QUALITY_CASES_H_
