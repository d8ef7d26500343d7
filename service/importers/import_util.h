// import_util.h — small pieces every importer needs: unit conversion to integer ns / bytes, unique op
// names, line splitting with line numbers, and JSON access that reports the JSON path on error.
//
// Example:
//   ASSIGN_OR_RETURN-style use (Abseil 20220623 has no status macros, so importers spell it out):
//   absl::StatusOr<nlohmann::json> doc = ParseJsonFile(path);
//   if (!doc.ok()) return doc.status();
//   JsonContext ctx{path};
//   absl::StatusOr<double> ms = ctx.Number((*doc)["nodes"][3], "fpgaLatency", [] { return "nodes[3]"; });
#ifndef PLACEMENT_SERVICE_ENGINE_IMPORTERS_IMPORT_UTIL_H_
#define PLACEMENT_SERVICE_ENGINE_IMPORTERS_IMPORT_UTIL_H_

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "placement/v1/placement.pb.h"

namespace placement::importers {

// ---- Units. Every source value becomes an integer; NaN, infinities and negative values are errors
// (the caller names the place), values are rounded to the nearest integer.
absl::StatusOr<int64_t> ToIntegerUnits(double value, double scale);
inline absl::StatusOr<int64_t> MillisecondsToNs(double ms) { return ToIntegerUnits(ms, 1e6); }
inline absl::StatusOr<int64_t> MicrosecondsToNs(double us) { return ToIntegerUnits(us, 1e3); }
inline absl::StatusOr<int64_t> SecondsToNs(double s) { return ToIntegerUnits(s, 1e9); }
inline absl::StatusOr<int64_t> ToBytes(double bytes) { return ToIntegerUnits(bytes, 1.0); }

// Prefixes a status message with where it happened ("file: where: message"), keeping the code.
absl::Status WithContext(const absl::Status& status, absl::string_view where);
// INVALID_ARGUMENT "file:line: message" (line > 0) or "file: message".
absl::Status FileError(absl::string_view file, int64_t line, absl::string_view message);

// Hands out op names that are unique within one graph: the first "x" stays "x", later ones become "x#2",
// "x#3", ... (sources such as ONNX allow empty or repeated node names).
class UniqueNames {
 public:
  std::string Make(absl::string_view wanted);

 private:
  absl::flat_hash_map<std::string, int> uses_;
};

// Splits `text` into lines (handles \n and \r\n); `line_number` of lines[i] is i + 1.
std::vector<absl::string_view> SplitLines(absl::string_view text);

// Reads a whole file through message_io's ReadFileBytes (gunzips transparently).
absl::StatusOr<std::string> ReadInputFile(absl::string_view path);

// True when `bytes` is a POSIX tar archive (ustar magic at offset 257).
bool LooksLikeTar(absl::string_view bytes);
// The contents of the first regular file in the tar archive `bytes` whose name ends in `suffix`
// (any file when `suffix` is empty). `path` names the archive in errors.
absl::StatusOr<std::string> ExtractFromTar(absl::string_view path, absl::string_view bytes,
                                           absl::string_view suffix);

// ---- JSON (nlohmann; exceptions never escape these helpers).
// Parses JSON text; errors name the file, line and column.
absl::StatusOr<nlohmann::json> ParseJson(absl::string_view file, absl::string_view text);
absl::StatusOr<nlohmann::json> ParseJsonFile(absl::string_view path);

// Typed field access with errors of the form "FILE: JSON path nodes[3].fpgaLatency: expected a number".
// `where` builds the JSON path of `object` only when an error is reported.
using PathFn = absl::FunctionRef<std::string()>;
class JsonContext {
 public:
  explicit JsonContext(absl::string_view file) : file_(file) {}

  absl::Status Error(PathFn where, absl::string_view field, absl::string_view problem) const;

  // Required members.
  absl::StatusOr<double> Number(const nlohmann::json& object, const char* key, PathFn where) const;
  absl::StatusOr<int64_t> Integer(const nlohmann::json& object, const char* key, PathFn where) const;
  absl::StatusOr<std::string> String(const nlohmann::json& object, const char* key,
                                     PathFn where) const;
  absl::StatusOr<const nlohmann::json*> Array(const nlohmann::json& object, const char* key,
                                              PathFn where) const;
  absl::StatusOr<const nlohmann::json*> Object(const nlohmann::json& object, const char* key,
                                               PathFn where) const;
  // Optional member: nullptr when absent or null.
  static const nlohmann::json* Find(const nlohmann::json& object, const char* key);
  // Optional number: `fallback` when absent/null, error when present but not a number.
  absl::StatusOr<double> NumberOr(const nlohmann::json& object, const char* key, double fallback,
                                  PathFn where) const;
  // Booleans also accept 0/1 (msr files use both).
  absl::StatusOr<bool> BoolOr(const nlohmann::json& object, const char* key, bool fallback,
                              PathFn where) const;

  const std::string& file() const { return file_; }

 private:
  std::string file_;
};

// Builds "prefix[index]" for JSON paths.
std::string IndexPath(absl::string_view prefix, size_t index);

// Request assembly: wraps `graph` with `cluster` (moved in).
v1::PlaceRequest MakeRequest(v1::Graph graph, v1::Cluster cluster);

}  // namespace placement::importers

#endif  // PLACEMENT_SERVICE_ENGINE_IMPORTERS_IMPORT_UTIL_H_
