#include "tests/testutil/terminal_command.h"

#include <fcntl.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace placement::testutil {

TerminalResult RunOnTerminal(const std::vector<std::string>& argv) {
  TerminalResult result;
  int master = -1;
  int slave = -1;
  // A wide terminal: the tools must not depend on its width, and nothing wraps lines here.
  struct winsize size = {};
  size.ws_row = 50;
  size.ws_col = 200;
  if (openpty(&master, &slave, nullptr, nullptr, &size) != 0) {
    result.err = "openpty failed";
    return result;
  }
  std::string err_path =
      (std::filesystem::temp_directory_path() / "terminal_command_err_XXXXXX").string();
  char* err_template = err_path.data();
  const int err_fd = mkstemp(err_template);
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);

  const pid_t pid = fork();
  if (pid == 0) {
    const int null_fd = open("/dev/null", O_RDONLY);
    dup2(null_fd, STDIN_FILENO);
    dup2(slave, STDOUT_FILENO);
    dup2(err_fd, STDERR_FILENO);
    close(master);
    execv(args[0], args.data());
    _exit(127);
  }
  close(slave);
  // Read until the command closes the terminal (EIO once the last slave descriptor is gone).
  char buffer[4096];
  while (true) {
    const ssize_t n = read(master, buffer, sizeof(buffer));
    if (n > 0) {
      result.out.append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  close(master);
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::string cleaned;
  for (char c : result.out) {
    if (c != '\r') cleaned.push_back(c);
  }
  result.out = cleaned;
  std::ifstream err_file(err_template);
  result.err.assign(std::istreambuf_iterator<char>(err_file), std::istreambuf_iterator<char>());
  close(err_fd);
  unlink(err_template);
  return result;
}

}  // namespace placement::testutil
