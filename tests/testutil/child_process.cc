#include "tests/testutil/child_process.h"

#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

extern char** environ;

namespace placement::testutil {

absl::StatusOr<pid_t> SpawnChild(std::vector<std::string> args, const std::string& stderr_path) {
  if (args.empty()) return absl::InvalidArgumentError("args: empty, want at least the binary");
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, args[0].c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return absl::InternalError(absl::StrCat("cannot start ", args[0]));
  return pid;
}

}  // namespace placement::testutil
