// Runs the real placement_offline binary and checks its contract (api.md §3): JSON on stdout, problems
// with field paths on stderr, exit status 0 / 1 / 2.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/v1/placement_service.pb.h"
#include "service/engine/io/message_io.h"

namespace placement {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string SourceDir() {
  const char* dir = std::getenv("PLACEMENT_SOURCE_DIR");
  return dir != nullptr ? dir : ".";
}

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (std::to_string(::getpid()) + "_" + name))
      .string();
}

std::string ReadAll(const std::string& path) {
  std::ifstream file(path);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

RunResult RunOffline(const std::string& args) {
  const std::string out = TempPath("stdout");
  const std::string err = TempPath("stderr");
  const std::string command =
      std::string(PLACEMENT_OFFLINE_BINARY) + " " + args + " >" + out + " 2>" + err;
  const int status = std::system(command.c_str());
  RunResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.out = ReadAll(out);
  result.err = ReadAll(err);
  std::remove(out.c_str());
  std::remove(err.c_str());
  return result;
}

std::string Fixture() { return SourceDir() + "/tests/data/offline/three_ops.json"; }

TEST(OfflineCliTest, PlacePrintsPlacementJson) {
  const RunResult run = RunOffline("place --algorithm=round_robin --request=" + Fixture());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  v1::Placement placement;
  ASSERT_TRUE(engine::JsonToMessage(run.out, placement).ok()) << run.out;
  ASSERT_EQ(placement.device_size(), 3);
  EXPECT_EQ(placement.outcome(), v1::FEASIBLE);
  // a on gpu0 [0,1000); b on gpu1 after 2000 ns latency + 41 ns (4096 B at 100 GB/s).
  EXPECT_EQ(placement.metrics().makespan_ns(), 5041);
  EXPECT_EQ(placement.provenance().algorithm(), "round_robin");
}

TEST(OfflineCliTest, EvaluateScoresAPlacementFile) {
  const RunResult place = RunOffline("place --algorithm=round_robin --request=" + Fixture());
  ASSERT_EQ(place.exit_code, 0) << place.err;
  const std::string placement_path = TempPath("placement.json");
  { std::ofstream(placement_path) << place.out; }
  const RunResult run =
      RunOffline("evaluate --request=" + Fixture() + " --placement=" + placement_path);
  std::remove(placement_path.c_str());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  v1::EvaluateResponse response;
  ASSERT_TRUE(engine::JsonToMessage(run.out, response).ok()) << run.out;
  EXPECT_EQ(response.placement().metrics().makespan_ns(), 5041);
}

TEST(OfflineCliTest, ReadsGzipAndBinaryRequests) {
  absl::StatusOr<v1::PlaceRequest> request =
      engine::ReadMessageFile<v1::PlaceRequest>(Fixture());
  ASSERT_TRUE(request.ok()) << request.status();
  for (const char* name : {"r.json.gz", "r.pb"}) {
    const std::string path = TempPath(name);
    ASSERT_TRUE(engine::WriteMessageFile(*request, path).ok());
    const RunResult run = RunOffline("place --algorithm=single_device --request=" + path);
    std::remove(path.c_str());
    EXPECT_EQ(run.exit_code, 0) << name << ": " << run.err;
    EXPECT_THAT(run.out, HasSubstr("\"outcome\": \"FEASIBLE\"")) << name;
  }
}

TEST(OfflineCliTest, InvalidInputFailsWithFieldPathsAndNothingOnStdout) {
  absl::StatusOr<v1::PlaceRequest> request =
      engine::ReadMessageFile<v1::PlaceRequest>(Fixture());
  ASSERT_TRUE(request.ok());
  request->mutable_graph()->mutable_edges(1)->set_dst(912);
  request->mutable_cluster()->mutable_devices(1)->set_name("gpu0");
  const std::string path = TempPath("bad.json");
  ASSERT_TRUE(engine::WriteMessageFile(*request, path).ok());
  const RunResult run = RunOffline("place --request=" + path);
  std::remove(path.c_str());
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.out, IsEmpty());
  EXPECT_THAT(run.err, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(run.err, HasSubstr("graph.edges[1].dst"));
  EXPECT_THAT(run.err, HasSubstr("cluster.devices[1].name"));
}

TEST(OfflineCliTest, UnknownAlgorithmAndUsageErrors) {
  const RunResult unknown = RunOffline("place --algorithm=nope --request=" + Fixture());
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.err, HasSubstr("options.algorithm"));
  EXPECT_THAT(unknown.out, IsEmpty());
  EXPECT_EQ(RunOffline("place").exit_code, 2);
  EXPECT_EQ(RunOffline("frobnicate").exit_code, 2);
  EXPECT_EQ(RunOffline("").exit_code, 2);
}

