// Bad files must give an error, never a crash: every fixture, cut short and with bytes flipped, goes
// through its importer (run under ASan/UBSan with -DPLACEMENT_SANITIZE=address,undefined).
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "service/importers/import_util.h"
#include "service/importers/importers.h"
#include "service/importers/importers_test_util.h"

namespace placement::importers {
namespace {

using testing::MakeTempDir;
using testing::TestData;
using testing::WriteText;

struct Fixture {
  const char* format;
  const char* file;
  const char* suffix;  // extension the mangled copy gets
};

TEST(RobustnessTest, MangledFixturesNeverCrash) {
  const std::vector<Fixture> fixtures = {
      {"msr", "msr/bert24_training.json", ".json"},
      {"pipedream", "pipedream/gnmt_graph.txt", ".txt"},
      {"onnx", "onnx/light_bvlc_alexnet.onnx", ".onnx"},
      {"chakra", "chakra/resnet_et_2023_pid23442.json.gz", ".json"},
  };
  const std::string dir = MakeTempDir();
  int errors = 0, runs = 0;
  for (const Fixture& fixture : fixtures) {
    absl::StatusOr<std::string> original = ReadInputFile(TestData(fixture.file));
    ASSERT_TRUE(original.ok()) << original.status();
    std::vector<std::string> variants;
    for (int cut = 1; cut < 8; ++cut) variants.push_back(original->substr(0, original->size() * cut / 8));
    for (int flip = 0; flip < 12; ++flip) {
      std::string mangled = *original;
      const size_t at = (mangled.size() * (2 * flip + 1)) / 24;
      mangled[at] = static_cast<char>(mangled[at] ^ (flip % 2 == 0 ? 0x5a : 0x01));
      variants.push_back(std::move(mangled));
    }
    variants.push_back("");
    for (size_t v = 0; v < variants.size(); ++v) {
      const std::string path = dir + "/mangled_" + std::to_string(v) + fixture.suffix;
      WriteText(path, variants[v]);
      absl::StatusOr<v1::PlaceRequest> request = Import(fixture.format, path, ImportOptions());
      ++runs;
      if (!request.ok()) {
        ++errors;
        EXPECT_NE(std::string(request.status().message()).find("mangled_"), std::string::npos)
            << fixture.format << ": error does not name the file: " << request.status();
      }
    }
  }
  // Most mangled files are rejected (a flipped digit in a number can still be a valid file).
  EXPECT_GT(errors, runs / 2);
}

TEST(RobustnessTest, MangledParDnnFolderNeverCrashes) {
  const std::string dir = MakeTempDir();
  WriteText(dir + "/graph.dot", "digraph{\n\"a\"->\n->\"b\"\n}\n");
  absl::StatusOr<v1::PlaceRequest> request = Import("pardnn", dir, ImportOptions());
  ASSERT_FALSE(request.ok());
  EXPECT_NE(std::string(request.status().message()).find("graph.dot:2:"), std::string::npos)
      << request.status();

  // Self edges and lines that are not two fields are skipped, as the reference does.
  WriteText(dir + "/graph.dot", "digraph{\n\"a\"->\"a\"\n\"a\"->\"b\"->\"c\"\n::\n\"a\"->\"b\"\n}\n");
  WriteText(dir + "/weights.txt", "::\n::5\n\"b\":: 1e999\n");
  WriteText(dir + "/var_nodes.txt", "\n\n\"\"\n");
  WriteText(dir + "/vanilla_cleaned.place", "a\na -1 extra\n");
  request = Import("pardnn", dir, ImportOptions());
  ASSERT_FALSE(request.ok());
  EXPECT_NE(std::string(request.status().message()).find("weights.txt:3: '1e999' is out of range"), std::string::npos)
      << request.status();
  WriteText(dir + "/weights.txt", "\"a\":: 3\n");
  request = Import("pardnn", dir, ImportOptions());
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->graph().ops_size(), 2);
  EXPECT_EQ(request->graph().edges_size(), 1);
}

}  // namespace
}  // namespace placement::importers
