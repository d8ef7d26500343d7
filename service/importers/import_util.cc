#include "service/importers/import_util.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "service/engine/io/message_io.h"

namespace placement::importers {

using nlohmann::json;

absl::StatusOr<int64_t> ToIntegerUnits(double value, double scale) {
  const double scaled = value * scale;
  if (!std::isfinite(scaled)) {
    return absl::InvalidArgumentError(absl::StrCat("value ", value, " is not a finite number"));
  }
  if (scaled < 0) return absl::InvalidArgumentError(absl::StrCat("value ", value, " is negative"));
  // Keep a margin below INT64_MAX so sums of a few values cannot overflow either.
  if (scaled > 1e18) return absl::InvalidArgumentError(absl::StrCat("value ", value, " is too large"));
  return static_cast<int64_t>(std::llround(scaled));
}

absl::Status WithContext(const absl::Status& status, absl::string_view where) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(where, ": ", status.message()));
}

absl::Status FileError(absl::string_view file, int64_t line, absl::string_view message) {
  if (line > 0) return absl::InvalidArgumentError(absl::StrCat(file, ":", line, ": ", message));
  return absl::InvalidArgumentError(absl::StrCat(file, ": ", message));
}

std::string UniqueNames::Make(absl::string_view wanted) {
  std::string base(wanted.empty() ? absl::string_view("op") : wanted);
  int& uses = uses_[base];
  ++uses;
  if (uses == 1) return base;
  // The suffixed name may itself collide with a real name seen later or earlier; keep counting.
  while (true) {
    std::string candidate = absl::StrCat(base, "#", uses);
    int& candidate_uses = uses_[candidate];
    if (candidate_uses == 0) {
      candidate_uses = 1;
      return candidate;
    }
    ++uses;
  }
}

std::vector<absl::string_view> SplitLines(absl::string_view text) {
  std::vector<absl::string_view> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == absl::string_view::npos) end = text.size();
    absl::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    start = end + 1;
  }
  return lines;
}

absl::StatusOr<std::string> ReadInputFile(absl::string_view path) {
  return engine::ReadFileBytes(path);
}

bool LooksLikeTar(absl::string_view bytes) {
  return bytes.size() >= 512 && bytes.substr(257, 5) == "ustar";
}

absl::StatusOr<std::string> ExtractFromTar(absl::string_view path, absl::string_view bytes,
                                           absl::string_view suffix) {
  size_t offset = 0;
  while (offset + 512 <= bytes.size()) {
    const absl::string_view header = bytes.substr(offset, 512);
    if (header.find_first_not_of('\0') == absl::string_view::npos) break;  // end-of-archive block
    std::string name(header.substr(0, 100).data(), strnlen(header.data(), 100));
    const absl::string_view prefix = header.substr(345, 155);
    if (header.substr(257, 5) == "ustar" && prefix[0] != '\0') {
      name = absl::StrCat(std::string(prefix.data(), strnlen(prefix.data(), 155)), "/", name);
    }
    // Size: octal ASCII in 12 bytes (GNU base-256 for huge files is not needed here).
    uint64_t size = 0;
    for (char c : header.substr(124, 12)) {
      if (c < '0' || c > '7') {
        if (c == ' ' || c == '\0') continue;
        return absl::InvalidArgumentError(absl::StrCat(path, ": corrupt tar header at byte ", offset));
      }
      size = size * 8 + static_cast<uint64_t>(c - '0');
    }
    const char type = header[156];
    const size_t data = offset + 512;
    if (data + size > bytes.size()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": truncated tar member '", name, "'"));
    }
    const bool regular = type == '0' || type == '\0';
    const absl::string_view base = absl::string_view(name).substr(name.rfind('/') + 1);
    if (regular && !(base.size() >= 2 && base.substr(0, 2) == "._") &&
        (suffix.empty() || absl::EndsWith(name, suffix))) {
      return std::string(bytes.substr(data, size));
    }
    offset = data + (size + 511) / 512 * 512;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": tar archive holds no file ending in '", suffix, "'"));
}

absl::StatusOr<json> ParseJson(absl::string_view file, absl::string_view text) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    // e.byte is 1-based; turn it into line:column for people.
    const size_t byte = e.byte == 0 ? 0 : std::min<size_t>(e.byte - 1, text.size());
    int64_t line = 1;
    size_t line_start = 0;
    for (size_t i = 0; i < byte; ++i) {
      if (text[i] == '\n') {
        ++line;
        line_start = i + 1;
      }
    }
    return absl::InvalidArgumentError(absl::StrCat(file, ":", line, ":", byte - line_start + 1,
                                                   ": invalid JSON: ", e.what()));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": invalid JSON: ", e.what()));
  }
}

