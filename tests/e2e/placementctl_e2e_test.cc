// End-to-end tests of placementctl against a real placement_server: output, exit codes, errors.
#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/v1/placement_service.pb.h"
#include "service/engine/io/message_io.h"
#include "tests/e2e/server_process.h"
#include "tests/testutil/terminal_command.h"

namespace placement::e2e {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr char kSmallRequest[] = "tests/data/service/small_request.json";

class PlacementctlE2ETest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = StartSuiteServer({"--workers=2", "--testing_algorithms"}); }
  static void TearDownTestSuite() { StopSuiteServer(server_); }
  void SetUp() override { ASSERT_NE(server_, nullptr); }

  // placementctl --server=<the test server> args...
  static CommandResult Ctl(std::vector<std::string> args) {
    args.insert(args.begin(), {PlacementctlBinary(), "--server=" + server_->address()});
    return RunCommand(args);
  }
  static std::string Temp(const std::string& name) { return ::testing::TempDir() + "/" + name; }

  static ServerProcess* server_;
};

ServerProcess* PlacementctlE2ETest::server_ = nullptr;

TEST_F(PlacementctlE2ETest, HealthFollowsGrpcHealthProbeExitCodes) {
  CommandResult serving = Ctl({"health"});
  EXPECT_EQ(serving.exit_status, 0) << serving.err;
  EXPECT_EQ(serving.out, "SERVING\n");
  CommandResult named = Ctl({"health", "--service=placement.v1.PlacementService"});
  EXPECT_EQ(named.exit_status, 0);
  CommandResult unknown = Ctl({"health", "--service=nope.Service"});
  EXPECT_EQ(unknown.exit_status, 4);
  EXPECT_EQ(unknown.out, "SERVICE_UNKNOWN\n");
  // Nothing listens on port 1.
  CommandResult unreachable = RunCommand(
      {PlacementctlBinary(), "--server=127.0.0.1:1", "--connect_timeout=1s", "health"});
  EXPECT_EQ(unreachable.exit_status, 2);
}

TEST_F(PlacementctlE2ETest, PlacePrintsTheSamePlacementJsonAsTheOfflineTool) {
  const std::string request = SourcePath(kSmallRequest);
  CommandResult online = Ctl({"place", "--request=" + request, "--progress=never"});
  ASSERT_EQ(online.exit_status, 0) << online.err;
  CommandResult offline = RunCommand({OfflineBinary(), "place", "--request=" + request});
  ASSERT_EQ(offline.exit_status, 0) << offline.err;

  v1::Placement from_server;
  v1::Placement from_offline;
  ASSERT_TRUE(engine::JsonToMessage(online.out, from_server).ok()) << online.out;
  ASSERT_TRUE(engine::JsonToMessage(offline.out, from_offline).ok()) << offline.out;
  EXPECT_EQ(from_server.device_size(), 8);
  // Identical but for what only a server knows (cache, queue and solve times, its time budget).
  for (v1::Placement* p : {&from_server, &from_offline}) {
    p->mutable_provenance()->clear_time_limit_ns();
    p->mutable_provenance()->clear_cache();
    p->mutable_provenance()->clear_queue_ns();
    p->mutable_provenance()->clear_solve_ns();
  }
  EXPECT_EQ(from_server.SerializeAsString(), from_offline.SerializeAsString())
      << online.out << "\nvs\n" << offline.out;
}

TEST_F(PlacementctlE2ETest, PlaceWritesOutAndEvaluateScoresIt) {
  const std::string out = Temp("placement.json");
  CommandResult placed = Ctl({"place", "--request=" + SourcePath(kSmallRequest),
                              "--algorithm=single_device", "--out=" + out, "--progress=never"});
  ASSERT_EQ(placed.exit_status, 0) << placed.err;
  EXPECT_EQ(placed.out, "");
  CommandResult evaluated =
      Ctl({"evaluate", "--request=" + SourcePath(kSmallRequest), "--placement=" + out});
  ASSERT_EQ(evaluated.exit_status, 0) << evaluated.err;
  v1::EvaluateResponse response;
  ASSERT_TRUE(engine::JsonToMessage(evaluated.out, response).ok()) << evaluated.out;
  EXPECT_EQ(response.placement().provenance().algorithm(), "evaluate");
  for (int32_t device : response.placement().device()) EXPECT_EQ(device, 0);
}

