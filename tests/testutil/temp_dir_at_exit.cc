#include "tests/testutil/temp_dir_at_exit.h"

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <vector>

namespace placement::testutil {
namespace {

// Leaked on purpose: they must outlive every static destructor that might still make a directory.
std::mutex& DirsMutex() {
  static std::mutex* mutex = new std::mutex;
  return *mutex;
}
std::vector<std::string>& Dirs() {
  static std::vector<std::string>* dirs = new std::vector<std::string>;
  return *dirs;
}

void RemoveDirs() {
  std::lock_guard<std::mutex> lock(DirsMutex());
  for (const std::string& dir : Dirs()) {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
  Dirs().clear();
}

}  // namespace

std::string MakeTempDirRemovedAtExit(const std::string& prefix) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string pattern = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/" + prefix + "_XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) return "";
  std::lock_guard<std::mutex> lock(DirsMutex());
  static const bool registered = (std::atexit(RemoveDirs), true);
  (void)registered;
  Dirs().push_back(pattern);
  return pattern;
}

}  // namespace placement::testutil
