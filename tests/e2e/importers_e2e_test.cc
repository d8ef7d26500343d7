// End-to-end: `placement_offline convert` one real file of each format, then `placement_offline place`
// the request it wrote, then `placement_offline export` the placement — the path a user takes.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/v1/placement.pb.h"
#include "service/engine/io/message_io.h"
#include "tests/e2e/server_process.h"

namespace placement::e2e {
namespace {

using ::testing::HasSubstr;

struct Case {
  std::string name;
  std::vector<std::string> convert_flags;  // --from, --in and format-specific flags
  bool needs_shared = false;
};

std::string TempPath(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  return std::string(base != nullptr && *base ? base : "/tmp") + "/importers_e2e_" + name;
}

bool Exists(const std::string& path) { return std::ifstream(path).good(); }

class ImportersE2eTest : public ::testing::TestWithParam<Case> {};

TEST_P(ImportersE2eTest, ConvertPlaceExport) {
  const Case& c = GetParam();
  const std::string shared = SourcePath("../shared/workloads");
  if (c.needs_shared && !Exists(shared + "/wfcommons/SOURCE.md")) {
    GTEST_SKIP() << "shared workloads not present";
  }
  const std::string request_path = TempPath(c.name + ".json.gz");
  std::vector<std::string> convert = {OfflineBinary(), "convert", "--out=" + request_path};
  for (std::string flag : c.convert_flags) {
    const size_t at = flag.find("@SRC@");
    if (at != std::string::npos) flag.replace(at, 5, SourcePath(""));
    convert.push_back(flag);
  }
  CommandResult converted = RunCommand(convert);
  ASSERT_EQ(converted.exit_status, 0) << converted.err;
  EXPECT_THAT(converted.err, HasSubstr("converted"));

  absl::StatusOr<v1::PlaceRequest> request =
      engine::ReadMessageFile<v1::PlaceRequest>(request_path);
  ASSERT_TRUE(request.ok()) << request.status();
  ASSERT_GT(request->graph().ops_size(), 0);

  const std::string placement_path = TempPath(c.name + "_placement.json");
  CommandResult placed = RunCommand({OfflineBinary(), "place", "--request=" + request_path,
                                     "--out=" + placement_path, "--time_limit_s=20"});
  ASSERT_EQ(placed.exit_status, 0) << placed.err;
  absl::StatusOr<v1::Placement> placement = engine::ReadMessageFile<v1::Placement>(placement_path);
  ASSERT_TRUE(placement.ok()) << placement.status();
  EXPECT_EQ(placement->device_size(), request->graph().ops_size());
  EXPECT_NE(placement->outcome(), v1::OUTCOME_UNSPECIFIED);
  EXPECT_GT(placement->metrics().makespan_ns(), 0);

  CommandResult csv = RunCommand({OfflineBinary(), "export", "--request=" + request_path,
                                  "--placement=" + placement_path, "--to=csv"});
  ASSERT_EQ(csv.exit_status, 0) << csv.err;
  const std::vector<std::string> lines = absl::StrSplit(csv.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), static_cast<size_t>(request->graph().ops_size()) + 1);
  EXPECT_EQ(lines[0], "name,device");
}

INSTANTIATE_TEST_SUITE_P(
    EveryFormat, ImportersE2eTest,
    ::testing::Values(
        Case{"msr", {"--from=msr", "--in=@SRC@/tests/data/importers/msr/bert24_training.json"}},
        Case{"pipedream",
             {"--from=pipedream", "--in=@SRC@/tests/data/importers/pipedream/alexnet_graph.txt"}},
        Case{"onnx",
             {"--from=onnx", "--in=@SRC@/tests/data/importers/onnx/light_squeezenet.onnx",
              "--onnx_batch_size=16"}},
        Case{"chakra",
             {"--from=chakra",
              "--in=@SRC@/tests/data/importers/chakra/resnet_et_2023_pid23442.json.gz",
              "--kineto=@SRC@/tests/data/importers/chakra/resnet_kineto_pid23442_3iter.json.gz"}},
        Case{"wfcommons",
             {"--from=wfcommons",
              "--in=@SRC@/../shared/workloads/wfcommons/srasearch-chameleon-10a-001.json.gz"},
             /*needs_shared=*/true},
        Case{"pardnn", {"--from=pardnn", "--in=@SRC@/tests/data/importers/pardnn/folder_a"}}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

TEST(ImportersE2eErrorsTest, BrokenInputNamesTheFileAndExitsOne) {
  const std::string broken = TempPath("broken_graph.txt");
  std::ofstream(broken) << "node1 -- Input -- forward_compute_time=zero\n";
  CommandResult r = RunCommand({OfflineBinary(), "convert", "--from=pipedream", "--in=" + broken,
                                "--out=" + TempPath("broken.json")});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_THAT(r.err, HasSubstr("broken_graph.txt:1:"));
  EXPECT_EQ(r.out, "");

  r = RunCommand({OfflineBinary(), "convert", "--from=caffe", "--in=x", "--out=y"});
  EXPECT_EQ(r.exit_status, 2);

  r = RunCommand({OfflineBinary(), "export", "--request=" + SourcePath("tests/data/offline/three_ops.json"),
                  "--placement=" + broken, "--to=csv"});
  EXPECT_EQ(r.exit_status, 1);
}

}  // namespace
}  // namespace placement::e2e
