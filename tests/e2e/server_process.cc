#include "tests/e2e/server_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "tests/testutil/temp_dir_at_exit.h"

extern char** environ;

namespace placement::e2e {
namespace {

// Every e2e test program writes its files (requests, answers, flag files, logs) under
// ::testing::TempDir(). With fixed names in a shared /tmp, two runs at once could write the same file,
// and every run left its files behind. So each program gets a directory of its own (inside TEST_TMPDIR
// when one is set), made before any test runs, given to ::testing::TempDir() through TEST_TMPDIR, and
// removed at exit. If it cannot be made, the files go where they went before.
[[maybe_unused]] const bool kPrivateTmpdirMade = [] {
  const std::string dir = testutil::MakeTempDirRemovedAtExit("placement_e2e");
  return !dir.empty() && setenv("TEST_TMPDIR", dir.c_str(), 1) == 0;
}();

std::vector<char*> Argv(std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  return argv;
}

// The port after "<marker> 127.0.0.1:" in `log`, or 0.
int PortAfter(absl::string_view log, absl::string_view marker) {
  const size_t at = log.find(marker);
  if (at == absl::string_view::npos) return 0;
  absl::string_view rest = log.substr(at + marker.size());
  rest = rest.substr(0, rest.find('\n'));
  const size_t colon = rest.rfind(':');
  int port = 0;
  if (colon == absl::string_view::npos ||
      !absl::SimpleAtoi(absl::StripAsciiWhitespace(rest.substr(colon + 1)), &port)) {
    return 0;
  }
  return port;
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream file(path);
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

}  // namespace

std::string ServerBinary() { return PLACEMENT_SERVER_BINARY; }
std::string PlacementctlBinary() { return PLACEMENTCTL_BINARY; }
std::string OfflineBinary() { return PLACEMENT_OFFLINE_BINARY; }

std::string SourcePath(absl::string_view relative) {
  const char* root = std::getenv("PLACEMENT_SOURCE_DIR");
  return absl::StrCat(root != nullptr ? root : ".", "/", relative);
}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(
    const std::vector<std::string>& flags, absl::Duration timeout) {
  std::vector<std::string> args = {ServerBinary(), "--host=127.0.0.1", "--port=0",
                                   "--metrics_port=0"};
  // Plaintext on loopback unless the test chooses the transport itself (TLS flags or --insecure).
  const bool chooses_transport = std::any_of(flags.begin(), flags.end(), [](const std::string& f) {
    return absl::StartsWith(f, "--tls_") || absl::StartsWith(f, "--insecure") ||
           absl::StartsWith(f, "--noinsecure");
  });
  if (!chooses_transport) args.push_back("--insecure");
  args.insert(args.end(), flags.begin(), flags.end());
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDERR_FILENO);
  std::unique_ptr<ServerProcess> server(new ServerProcess());
  std::vector<char*> argv = Argv(args);
  const int spawned =
      posix_spawn(&server->pid_, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  if (spawned != 0) {
    close(pipe_fds[0]);
    return absl::InternalError(absl::StrCat("cannot start ", args[0], ": errno ", spawned));
  }
  const int read_fd = pipe_fds[0];
  ServerProcess* raw = server.get();
  server->reader_ = std::thread([raw, read_fd] { raw->ReadLog(read_fd); });

  auto ready = [raw]() ABSL_SHARED_LOCKS_REQUIRED(raw->mu_) -> bool {
    return raw->log_closed_ || (raw->log_.find("listening on") != std::string::npos &&
                                raw->log_.find("metrics on") != std::string::npos);
  };
  std::string log;
  {
    absl::MutexLock lock(&server->mu_);
    server->mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
    log = server->log_;
  }
  server->port_ = PortAfter(log, "listening on ");
  server->metrics_port_ = PortAfter(log, "metrics on ");
  if (server->port_ == 0 || server->metrics_port_ == 0) {
    return absl::FailedPreconditionError(absl::StrCat("placement_server did not start:\n", log));
  }
  return server;
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0 && !exit_status_.has_value()) {
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  if (reader_.joinable()) reader_.join();
}

std::string ServerProcess::address() const { return absl::StrCat("127.0.0.1:", port_); }

void StopServer(ServerProcess& server) {
  server.Signal(SIGTERM);
  EXPECT_EQ(server.WaitForExit(absl::Seconds(60)).value_or(-100), 0) << server.Log();
}

ServerProcess* StartSuiteServer(const std::vector<std::string>& flags) {
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(flags);
  if (!server.ok()) {
    ADD_FAILURE() << "the suite's server did not start: " << server.status();
    return nullptr;
  }
  return server->release();
}

void StopSuiteServer(ServerProcess*& server) {
  if (server == nullptr) return;
  StopServer(*server);
  delete server;
  server = nullptr;
}

void ServerProcess::Signal(int signal) {
  if (pid_ > 0 && !exit_status_.has_value()) kill(pid_, signal);
}

void ServerProcess::ReadLog(int fd) {
  char buffer[4096];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    absl::MutexLock lock(&mu_);
    log_.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  absl::MutexLock lock(&mu_);
  log_closed_ = true;
}

std::string ServerProcess::Log() const {
  absl::MutexLock lock(&mu_);
  return log_;
}

bool ServerProcess::WaitForLog(absl::string_view text, absl::Duration timeout) {
  const std::string wanted(text);
  auto found = [this, &wanted]() ABSL_SHARED_LOCKS_REQUIRED(mu_) -> bool {
    return log_.find(wanted) != std::string::npos;
  };
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&found), timeout);
}

