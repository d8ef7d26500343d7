#include "service/importers/importers.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "service/importers/chakra_importer.h"
#include "service/importers/msr_importer.h"
#include "service/importers/onnx_importer.h"
#include "service/importers/pardnn_importer.h"
#include "service/importers/pipedream_importer.h"
#include "service/importers/wfcommons_importer.h"

namespace placement::importers {

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

}  // namespace placement::importers
