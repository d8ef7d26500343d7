// importers_test_util.h — helpers shared by the importer tests: where fixtures and the shared workloads
// are, op / edge lookup by name, and a check that a request passes the model builder's validation.
//
// Example:
//   const std::string path = TestData("msr/bert24_training.json");
//   if (!PathExists(SharedWorkload("wfcommons"))) GTEST_SKIP() << "no shared workloads";
#ifndef PLACEMENT_SERVICE_ENGINE_IMPORTERS_IMPORTERS_TEST_UTIL_H_
#define PLACEMENT_SERVICE_ENGINE_IMPORTERS_IMPORTERS_TEST_UTIL_H_

#include <cstdint>
#include <string>

#include "placement/v1/placement.pb.h"

namespace placement::importers::testing {

// $PLACEMENT_SOURCE_DIR (set by placement_cc_test), else the current directory.
std::string SourceDir();
// tests/data/importers/<relative>.
std::string TestData(const std::string& relative);
// ../shared/workloads/<relative>, beside the source tree.
std::string SharedWorkload(const std::string& relative);
bool PathExists(const std::string& path);
// A fresh temporary directory for one test, removed with its contents when the test program exits.
std::string MakeTempDir();
void WriteText(const std::string& path, const std::string& text);

// Index of the op named `name`, or -1.
int32_t OpIndex(const v1::Graph& graph, const std::string& name);
// Bytes of the edge src -> dst (by op name), or -1 when there is none.
int64_t EdgeBytes(const v1::Graph& graph, const std::string& src, const std::string& dst);
// Counts ops whose name ends with `suffix`.
int64_t CountOpsWithSuffix(const v1::Graph& graph, const std::string& suffix);

// Empty when BuildModel accepts the request, else its error message.
std::string ValidationError(const v1::PlaceRequest& request);

}  // namespace placement::importers::testing

#endif  // PLACEMENT_SERVICE_ENGINE_IMPORTERS_IMPORTERS_TEST_UTIL_H_
