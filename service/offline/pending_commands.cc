// Verbs whose implementation is not linked into this build yet; they fail loudly instead of pretending.
#include <cstdio>
#include <string>
#include <vector>

#include "service/offline/offline_commands.h"

namespace placement::offline {
namespace {
int NotBuilt(const char* verb) {
  std::fprintf(stderr, "UNIMPLEMENTED: '%s' is not available in this build\n", verb);
  return 1;
}
}  // namespace

int RunConvert(const std::vector<std::string>&) { return NotBuilt("convert"); }
int RunExport(const std::vector<std::string>&) { return NotBuilt("export"); }

}  // namespace placement::offline
