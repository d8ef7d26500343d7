#include "bench/pardnn/quality_cases.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "service/importers/import_options.h"
#include "service/importers/msr_importer.h"
#include "service/importers/pipedream_importer.h"

namespace placement::engine::pardnn {
namespace {

bool IsDirectory(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

bool IsFile(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

}  // namespace

std::string FindSharedDir() {
  std::vector<std::string> candidates;
  // Test and benchmark support only (placement_pardnn_quality is not linked into the service): CTest sets
  // PLACEMENT_SOURCE_DIR, so the quality test finds the shared workloads from any build folder.
  if (const char* source = std::getenv("PLACEMENT_SOURCE_DIR")) {
    candidates.push_back(std::string(source) + "/../shared");
  }
  candidates.push_back("../shared");
  for (const std::string& dir : candidates) {
    if (IsDirectory(dir + "/workloads")) return dir;
  }
  return "";
}

absl::StatusOr<std::vector<QualityCase>> LoadQualityCases(const std::string& shared_dir) {
  const std::string workloads = shared_dir + "/workloads";
  if (!IsDirectory(workloads)) return absl::NotFoundError(absl::StrCat(workloads, " not found"));
  std::vector<QualityCase> cases;

  const std::string msr = workloads + "/msr_dnn_partitioning/throughput-inputs";
  const struct {
    const char* kind;
    const char* file;
  } kMsr[] = {
      {"LayerGraphs", "bert24_training"},        {"LayerGraphs", "gnmt_training"},
      {"LayerGraphs", "inceptionv3_training"},   {"LayerGraphs", "resnet50_training"},
      {"OperatorGraphs", "bert_l-3_training"},   {"OperatorGraphs", "bert_l-6_training"},
      {"OperatorGraphs", "bert_L-12_training"},  {"OperatorGraphs", "resnet50_training"},
  };
  for (const auto& entry : kMsr) {
    const std::string path = absl::StrCat(msr, "/", entry.kind, "/", entry.file, ".json");
    if (!IsFile(path)) continue;
    absl::StatusOr<v1::PlaceRequest> request = importers::ImportMsr(path, importers::ImportOptions());
    if (!request.ok()) return request.status();
    cases.push_back({absl::StrCat("msr/", entry.kind, "/", entry.file), *std::move(request)});
  }

  const std::string pipedream = workloads + "/pipedream_profiles";
  const struct {
    const char* app;
    const char* model;
  } kPipeDream[] = {
      {"image_classification", "alexnet"},       {"image_classification", "vgg16"},
      {"image_classification", "squeezenet1_0"}, {"image_classification", "resnet18"},
      {"image_classification", "resnet50"},      {"image_classification", "resnext50"},
      {"image_classification", "resnet101"},     {"image_classification", "resnext101"},
      {"image_classification", "inception_v3"},  {"image_classification", "densenet121"},
      {"image_classification", "nasnetamobile"}, {"image_classification", "nasnetalarge"},
      {"translation", "gnmt"},                   {"translation", "gnmt_large"},
  };
  for (const auto& entry : kPipeDream) {
    const std::string path = absl::StrCat(pipedream, "/", entry.app, "/", entry.model, "/graph.txt");
    if (!IsFile(path)) continue;
    for (const int k : {2, 4, 8}) {
      importers::ImportOptions options;
      v1::Cluster cluster = importers::DefaultCluster();
      const v1::Device prototype = cluster.devices(0);
      cluster.clear_devices();
      for (int d = 0; d < k; ++d) {
        v1::Device* device = cluster.add_devices();
        *device = prototype;
        device->set_name(absl::StrCat("gpu", d));
      }
      options.cluster = cluster;
      absl::StatusOr<v1::PlaceRequest> request = importers::ImportPipeDream(path, options);
      if (!request.ok()) return request.status();
      int64_t persistent = 0, activations = 0;
      for (const v1::Op& op : request->graph().ops()) {
        persistent += op.persistent_bytes();
        activations += op.output_bytes();
      }
      const int64_t memory =
          static_cast<int64_t>(1.25 * (static_cast<double>(persistent) + activations / 2.0) / k);
      for (v1::Device& device : *request->mutable_cluster()->mutable_devices()) {
        device.set_memory_bytes(memory);
      }
      cases.push_back({absl::StrCat("pipedream/", entry.model, "/K=", k), *std::move(request)});
    }
  }
  return cases;
}

OpId MemoryProvablyInfeasible(const Model& model, int64_t* needed_bytes) {
  int64_t largest = 0;
  for (const int64_t c : model.capacity_bytes) largest = std::max(largest, c);
  std::vector<int64_t> group_persistent(model.num_groups(), 0);
  for (OpId v = 0; v < model.num_ops(); ++v) {
    if (model.colocation_group[v] != kNone) {
      group_persistent[model.colocation_group[v]] += model.persistent_bytes[v];
    }
  }
  OpId worst = kNone;
  int64_t worst_need = 0;
  for (OpId v = 0; v < model.num_ops(); ++v) {
    const int32_t g = model.colocation_group[v];
    int64_t need = (g != kNone ? group_persistent[g] : model.persistent_bytes[v]) +
                   model.temp_bytes[v] + model.output_bytes[v];
    for (EdgeId e = model.in_begin(v); e < model.in_end(v); ++e) {
      need += std::min(model.output_bytes[model.in_src[e]], model.in_bytes[e]);
    }
    if (need > worst_need) {
      worst_need = need;
      worst = v;
    }
  }
  if (needed_bytes != nullptr) *needed_bytes = worst_need;
  return worst_need > largest ? worst : kNone;
}

}  // namespace placement::engine::pardnn