absl::StatusOr<json> ParseJsonFile(absl::string_view path) {
  absl::StatusOr<std::string> text = ReadInputFile(path);
  if (!text.ok()) return text.status();
  return ParseJson(path, *text);
}

namespace {
const char* TypeName(const json& value) { return value.type_name(); }
}  // namespace

absl::Status JsonContext::Error(PathFn where, absl::string_view field,
                                absl::string_view problem) const {
  std::string path = where();
  if (!field.empty()) absl::StrAppend(&path, path.empty() ? "" : ".", field);
  return absl::InvalidArgumentError(
      absl::StrCat(file_, ": JSON path ", path.empty() ? "(root)" : path, ": ", problem));
}

const json* JsonContext::Find(const json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

absl::StatusOr<double> JsonContext::Number(const json& object, const char* key,
                                           PathFn where) const {
  if (!object.is_object()) return Error(where, "", absl::StrCat("expected an object, found ",
                                                                TypeName(object)));
  const json* value = Find(object, key);
  if (value == nullptr) return Error(where, key, "missing");
  if (value->is_boolean()) return value->get<bool>() ? 1.0 : 0.0;
  if (!value->is_number()) {
    return Error(where, key, absl::StrCat("expected a number, found ", TypeName(*value)));
  }
  return value->get<double>();
}

absl::StatusOr<int64_t> JsonContext::Integer(const json& object, const char* key,
                                             PathFn where) const {
  if (!object.is_object()) return Error(where, "", absl::StrCat("expected an object, found ",
                                                                TypeName(object)));
  const json* value = Find(object, key);
  if (value == nullptr) return Error(where, key, "missing");
  if (value->is_number_integer()) return value->get<int64_t>();
  if (value->is_number_float()) {
    const double d = value->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) {
      return static_cast<int64_t>(d);
    }
  }
  return Error(where, key, absl::StrCat("expected an integer, found ", value->dump()));
}

absl::StatusOr<std::string> JsonContext::String(const json& object, const char* key,
                                                PathFn where) const {
  if (!object.is_object()) return Error(where, "", absl::StrCat("expected an object, found ",
                                                                TypeName(object)));
  const json* value = Find(object, key);
  if (value == nullptr) return Error(where, key, "missing");
  if (!value->is_string()) {
    return Error(where, key, absl::StrCat("expected a string, found ", TypeName(*value)));
  }
  return value->get<std::string>();
}

absl::StatusOr<const json*> JsonContext::Array(const json& object, const char* key,
                                               PathFn where) const {
  if (!object.is_object()) return Error(where, "", absl::StrCat("expected an object, found ",
                                                                TypeName(object)));
  const json* value = Find(object, key);
  if (value == nullptr) return Error(where, key, "missing");
  if (!value->is_array()) {
    return Error(where, key, absl::StrCat("expected an array, found ", TypeName(*value)));
  }
  return value;
}

absl::StatusOr<const json*> JsonContext::Object(const json& object, const char* key,
                                                PathFn where) const {
  if (!object.is_object()) return Error(where, "", absl::StrCat("expected an object, found ",
                                                                TypeName(object)));
  const json* value = Find(object, key);
  if (value == nullptr) return Error(where, key, "missing");
  if (!value->is_object()) {
    return Error(where, key, absl::StrCat("expected an object, found ", TypeName(*value)));
  }
  return value;
}

absl::StatusOr<double> JsonContext::NumberOr(const json& object, const char* key, double fallback,
                                             PathFn where) const {
  const json* value = Find(object, key);
  if (value == nullptr) return fallback;
  if (!value->is_number()) {
    return Error(where, key, absl::StrCat("expected a number, found ", TypeName(*value)));
  }
  return value->get<double>();
}

absl::StatusOr<bool> JsonContext::BoolOr(const json& object, const char* key, bool fallback,
                                         PathFn where) const {
  const json* value = Find(object, key);
  if (value == nullptr) return fallback;
  if (value->is_boolean()) return value->get<bool>();
  if (value->is_number()) return value->get<double>() != 0;
  return Error(where, key, absl::StrCat("expected a boolean, found ", TypeName(*value)));
}

std::string IndexPath(absl::string_view prefix, size_t index) {
  return absl::StrCat(prefix, "[", index, "]");
}

v1::PlaceRequest MakeRequest(v1::Graph graph, v1::Cluster cluster) {
  v1::PlaceRequest request;
  *request.mutable_graph() = std::move(graph);
  *request.mutable_cluster() = std::move(cluster);
  return request;
}

}  // namespace placement::importers
