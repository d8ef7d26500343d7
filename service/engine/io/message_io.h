// message_io.h — reading and writing requests, placements and other messages as files.
//
// Formats, chosen by file name: `*.json` (protobuf JSON mapping), `*.json.gz` (the same, gzip-compressed),
// `*.pb` (binary protobuf; `*.pb.gz` also accepted). "-" means standard input / output (JSON).
// Errors name the file and, for JSON, what the parser reported.
//
// Example:
//   absl::StatusOr<v1::PlaceRequest> request = ReadMessageFile<v1::PlaceRequest>("bert.json.gz");
//   absl::Status written = WriteMessageFile(*request, "bert.pb");
//   std::string json = MessageToJson(placement);  // multi-line, proto field names
#ifndef PLACEMENT_SERVICE_ENGINE_IO_MESSAGE_IO_H_
#define PLACEMENT_SERVICE_ENGINE_IO_MESSAGE_IO_H_

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/message.h"

namespace placement::engine {

// Whole file contents, transparently gunzipped when the data starts with the gzip magic bytes.
absl::StatusOr<std::string> ReadFileBytes(absl::string_view path);
// Writes `data` to `path`, gzip-compressed when the path ends in ".gz".
absl::Status WriteFileBytes(absl::string_view path, absl::string_view data);

// Parses `path` into `message` by its extension (see above). JSON accepts unknown fields: no.
absl::Status ReadMessageFile(absl::string_view path, google::protobuf::Message& message);
template <typename T>
absl::StatusOr<T> ReadMessageFile(absl::string_view path) {
  T message;
  absl::Status status = ReadMessageFile(path, message);
  if (!status.ok()) return status;
  return message;
}

// Writes `message` to `path` by its extension (JSON for ".json"/".json.gz"/"-", binary for ".pb[.gz]").
absl::Status WriteMessageFile(const google::protobuf::Message& message, absl::string_view path);

// Protobuf JSON with proto field names (e.g. "compute_ns"), indented, enums as names, int64 as strings per
// the protobuf JSON mapping; `compact` = one line.
std::string MessageToJson(const google::protobuf::Message& message, bool compact = false);
absl::Status JsonToMessage(absl::string_view json, google::protobuf::Message& message);

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_IO_MESSAGE_IO_H_
