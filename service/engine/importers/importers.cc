#include "service/engine/importers/importers.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "service/engine/importers/chakra_importer.h"
#include "service/engine/importers/msr_importer.h"
#include "service/engine/importers/onnx_importer.h"
#include "service/engine/importers/pardnn_importer.h"
#include "service/engine/importers/pipedream_importer.h"
#include "service/engine/importers/wfcommons_importer.h"

namespace placement::engine::importers {

const std::vector<std::string>& ImportFormats() {
  static const auto* formats =
      new std::vector<std::string>{"msr", "pipedream", "onnx", "chakra", "wfcommons", "pardnn"};
  return *formats;
}

absl::StatusOr<v1::PlaceRequest> Import(absl::string_view format, absl::string_view path,
                                        const ImportOptions& options) {
  if (format == "msr") return ImportMsr(path, options);
  if (format == "pipedream") return ImportPipeDream(path, options);
  if (format == "onnx") return ImportOnnx(path, options);
  if (format == "chakra") return ImportChakra(path, options);
  if (format == "wfcommons") return ImportWfCommons(path, options);
  if (format == "pardnn") return ImportParDnn(path, options);
  return absl::InvalidArgumentError(absl::StrCat("unknown format '", format, "' (expected one of ",
                                                 absl::StrJoin(ImportFormats(), ", "), ")"));
}

}  // namespace placement::engine::importers
