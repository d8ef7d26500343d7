// `placement_offline export`: a placement in formats other tools read.
//
//   placement_offline export --request=FILE --placement=FILE --to=dot|csv|pardnn [--out=FILE]
//   placement_offline export --request=FILE --to=pardnn --out=DIR
//
// --placement takes a Placement, a PlaceResponse or an EvaluateResponse (JSON or binary), e.g. the
// output of `placement_offline place`. The text goes to --out (gzip-compressed when it ends in .gz) or
// to standard output. Without --placement, --to=pardnn writes the request's graph as the ParDNN
// reference's input folder into DIR (created if missing; see ExportParDnnInputs in exporters.h), which
// bench/reference/ feeds to the published code.
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "placement/v1/placement_service.pb.h"
#include "service/importers/exporters.h"
#include "service/engine/io/message_io.h"
#include "service/engine/io/placement_file.h"
#include "service/offline/offline_commands.h"

namespace placement::offline {
namespace {

int Usage(const std::string& message) {
  std::fprintf(stderr,
               "export: %s\nusage: placement_offline export --request=FILE --placement=FILE "
               "--to=%s [--out=FILE]\n       placement_offline export --request=FILE --to=pardnn "
               "--out=DIR   (the graph as ParDNN's input folder)\n",
               message.c_str(), absl::StrJoin(importers::ExportFormats(), "|").c_str());
  return 2;
}

// Writes the reference's input files for the request's graph into `dir`.
int ExportParDnnFolder(const v1::PlaceRequest& request, const std::string& dir) {
  absl::StatusOr<std::vector<importers::ExportedFile>> files =
      importers::ExportParDnnInputs(request);
  if (!files.ok()) return Fail(files.status());
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return Fail(absl::UnavailableError(dir + ": " + error.message()));
  for (const importers::ExportedFile& file : *files) {
    absl::Status written = engine::WriteFileBytes(dir + "/" + file.name, file.text);
    if (!written.ok()) return Fail(written);
  }
  return 0;
}

}  // namespace

int RunExport(const std::vector<std::string>& args) {
  if (!args.empty()) return Usage("unexpected argument '" + args[0] + "'");
  const std::string request_path = absl::GetFlag(FLAGS_request);
  const std::string placement_path = absl::GetFlag(FLAGS_placement);
  const std::string to = absl::GetFlag(FLAGS_to);
  if (request_path.empty()) return Usage("--request is required");
  bool known = false;
  for (const std::string& format : importers::ExportFormats()) known |= format == to;
  if (!known) return Usage(to.empty() ? "--to is required" : "unknown format '" + to + "'");
  const bool input_folder = to == "pardnn" && placement_path.empty();
  if (input_folder && (absl::GetFlag(FLAGS_out).empty() || absl::GetFlag(FLAGS_out) == "-")) {
    return Usage("--to=pardnn without --placement writes an input folder: --out=DIR is required");
  }
  if (placement_path.empty() && !input_folder) return Usage("--placement is required");

  absl::StatusOr<v1::PlaceRequest> request = engine::ReadMessageFile<v1::PlaceRequest>(request_path);
  if (!request.ok()) return Fail(request.status());
  if (input_folder) return ExportParDnnFolder(*request, absl::GetFlag(FLAGS_out));
  absl::StatusOr<v1::Placement> placement = engine::ReadPlacementFile(placement_path);
  if (!placement.ok()) return Fail(placement.status());
  absl::StatusOr<std::string> text = importers::ExportPlacement(to, *request, *placement);
  if (!text.ok()) return Fail(text.status());
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty() || out == "-") {
    std::cout << *text;
    std::cout.flush();
    return std::cout.good() ? 0 : Fail(absl::UnavailableError("writing standard output failed"));
  }
  absl::Status written = engine::WriteFileBytes(out, *text);
  return written.ok() ? 0 : Fail(written);
}

}  // namespace placement::offline