TEST_F(PlacementctlE2ETest, PlaceWritesAnHtmlReportOfTheServersResult) {
  const std::string request_path = SourcePath(kSmallRequest);
  absl::StatusOr<v1::PlaceRequest> request = engine::ReadMessageFile<v1::PlaceRequest>(request_path);
  ASSERT_TRUE(request.ok()) << request.status();
  // Unary Place (no progress bar) and the operation path (progress bar) both write the report.
  for (const char* progress : {"--progress=never", "--progress=always"}) {
    const std::string report = Temp(absl::StrCat("report", progress + 11, ".html"));
    CommandResult placed = Ctl({"place", "--request=" + request_path, "--algorithm=round_robin",
                                "--report=" + report, progress});
    ASSERT_EQ(placed.exit_status, 0) << placed.err;
    EXPECT_THAT(placed.out, HasSubstr("\"device\""));  // the Placement JSON is still printed
    absl::StatusOr<std::string> html = engine::ReadFileBytes(report);
    ASSERT_TRUE(html.ok()) << progress;
    int lanes = 0;
    for (size_t at = html->find("<g class=\"lane\""); at != std::string::npos;
         at = html->find("<g class=\"lane\"", at + 1)) {
      ++lanes;
    }
    EXPECT_EQ(lanes, request->cluster().devices_size()) << progress;
    EXPECT_THAT(*html, HasSubstr("<h2>round_robin</h2>"));
  }
}

TEST_F(PlacementctlE2ETest, SubmitWaitGetCancel) {
  CommandResult submitted = Ctl({"submit", "--request=" + SourcePath(kSmallRequest),
                                 "--algorithm=round_robin", "--output=name"});
  ASSERT_EQ(submitted.exit_status, 0) << submitted.err;
  const std::string name(absl::StripAsciiWhitespace(submitted.out));
  EXPECT_THAT(name, StartsWith("operations/"));

  CommandResult waited = Ctl({"wait", name, "--progress=never"});
  ASSERT_EQ(waited.exit_status, 0) << waited.err;
  v1::Placement placement;
  ASSERT_TRUE(engine::JsonToMessage(waited.out, placement).ok()) << waited.out;
  EXPECT_EQ(placement.device_size(), 8);

  CommandResult got = Ctl({"get", "--operation=" + name});
  ASSERT_EQ(got.exit_status, 0) << got.err;
  v1::Operation operation;
  ASSERT_TRUE(engine::JsonToMessage(got.out, operation).ok()) << got.out;
  EXPECT_TRUE(operation.done());
  EXPECT_TRUE(operation.has_response());

  // A slow job: cancel it, then waiting for it reports CANCELLED.
  CommandResult slow = Ctl({"submit", "--request=" + SourcePath(kSmallRequest),
                            "--algorithm=testing_wait", "--output=name"});
  ASSERT_EQ(slow.exit_status, 0) << slow.err;
  const std::string slow_name(absl::StripAsciiWhitespace(slow.out));
  CommandResult cancelled = Ctl({"cancel", slow_name});
  ASSERT_EQ(cancelled.exit_status, 0) << cancelled.err;
  v1::Operation after_cancel;
  ASSERT_TRUE(engine::JsonToMessage(cancelled.out, after_cancel).ok());
  EXPECT_TRUE(after_cancel.done());
  EXPECT_EQ(after_cancel.error().code(), 1);
  CommandResult waited_cancelled = Ctl({"wait", slow_name, "--progress=never"});
  EXPECT_EQ(waited_cancelled.exit_status, 1);
  EXPECT_THAT(waited_cancelled.err, StartsWith("CANCELLED: "));
}