TEST(OfflineCliTest, MissingFileIsNamed) {
  const RunResult run = RunOffline("place --request=/nonexistent/request.json");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("/nonexistent/request.json"));
}

TEST(OfflineCliTest, ExportParDnnInputFolderRoundTripsThroughConvert) {
  const std::string dir = TempPath("pardnn_inputs");
  std::filesystem::remove_all(dir);
  const RunResult usage = RunOffline("export --to=pardnn --request=" + Fixture());
  EXPECT_EQ(usage.exit_code, 2);
  EXPECT_THAT(usage.err, HasSubstr("--out=DIR"));
  const RunResult exported = RunOffline("export --to=pardnn --request=" + Fixture() + " --out=" + dir);
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_EQ(ReadAll(dir + "/crn_src_sink_low.dot"), "digraph{\na->b\na->c\nsrc->a\nb->snk\nc->snk\n}\n");
  EXPECT_EQ(ReadAll(dir + "/nodes_average_durations_fixed.txt"), "a::1\nb::2\nc::2\n");
  EXPECT_EQ(ReadAll(dir + "/tensors_sz_32_low.txt"), "a::4096\n");
  // Read back with the fixture's own cluster: the same graph (c's 1.5 us rounds to 2 us).
  const std::string cluster = TempPath("cluster.json");
  { std::ofstream(cluster) << R"({"devices": [{"name": "gpu0", "kind": "gpu", "node": "h0",
      "memory_bytes": 17179869184}, {"name": "gpu1", "kind": "gpu", "node": "h0",
      "memory_bytes": 17179869184}], "intra_node": {"bandwidth_bytes_per_second": 100000000000,
      "latency_ns": 2000}})"; }
  const std::string back = TempPath("back.json");
  const RunResult converted = RunOffline("convert --from=pardnn --in=" + dir + " --cluster=" +
                                         cluster + " --out=" + back);
  ASSERT_EQ(converted.exit_code, 0) << converted.err;
  absl::StatusOr<v1::PlaceRequest> request = engine::ReadMessageFile<v1::PlaceRequest>(back);
  std::filesystem::remove_all(dir);
  std::remove(cluster.c_str());
  std::remove(back.c_str());
  ASSERT_TRUE(request.ok()) << request.status();
  ASSERT_EQ(request->graph().ops_size(), 3);
  EXPECT_EQ(request->graph().ops(2).compute_ns(), 2000);
  ASSERT_EQ(request->graph().edges_size(), 2);
  EXPECT_EQ(request->graph().edges(1).bytes(), 4096);
  EXPECT_EQ(request->cluster().devices_size(), 2);
}

TEST(OfflineCliTest, ReportWritesOneHtmlFilePerRequest) {
  const std::string html_path = TempPath("report.html");
  const RunResult several = RunOffline("report --algorithm=pardnn,round_robin --request=" + Fixture() +
                                       " --out=" + html_path);
  ASSERT_EQ(several.exit_code, 0) << several.err;
  const std::string html = ReadAll(html_path);
  std::remove(html_path.c_str());
  EXPECT_THAT(html, HasSubstr("<!DOCTYPE html>"));
  EXPECT_THAT(html, HasSubstr("<table class=\"compare\">"));
  EXPECT_THAT(html, HasSubstr("<g class=\"lane\" data-device=\"gpu1\">"));

  // A placement file instead of algorithms: no comparison table.
  const RunResult place = RunOffline("place --algorithm=round_robin --request=" + Fixture());
  ASSERT_EQ(place.exit_code, 0) << place.err;
  const std::string placement_path = TempPath("report_placement.json");
  { std::ofstream(placement_path) << place.out; }
  const RunResult one = RunOffline("report --request=" + Fixture() + " --placement=" + placement_path);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_THAT(one.out, HasSubstr("<svg class=\"gantt\""));
  EXPECT_THAT(one.out, ::testing::Not(HasSubstr("class=\"compare\"")));

  EXPECT_EQ(RunOffline("report --request=" + Fixture() + " --placement=" + placement_path +
                       " --algorithm=pardnn")
                .exit_code,
            2);
  std::remove(placement_path.c_str());
  EXPECT_EQ(RunOffline("report --algorithm=nope --request=" + Fixture()).exit_code, 2);
  EXPECT_EQ(RunOffline("report").exit_code, 2);
}

}  // namespace
}  // namespace placement
