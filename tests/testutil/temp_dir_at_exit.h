// temp_dir_at_exit.h — a fresh directory for a test program's files, removed with its contents when the
// program exits (fixed names in a shared /tmp collide between runs and stay behind).
//
// Example:
//   const std::string dir = testutil::MakeTempDirRemovedAtExit("importers");  // TEST_TMPDIR or /tmp
//   if (dir.empty()) { /* mkdtemp failed: nothing was made */ }
#ifndef PLACEMENT_TESTS_TESTUTIL_TEMP_DIR_AT_EXIT_H_
#define PLACEMENT_TESTS_TESTUTIL_TEMP_DIR_AT_EXIT_H_

#include <string>

namespace placement::testutil {

// Makes PREFIX_XXXXXX under $TEST_TMPDIR (or /tmp when it is unset or empty) and returns its path, or ""
// when it cannot. Thread-safe; every directory made is removed at exit.
std::string MakeTempDirRemovedAtExit(const std::string& prefix);

}  // namespace placement::testutil

#endif  // PLACEMENT_TESTS_TESTUTIL_TEMP_DIR_AT_EXIT_H_