TEST_F(PlacementctlE2ETest, ShowsAProgressBarWhenAsked) {
  // testing_wait with a short time limit: progress is drawn until it gives its answer.
  v1::PlaceRequest request;
  ASSERT_TRUE(engine::ReadMessageFile(SourcePath(kSmallRequest), request).ok());
  request.mutable_options()->set_algorithm("testing_wait");
  request.mutable_options()->mutable_time_limit()->set_nanos(800'000'000);
  request.mutable_options()->set_seed(static_cast<uint64_t>(absl::ToUnixNanos(absl::Now())));
  const std::string path = Temp("slow_request.json");
  ASSERT_TRUE(engine::WriteMessageFile(request, path).ok());
  CommandResult placed = Ctl({"place", "--request=" + path, "--progress=always"});
  ASSERT_EQ(placed.exit_status, 0) << placed.err;
  EXPECT_THAT(placed.err, HasSubstr("waiting"));
  EXPECT_THAT(placed.err, HasSubstr("%"));
  v1::Placement placement;
  ASSERT_TRUE(engine::JsonToMessage(placed.out, placement).ok()) << placed.out;
  EXPECT_TRUE(placement.provenance().time_limited());
}

TEST_F(PlacementctlE2ETest, ErrorsCarryTheStatusCodeNameAndAnExitCode) {
  const std::string bad = Temp("bad_request.json");
  ASSERT_TRUE(engine::WriteFileBytes(
                  bad, R"({"graph": {"ops": [{"name": "a"}, {"name": "a"}],
                                     "edges": [{"src": 0, "dst": 7}]}, "cluster": {}})")
                  .ok());
  CommandResult invalid = Ctl({"place", "--request=" + bad, "--progress=never"});
  EXPECT_EQ(invalid.exit_status, 1);
  EXPECT_THAT(invalid.err, StartsWith("INVALID_ARGUMENT: "));
  EXPECT_THAT(invalid.err, HasSubstr("graph.edges[0].dst"));
  EXPECT_EQ(invalid.out, "");

  CommandResult missing = Ctl({"place", "--request=/nonexistent/request.json"});
  EXPECT_EQ(missing.exit_status, 66);
  CommandResult not_found = Ctl({"get", "operations/none"});
  EXPECT_EQ(not_found.exit_status, 1);
  EXPECT_THAT(not_found.err, StartsWith("NOT_FOUND: "));
  EXPECT_EQ(Ctl({"frobnicate"}).exit_status, 64);
  EXPECT_EQ(Ctl({"place"}).exit_status, 64);
  EXPECT_EQ(Ctl({"wait"}).exit_status, 64);
  CommandResult unreachable = RunCommand({PlacementctlBinary(), "--server=127.0.0.1:1",
                                          "--connect_timeout=1s", "algorithms"});
  EXPECT_EQ(unreachable.exit_status, 2);
  EXPECT_THAT(unreachable.err, StartsWith("UNAVAILABLE: "));
}

// Scripts read placementctl's JSON: unless stdout is a terminal (or --format=summary), and always with
// --format=json, it is byte for byte what it always was.
TEST_F(PlacementctlE2ETest, JsonStaysByteIdenticalUnlessATerminal) {
  const std::string request = SourcePath(kSmallRequest);
  CommandResult piped = Ctl({"place", "--request=" + request, "--algorithm=round_robin",
                             "--progress=never"});
  ASSERT_EQ(piped.exit_status, 0) << piped.err;
  v1::Placement placement;
  ASSERT_TRUE(engine::JsonToMessage(piped.out, placement).ok()) << piped.out;
  EXPECT_EQ(piped.out, engine::MessageToJson(placement) + "\n");
  CommandResult json = Ctl({"place", "--request=" + request, "--algorithm=round_robin",
                            "--progress=never", "--format=json"});
  ASSERT_TRUE(engine::JsonToMessage(json.out, placement).ok()) << json.out;
  EXPECT_EQ(json.out, engine::MessageToJson(placement) + "\n");

  // evaluate is deterministic: exactly the golden JSON placement_offline prints (tests/offline).
  absl::StatusOr<std::string> read =
      engine::ReadFileBytes(SourcePath("tests/data/offline/three_ops_evaluate.golden.json"));
  ASSERT_TRUE(read.ok()) << read.status();
  const std::string golden = *read;
  const std::vector<std::string> evaluate = {
      "evaluate", "--request=" + SourcePath("tests/data/offline/three_ops.json"),
      "--placement=" + SourcePath("tests/data/offline/three_ops_placement.json")};
  std::vector<std::string> args = evaluate;
  EXPECT_EQ(Ctl(args).out, golden);
  args.push_back("--format=json");
  EXPECT_EQ(Ctl(args).out, golden);
  args.insert(args.begin(), {PlacementctlBinary(), "--server=" + server_->address()});
  const testutil::TerminalResult terminal = testutil::RunOnTerminal(args);
  EXPECT_EQ(terminal.exit_status, 0) << terminal.err;
  EXPECT_EQ(terminal.out, golden);
}

