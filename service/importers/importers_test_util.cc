#include "service/importers/importers_test_util.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <vector>

#include "absl/strings/match.h"
#include "service/engine/model/model_builder.h"

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

namespace {

// The directories MakeTempDir made, removed with their contents when the test program exits: every
// test run used to leave its folders behind in /tmp.
std::mutex& TempDirsMutex() {
  static std::mutex* mutex = new std::mutex;
  return *mutex;
}
std::vector<std::string>& TempDirs() {
  static std::vector<std::string>* dirs = new std::vector<std::string>;
  return *dirs;
}
void RemoveTempDirs() {
  std::lock_guard<std::mutex> lock(TempDirsMutex());
  for (const std::string& dir : TempDirs()) {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
  TempDirs().clear();
}

}  // namespace

std::string MakeTempDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string pattern = std::string(base != nullptr && *base ? base : "/tmp") + "/importers_XXXXXX";
  char* made = mkdtemp(pattern.data());
  if (made == nullptr) return "/tmp";  // never registered for removal
  std::lock_guard<std::mutex> lock(TempDirsMutex());
  if (TempDirs().empty()) std::atexit(RemoveTempDirs);
  TempDirs().push_back(made);
  return made;
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
