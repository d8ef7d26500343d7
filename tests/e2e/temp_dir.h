// temp_dir.h — a fresh directory under the test's temp dir for the end-to-end tests' files (tokens,
// certificates, configs), removed with its contents at the end.
//
// Example:
//   TempDir dir("security_e2e");
//   const std::string tokens = dir.Write("tokens", "team-a:secret\n");  // atomic: write + rename
//   dir.Write("tokens", "te", /*in_place=*/true);                      // a half-written file
#ifndef PLACEMENT_TESTS_E2E_TEMP_DIR_H_
#define PLACEMENT_TESTS_E2E_TEMP_DIR_H_

#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace placement::e2e {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix) {
    std::string pattern = absl::StrCat(::testing::TempDir(), "/", prefix, ".XXXXXX");
    if (mkdtemp(pattern.data()) == nullptr) {
      ADD_FAILURE() << "mkdtemp " << pattern << " failed";
      return;
    }
    path_ = pattern;
  }
  ~TempDir() {
    if (path_.empty()) return;
    std::error_code ignored;  // a leftover folder under the test's temp dir is no failure
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string File(const std::string& name) const { return absl::StrCat(path_, "/", name); }
  // Writes atomically (temporary file + rename), as a mounted secret or a careful operator replaces a
  // file, unless `in_place` (what a reader may catch half-written).
  std::string Write(const std::string& name, const std::string& text, bool in_place = false) const {
    const std::string path = File(name);
    const std::string target = in_place ? path : path + ".tmp";
    {
      std::ofstream out(target, std::ios::trunc);
      out << text;
    }
    if (!in_place) std::rename(target.c_str(), path.c_str());
    return path;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace placement::e2e

#endif  // PLACEMENT_TESTS_E2E_TEMP_DIR_H_