absl::StatusOr<int> ServerProcess::WaitForExit(absl::Duration timeout) {
  if (exit_status_.has_value()) return *exit_status_;
  // The server's stderr closes when it exits: wait for that on the pipe, then reap it.
  {
    absl::MutexLock lock(&mu_);
    if (!mu_.AwaitWithTimeout(absl::Condition(&log_closed_), timeout)) {
      return absl::DeadlineExceededError("the server is still running");
    }
  }
  int status = 0;
  if (waitpid(pid_, &status, 0) != pid_) return absl::InternalError("waitpid failed");
  exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  return *exit_status_;
}

CommandResult RunCommand(const std::vector<std::string>& command) {
  CommandResult result;
  static int counter = 0;
  const std::string base =
      absl::StrCat(::testing::TempDir(), "/cmd", getpid(), "_", counter++);
  const std::string out_path = base + ".out";
  const std::string err_path = base + ".err";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<std::string> args = command;
  std::vector<char*> argv = Argv(args);
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    result.err = absl::StrCat("cannot start ", command[0]);
    return result;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  result.out = ReadWholeFile(out_path);
  result.err = ReadWholeFile(err_path);
  unlink(out_path.c_str());
  unlink(err_path.c_str());
  return result;
}

absl::StatusOr<int64_t> ResidentBytes(pid_t pid) {
  const std::string status = ReadWholeFile(absl::StrCat("/proc/", pid, "/status"));
  for (absl::string_view line : absl::StrSplit(status, '\n')) {
    if (!absl::ConsumePrefix(&line, "VmRSS:")) continue;
    line = absl::StripAsciiWhitespace(line);
    int64_t kib = 0;
    if (absl::ConsumeSuffix(&line, "kB") &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &kib)) {
      return kib * 1024;
    }
  }
  return absl::NotFoundError(absl::StrCat("no VmRSS for process ", pid));
}

absl::StatusOr<std::string> ScrapeMetrics(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError("socket failed");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot connect to metrics port ", port));
  }
  const std::string request =
      "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return absl::UnavailableError("cannot send the metrics request");
  }
  std::string response;
  char buffer[8192];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) response.append(buffer, n);
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (response.rfind("HTTP/1.", 0) != 0 || body == std::string::npos) {
    return absl::UnavailableError("not an HTTP response from the metrics port");
  }
  return response.substr(body + 4);
}

double MetricValue(absl::string_view scrape, absl::string_view series) {
  for (absl::string_view line : absl::StrSplit(scrape, '\n')) {
    if (!absl::ConsumePrefix(&line, series)) continue;
    if (line.empty() || line.front() != ' ') continue;
    double value = 0;
    if (absl::SimpleAtod(absl::StripAsciiWhitespace(line), &value)) return value;
  }
  return 0;
}

bool HasMetricFamily(absl::string_view scrape, absl::string_view name) {
  return scrape.find(absl::StrCat("# TYPE ", name, " ")) != absl::string_view::npos;
}

bool HasGrpcLogLine(absl::string_view text) {
  static const std::regex kGrpcLine(R"((^|\n)[EWID]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [^ ]+:\d+\])");
  return std::regex_search(text.begin(), text.end(), kGrpcLine);
}

}  // namespace placement::e2e
