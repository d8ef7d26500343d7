// server_process.h — end-to-end test helpers: run the real placement_server (and other binaries) as
// child processes, read their logs, scrape their metrics over HTTP.
//
// ServerProcess::Start launches placement_server with --host=127.0.0.1 --port=0 --metrics_port=0
// (and --insecure, unless the flags choose the transport: any --tls_* flag or --[no]insecure) plus
// the given flags and blocks (on the pipe, not on a timer) until the server logs `listening on` and
// `metrics on`, then exposes the chosen ports. The destructor kills a server that is still running.
//
// Example:
//   absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start({"--workers=1"});
//   PlacementClient client({.target = (*server)->address()});
//   std::string metrics = ScrapeMetrics((*server)->metrics_port()).value();
//   (*server)->Signal(SIGTERM);
//   EXPECT_EQ((*server)->WaitForExit(absl::Seconds(30)).value(), 0);
#ifndef PLACEMENT_TESTS_E2E_SERVER_PROCESS_H_
#define PLACEMENT_TESTS_E2E_SERVER_PROCESS_H_

#include <sys/types.h>

#include <cstdint>

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace placement::e2e {

// Paths of the binaries under test (compiled in by tests/e2e/CMakeLists.txt).
std::string ServerBinary();
std::string PlacementctlBinary();
std::string OfflineBinary();
// PLACEMENT_SOURCE_DIR (set by placement_cc_test) + "/" + relative.
std::string SourcePath(absl::string_view relative);

class ServerProcess {
 public:
  // Starts placement_server with the fixed test flags plus `flags`; waits up to `timeout` for it to
  // listen. FAILED_PRECONDITION (with its log) when it exits or does not get ready in time.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(
      const std::vector<std::string>& flags, absl::Duration timeout = absl::Seconds(60));
  ~ServerProcess();

  int port() const { return port_; }
  int metrics_port() const { return metrics_port_; }
  std::string address() const;
  pid_t pid() const { return pid_; }

  void Signal(int signal);
  // Exit status once the process has exited (-signal if it was killed by one); DEADLINE_EXCEEDED if
  // it is still running after `timeout`.
  absl::StatusOr<int> WaitForExit(absl::Duration timeout);
  // Everything it wrote to stderr so far.
  std::string Log() const ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until the log contains `text` (true) or `timeout` passes (false).
  bool WaitForLog(absl::string_view text, absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  ServerProcess() = default;
  void ReadLog(int fd);

  pid_t pid_ = -1;
  int port_ = 0;
  int metrics_port_ = 0;
  std::optional<int> exit_status_;
  std::thread reader_;
  mutable absl::Mutex mu_;
  std::string log_ ABSL_GUARDED_BY(mu_);
  bool log_closed_ ABSL_GUARDED_BY(mu_) = false;
};

// SIGTERM, then a gtest expectation that the server exits with status 0 within a minute (its log is
// printed when it does not).
void StopServer(ServerProcess& server);

// One server shared by every test of a suite, started in SetUpTestSuite and stopped in TearDownTestSuite:
//   static void SetUpTestSuite() { server_ = StartSuiteServer({"--workers=2"}); }
//   static void TearDownTestSuite() { StopSuiteServer(server_); }
//   void SetUp() override { ASSERT_NE(server_, nullptr); }
//   static ServerProcess* server_;  // a raw pointer: a static unique_ptr would be destroyed at exit
// StartSuiteServer returns nullptr, with a test failure saying why, when the server does not start.
ServerProcess* StartSuiteServer(const std::vector<std::string>& flags);
// StopServer, then deletes the server and sets `server` to nullptr; nothing when it is nullptr already.
void StopSuiteServer(ServerProcess*& server);

struct CommandResult {
  int exit_status = -1;
  std::string out;
  std::string err;
};

// Runs `argv` (argv[0] is the binary path) to completion, capturing stdout and stderr.
CommandResult RunCommand(const std::vector<std::string>& argv);

// Resident set size of process `pid` in bytes (VmRSS in /proc/<pid>/status).
absl::StatusOr<int64_t> ResidentBytes(pid_t pid);

// GET /metrics from 127.0.0.1:`port`.
absl::StatusOr<std::string> ScrapeMetrics(int port);
// The value of the sample `series` (e.g. `placement_solves_total{algorithm="pardnn"}`) in a scrape;
// 0 when absent.
double MetricValue(absl::string_view scrape, absl::string_view series);
// True when `text` holds a line in gRPC's own log format ("E1203 08:09:31.948123456  1234
// file.cc:56] ..."), which the binaries keep out of their output.
bool HasGrpcLogLine(absl::string_view text);

// True when the scrape has a `# TYPE name ...` line.
bool HasMetricFamily(absl::string_view scrape, absl::string_view name);

}  // namespace placement::e2e

#endif  // PLACEMENT_TESTS_E2E_SERVER_PROCESS_H_
