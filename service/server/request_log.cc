#include "service/server/request_log.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace placement::server {
namespace {

constexpr size_t kDigestPrefix = 12;
constexpr size_t kMaxMessage = 300;

// Caller-supplied text as one logfmt value: quoted, every byte that could end the line or fake
// another field escaped (\n, \r, \", \\, other control bytes as \xNN), cut to `max_bytes` of input.
// A line of the log therefore always is one entry, whatever a caller sends.
std::string Quote(absl::string_view text, size_t max_bytes) {
  std::string out = "\"";
  for (char c : text.substr(0, max_bytes)) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (u < 0x20 || u == 0x7f) {
      absl::StrAppend(&out, absl::StrFormat("\\x%02x", u));
    } else {
      out.push_back(c);
    }
  }
  if (text.size() > max_bytes) absl::StrAppend(&out, "...(", text.size(), " bytes)");
  out.push_back('"');
  return out;
}

const char* CacheName(v1::CacheResult cache) {
  switch (cache) {
    case v1::HIT: return "HIT";
    case v1::MISS: return "MISS";
    case v1::COALESCED: return "COALESCED";
    default: return "-";
  }
}

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

}  // namespace

std::string FormatRpcLogEntry(const RpcLogEntry& entry) {
  std::string line = absl::StrCat("rpc method=", MethodName(entry.method));
  // Tenant names are checked to be [A-Za-z0-9._-] when the tokens file is read: safe to log as is.
  if (!entry.tenant.empty()) absl::StrAppend(&line, " tenant=", entry.tenant);
  if (!entry.digest.empty()) {
    absl::StrAppend(&line, " digest=", absl::string_view(entry.digest).substr(0, kDigestPrefix));
  }
  // Operation names come from the caller (and are only recorded once it is authenticated).
  if (!entry.operation.empty()) {
    absl::StrAppend(&line, " operation=", Quote(entry.operation, kMaxCallerText));
  }
  if (entry.cache != v1::CACHE_RESULT_UNSPECIFIED) {
    absl::StrAppend(&line, " cache=", CacheName(entry.cache));
  }
  absl::StrAppend(&line, absl::StrFormat(" queue_ms=%.3f solve_ms=%.3f total_ms=%.3f",
                                         Ms(entry.queue_time), Ms(entry.solve_time),
                                         Ms(entry.total_time)));
  absl::StrAppend(&line, " status=", absl::StatusCodeToString(entry.code));
  if (!entry.message.empty()) absl::StrAppend(&line, " error=", Quote(entry.message, kMaxMessage));
  return line;
}

void RequestLog::Rpc(const RpcLogEntry& entry) const {
  if (!options_.enabled) return;
  LogLine(FormatRpcLogEntry(entry));
}

}  // namespace placement::server