TEST_F(PlacementctlE2ETest, SummaryOnATerminalOrWhenAsked) {
  const std::string request = SourcePath(kSmallRequest);
  const testutil::TerminalResult placed = testutil::RunOnTerminal(
      {PlacementctlBinary(), "--server=" + server_->address(), "place", "--request=" + request,
       "--algorithm=m_etf", "--progress=never"});
  ASSERT_EQ(placed.exit_status, 0) << placed.err;
  EXPECT_THAT(placed.out, StartsWith("outcome     FEASIBLE"));
  EXPECT_THAT(placed.out, HasSubstr("lower bound "));
  EXPECT_THAT(placed.out, HasSubstr(": speed-up "));
  EXPECT_THAT(placed.out, HasSubstr("algorithm   m_etf"));
  EXPECT_THAT(placed.out, HasSubstr("queue "));
  EXPECT_THAT(placed.out, HasSubstr("peak memory / capacity"));
  EXPECT_THAT(placed.out, Not(HasSubstr("{")));
  for (absl::string_view line : absl::StrSplit(placed.out, '\n')) {
    EXPECT_LE(line.size(), 100u) << line;
  }

  // wait: device numbers and no single-device time without the request, names and time with it.
  CommandResult submitted = Ctl({"submit", "--request=" + request, "--algorithm=round_robin",
                                 "--output=name"});
  ASSERT_EQ(submitted.exit_status, 0) << submitted.err;
  const std::string name(absl::StripAsciiWhitespace(submitted.out));
  CommandResult bare = Ctl({"wait", name, "--progress=never", "--format=summary"});
  ASSERT_EQ(bare.exit_status, 0) << bare.err;
  EXPECT_THAT(bare.out, HasSubstr("one device  n/a (add --request=FILE for it)"));
  EXPECT_THAT(bare.out, HasSubstr("\n#0 "));
  CommandResult named = Ctl({"wait", name, "--progress=never", "--format=summary",
                             "--request=" + request});
  ASSERT_EQ(named.exit_status, 0) << named.err;
  EXPECT_THAT(named.out, HasSubstr(": speed-up "));

  CommandResult evaluated = Ctl({"evaluate", "--format=summary",
                                 "--request=" + SourcePath("tests/data/offline/three_ops.json"),
                                 "--placement=" + SourcePath("tests/data/offline/three_ops_placement.json")});
  ASSERT_EQ(evaluated.exit_status, 0) << evaluated.err;
  EXPECT_THAT(evaluated.out, HasSubstr("algorithm   evaluate"));
  EXPECT_THAT(evaluated.out, HasSubstr("one device  4.5 us alone on gpu0: speed-up 0.89x"));

  CommandResult bad = Ctl({"place", "--request=" + request, "--format=yaml"});
  EXPECT_EQ(bad.exit_status, 64);
  EXPECT_THAT(bad.err, HasSubstr("auto, json or summary"));
}

TEST_F(PlacementctlE2ETest, ListsAlgorithms) {
  CommandResult listed = Ctl({"algorithms"});
  ASSERT_EQ(listed.exit_status, 0) << listed.err;
  v1::ListAlgorithmsResponse response;
  ASSERT_TRUE(engine::JsonToMessage(listed.out, response).ok()) << listed.out;
  EXPECT_GE(response.algorithms_size(), 2);
}

TEST(PlacementctlHelpTest, HelpListsTheVerbs) {
  CommandResult help = RunCommand({PlacementctlBinary(), "--help"});
  for (const char* verb : {"place", "submit", "wait", "cancel", "evaluate", "algorithms", "health"}) {
    EXPECT_THAT(help.out + help.err, HasSubstr(verb));
  }
}

}  // namespace
}  // namespace placement::e2e
