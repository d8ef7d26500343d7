// importer_fuzzer — libFuzzer target for one importer, chosen at build time by PLACEMENT_FUZZ_FORMAT
// ("msr", "pipedream", "onnx", "chakra", "wfcommons", "pardnn"); tests/fuzz/CMakeLists.txt builds one
// binary per format so that each keeps its own corpus.
//
// Importers that parse text or bytes in memory are called directly; chakra and pardnn read files (pardnn
// a whole folder), so their input is written to a scratch file first (the DOT graph for pardnn, with
// the other files of the folder absent: they are optional). What must hold: no crash, no sanitizer
// report, and an error is INVALID_ARGUMENT or NOT_FOUND — never anything else.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "service/importers/chakra_importer.h"
#include "service/importers/import_options.h"
#include "service/importers/msr_importer.h"
#include "service/importers/onnx_importer.h"
#include "service/importers/pardnn_importer.h"
#include "service/importers/pipedream_importer.h"
#include "service/importers/wfcommons_importer.h"
#include "service/engine/io/message_io.h"

#ifndef PLACEMENT_FUZZ_FORMAT
#error "define PLACEMENT_FUZZ_FORMAT"
#endif

namespace {

using namespace placement::engine;
using namespace placement::importers;

void CheckError(const absl::Status& status) {
  if (status.ok() || status.code() == absl::StatusCode::kInvalidArgument ||
      status.code() == absl::StatusCode::kNotFound) {
    return;
  }
  std::fprintf(stderr, "importer_fuzzer(%s): unexpected status %s\n", PLACEMENT_FUZZ_FORMAT,
               status.ToString().c_str());
  std::abort();
}

// A scratch folder of this process, created once.
const std::string& ScratchDir() {
  static const std::string* dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    auto* path = new std::string(absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/placement_fuzz_",
                                              PLACEMENT_FUZZ_FORMAT, "_", getpid()));
    std::string command = absl::StrCat("mkdir -p '", *path, "'");
    if (std::system(command.c_str()) != 0) std::abort();
    return path;
  }();
  return *dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  const absl::string_view format = PLACEMENT_FUZZ_FORMAT;
  ImportOptions options;
  if (format == "msr") {
    CheckError(ImportMsrText("fuzz.json", input, options).status());
  } else if (format == "wfcommons") {
    CheckError(ImportWfCommonsText("fuzz.json", input, options).status());
  } else if (format == "pipedream") {
    CheckError(ParsePipeDream("graph.txt", input).status());
  } else if (format == "onnx") {
    options.onnx_batch_size = 2;
    CheckError(OnnxLayerGraph("fuzz.onnx", input, options).status());
  } else if (format == "chakra") {
    const std::string path = ScratchDir() + "/et.json";
    if (!WriteFileBytes(path, input).ok()) std::abort();
    CheckError(ImportChakra(path, options).status());
  } else if (format == "pardnn") {
    const std::string path = ScratchDir() + "/graph.dot";
    if (!WriteFileBytes(path, input).ok()) std::abort();
    CheckError(ImportParDnn(path, options).status());
  } else {
    std::abort();
  }
  return 0;
}
