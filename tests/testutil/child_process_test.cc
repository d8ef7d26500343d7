#include "tests/testutil/child_process.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace placement::testutil {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(SpawnChildTest, RunsTheBinaryWithItsArgumentsAndKeepsItsStderr) {
  const std::string stderr_path =
      ::testing::TempDir() + "/child_process_test_stderr." + std::to_string(getpid()) + ".log";
  absl::StatusOr<pid_t> pid =
      SpawnChild({"/bin/sh", "-c", "echo to-stdout; echo \"$0\" >&2; exit 3", "arg0"}, stderr_path);
  ASSERT_TRUE(pid.ok()) << pid.status();
  int status = 0;
  ASSERT_EQ(waitpid(*pid, &status, 0), *pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3);
  EXPECT_EQ(ReadFile(stderr_path), "arg0\n");  // stdout went to /dev/null, not into the file
  std::remove(stderr_path.c_str());
}

TEST(SpawnChildTest, AMissingBinaryIsAnError) {
  absl::StatusOr<pid_t> pid = SpawnChild({"/nonexistent/placement-no-such-binary"}, "/dev/null");
  EXPECT_EQ(pid.status().code(), absl::StatusCode::kInternal) << pid.status();
}

TEST(SpawnChildTest, NoArgumentsIsInvalid) {
  EXPECT_EQ(SpawnChild({}, "/dev/null").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace placement::testutil
