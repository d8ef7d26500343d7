#include "tests/testutil/redis_server.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <thread>
#include <vector>

#include <hiredis/hiredis.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tests/testutil/child_process.h"

namespace placement::testutil {
namespace {

bool IsExecutable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

}  // namespace

std::string FindRedisServerBinary() {
  if (const char* configured = std::getenv("PLACEMENT_REDIS_SERVER"); configured != nullptr) {
    return IsExecutable(configured) ? configured : "";
  }
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path != nullptr ? path : "", ':')) {
    if (dir.empty()) continue;
    const std::string candidate = absl::StrCat(dir, "/redis-server");
    if (IsExecutable(candidate)) return candidate;
  }
  for (const char* fallback : {"/usr/bin/redis-server", "/usr/sbin/redis-server"}) {
    if (IsExecutable(fallback)) return fallback;
  }
  return "";
}

int PickFreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  int port = 0;
  socklen_t length = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  close(fd);
  return port;
}

absl::StatusOr<std::unique_ptr<RedisServer>> RedisServer::Start(RedisServerOptions options) {
  std::unique_ptr<RedisServer> server(new RedisServer());
  server->options_ = std::move(options);
  const absl::Duration timeout = server->options_.timeout;
  server->binary_ = FindRedisServerBinary();
  if (server->binary_.empty()) {
    return absl::NotFoundError("redis-server not found (install the Debian package redis-server)");
  }
  std::string dir_template =
      (std::filesystem::temp_directory_path() / "placement_redis_XXXXXX").string();
  if (mkdtemp(dir_template.data()) == nullptr) return absl::InternalError("mkdtemp failed");
  server->dir_ = dir_template;
  // Another process may take the port between PickFreePort and the bind: try a few.
  absl::Status launched;
  for (int attempt = 0; attempt < 3; ++attempt) {
    server->port_ = PickFreePort();
    launched = server->Launch(timeout);
    if (launched.ok()) return server;
  }
  return launched;
}

RedisServer::~RedisServer() {
  Kill();
  if (!dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

std::string RedisServer::address() const { return absl::StrCat("127.0.0.1:", port_); }

absl::Status RedisServer::Launch(absl::Duration timeout) {
  std::vector<std::string> args = {binary_,        "--port",       absl::StrCat(port_),
                                   "--bind",       "127.0.0.1",    "--save",
                                   "",             "--appendonly", "no",
                                   "--dir",        dir_,           "--daemonize",
                                   "no",           "--logfile",    absl::StrCat(dir_, "/redis.log"),
                                   "--protected-mode", "no"};
  if (!options_.password.empty()) {
    args.push_back("--requirepass");
    args.push_back(options_.password);
  }
  args.insert(args.end(), options_.args.begin(), options_.args.end());
  absl::StatusOr<pid_t> pid = SpawnChild(std::move(args), "/dev/null");
  if (!pid.ok()) return pid.status();
  pid_ = *pid;
  const absl::Time give_up = absl::Now() + timeout;
  while (absl::Now() < give_up) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {  // exited: most likely the port was taken
      pid_ = -1;
      return absl::UnavailableError(absl::StrCat("redis-server exited at start (port ", port_, ")"));
    }
    absl::StatusOr<std::string> pong = Command({"PING"});
    if (pong.ok() && *pong == "PONG") return absl::OkStatus();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  Kill();
  return absl::UnavailableError(absl::StrCat("redis-server on port ", port_, " did not answer"));
}

void RedisServer::Pause() {
  if (pid_ > 0) kill(pid_, SIGSTOP);
}

void RedisServer::Resume() {
  if (pid_ > 0) kill(pid_, SIGCONT);
}

void RedisServer::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

absl::Status RedisServer::Restart(absl::Duration timeout) {
  Kill();
  return Launch(timeout);
}

absl::StatusOr<std::string> RedisServer::Command(const std::vector<std::string>& args) const {
  redisContext* context = redisConnectWithTimeout("127.0.0.1", port_, timeval{1, 0});
  if (context == nullptr || context->err != 0) {
    if (context != nullptr) redisFree(context);
    return absl::InternalError("cannot connect to redis-server");
  }
  if (!options_.password.empty()) {
    auto* auth = static_cast<redisReply*>(
        redisCommand(context, "AUTH %b", options_.password.data(), options_.password.size()));
    if (auth != nullptr) freeReplyObject(auth);
  }
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  for (const std::string& arg : args) {
    argv.push_back(arg.data());
    lengths.push_back(arg.size());
  }
  auto* reply = static_cast<redisReply*>(
      redisCommandArgv(context, static_cast<int>(argv.size()), argv.data(), lengths.data()));
  absl::StatusOr<std::string> result = absl::InternalError("no reply");
  if (reply != nullptr) {
    switch (reply->type) {
      case REDIS_REPLY_STRING:
      case REDIS_REPLY_STATUS: result = std::string(reply->str, reply->len); break;
      case REDIS_REPLY_INTEGER: result = absl::StrCat(reply->integer); break;
      case REDIS_REPLY_NIL: result = std::string("(nil)"); break;
      case REDIS_REPLY_ARRAY: result = absl::StrCat("(array of ", reply->elements, ")"); break;
      case REDIS_REPLY_ERROR:
        result = absl::InternalError(std::string(reply->str, reply->len));
        break;
      default: result = absl::InternalError("unexpected reply type"); break;
    }
    freeReplyObject(reply);
  }
  redisFree(context);
  return result;
}

}  // namespace placement::testutil
