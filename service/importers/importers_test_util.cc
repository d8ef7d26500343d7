#include "service/importers/importers_test_util.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "absl/strings/match.h"
#include "service/engine/model/model_builder.h"
#include "tests/testutil/temp_dir_at_exit.h"

namespace placement::importers::testing {

std::string SourceDir() {
  const char* dir = std::getenv("PLACEMENT_SOURCE_DIR");
  return dir != nullptr && *dir != '\0' ? dir : ".";
}

std::string TestData(const std::string& relative) {
  return SourceDir() + "/tests/data/importers/" + relative;
}

std::string SharedWorkload(const std::string& relative) {
  return SourceDir() + "/../shared/workloads/" + relative;
}

bool PathExists(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0;
}

std::string MakeTempDir() {
  const std::string dir = testutil::MakeTempDirRemovedAtExit("importers");
  return dir.empty() ? "/tmp" : dir;
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

int32_t OpIndex(const v1::Graph& graph, const std::string& name) {
  for (int32_t i = 0; i < graph.ops_size(); ++i) {
    if (graph.ops(i).name() == name) return i;
  }
  return -1;
}

int64_t EdgeBytes(const v1::Graph& graph, const std::string& src, const std::string& dst) {
  const int32_t s = OpIndex(graph, src), d = OpIndex(graph, dst);
  int64_t total = -1;
  for (const v1::Edge& edge : graph.edges()) {
    if (edge.src() == s && edge.dst() == d) total = (total < 0 ? 0 : total) + edge.bytes();
  }
  return total;
}

int64_t CountOpsWithSuffix(const v1::Graph& graph, const std::string& suffix) {
  int64_t count = 0;
  for (const v1::Op& op : graph.ops()) count += absl::EndsWith(op.name(), suffix) ? 1 : 0;
  return count;
}

std::string ValidationError(const v1::PlaceRequest& request) {
  absl::StatusOr<engine::Model> model = engine::BuildModel(request);
  return model.ok() ? std::string() : std::string(model.status().message());
}

}  // namespace placement::importers::testing
