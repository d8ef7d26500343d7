// child_process.h — starts a helper binary for a test (redis-server, nginx) directly, without a
// shell: stdout goes to /dev/null, stderr to a file of the caller's choice, so a failing start can
// be read afterwards and the test's own output stays clean.
//
// Example:
//   absl::StatusOr<pid_t> pid = SpawnChild({binary, "-c", config_path}, dir + "/stderr.log");
//   if (!pid.ok()) return pid.status();
//   ...
//   kill(*pid, SIGKILL);
//   waitpid(*pid, nullptr, 0);
#ifndef PLACEMENT_TESTS_TESTUTIL_CHILD_PROCESS_H_
#define PLACEMENT_TESTS_TESTUTIL_CHILD_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace placement::testutil {

// Runs args[0] (a path, not looked up on PATH) with `args` as its argv, stderr written to
// `stderr_path` (created or truncated; "/dev/null" to drop it). The caller reaps the child.
// INTERNAL when it cannot be started.
absl::StatusOr<pid_t> SpawnChild(std::vector<std::string> args, const std::string& stderr_path);

}  // namespace placement::testutil

#endif  // PLACEMENT_TESTS_TESTUTIL_CHILD_PROCESS_H_
