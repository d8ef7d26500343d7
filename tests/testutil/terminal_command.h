// Runs a command with its standard output on a pseudo-terminal, as a person at a terminal runs it:
// for the tests of what the command-line tools print when stdout is a terminal (isatty(1) is true).
#ifndef PLACEMENT_TESTS_TESTUTIL_TERMINAL_COMMAND_H_
#define PLACEMENT_TESTS_TESTUTIL_TERMINAL_COMMAND_H_

#include <string>
#include <vector>

namespace placement::testutil {

struct TerminalResult {
  int exit_status = -1;
  // What the command wrote to the terminal, with the terminal's "\r\n" turned back into "\n".
  std::string out;
  // Standard error, which goes to a file (not the terminal).
  std::string err;
};

// argv[0] is the binary's path. Standard input is /dev/null. Waits for the command to end.
TerminalResult RunOnTerminal(const std::vector<std::string>& argv);

}  // namespace placement::testutil

#endif  // PLACEMENT_TESTS_TESTUTIL_TERMINAL_COMMAND_H_
