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
#include "tests/testutil/terminal_command.h"

namespace placement {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

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

// Scripts read the JSON of place and evaluate: when stdout is not a terminal, and with --format=json,
// it stays byte for byte what it always was (the golden file was written before summaries existed; its
// one change since: the training-plan fields `plan` and `metrics.microbatches_per_second` were added).
TEST(OfflineCliTest, JsonOutputIsPinnedByteForByte) {
  const std::string golden = ReadAll(SourceDir() + "/tests/data/offline/three_ops_evaluate.golden.json");
  ASSERT_FALSE(golden.empty());
  const std::string args = "evaluate --request=" + Fixture() + " --placement=" + SourceDir() +
                           "/tests/data/offline/three_ops_placement.json";
  const RunResult piped = RunOffline(args);
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(piped.out, golden);
  const RunResult json = RunOffline(args + " --format=json");
  EXPECT_EQ(json.out, golden);
  // On a terminal --format=json still gives the same bytes.
  const testutil::TerminalResult terminal = testutil::RunOnTerminal(
      {PLACEMENT_OFFLINE_BINARY, "evaluate", "--request=" + Fixture(),
       "--placement=" + SourceDir() + "/tests/data/offline/three_ops_placement.json", "--format=json"});
  EXPECT_EQ(terminal.exit_status, 0) << terminal.err;
  EXPECT_EQ(terminal.out, golden);
  // place: the same serialiser (solve_ns differs from run to run, so compare after a round trip).
  const RunResult place = RunOffline("place --algorithm=round_robin --request=" + Fixture());
  v1::Placement placement;
  ASSERT_TRUE(engine::JsonToMessage(place.out, placement).ok());
  EXPECT_EQ(place.out, engine::MessageToJson(placement) + "\n");
}

TEST(OfflineCliTest, SummaryOnATerminalOrWhenAsked) {
  const testutil::TerminalResult terminal = testutil::RunOnTerminal(
      {PLACEMENT_OFFLINE_BINARY, "place", "--algorithm=round_robin", "--request=" + Fixture()});
  ASSERT_EQ(terminal.exit_status, 0) << terminal.err;
  EXPECT_THAT(terminal.out, HasSubstr("outcome     FEASIBLE"));
  // round_robin puts a, b, c on gpu0, gpu1, gpu0: 5041 ns against 4500 ns on one device.
  EXPECT_THAT(terminal.out, HasSubstr("step        5.0 us   lower bound 3.0 us"));
  EXPECT_THAT(terminal.out, HasSubstr("one device  4.5 us alone on gpu0: speed-up 0.89x"));
  EXPECT_THAT(terminal.out, HasSubstr("algorithm   round_robin"));
  EXPECT_THAT(terminal.out, HasSubstr("\ngpu1 "));
  EXPECT_THAT(terminal.out, Not(HasSubstr("{")));

  const RunResult asked = RunOffline("place --algorithm=round_robin --format=summary --request=" +
                                     Fixture());
  ASSERT_EQ(asked.exit_code, 0) << asked.err;
  EXPECT_THAT(asked.out, HasSubstr("outcome     FEASIBLE"));

  // evaluate, with --out: the file gets the JSON, the terminal the summary.
  const std::string out = TempPath("evaluated.json");
  const testutil::TerminalResult evaluated = testutil::RunOnTerminal(
      {PLACEMENT_OFFLINE_BINARY, "evaluate", "--request=" + Fixture(),
       "--placement=" + SourceDir() + "/tests/data/offline/three_ops_placement.json", "--out=" + out});
  EXPECT_EQ(evaluated.exit_status, 0) << evaluated.err;
  EXPECT_THAT(evaluated.out, HasSubstr("algorithm   evaluate"));
  EXPECT_EQ(ReadAll(out), ReadAll(SourceDir() + "/tests/data/offline/three_ops_evaluate.golden.json"));
  std::remove(out.c_str());

  const RunResult bad = RunOffline("place --format=yaml --request=" + Fixture());
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("auto, json or summary"));
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
