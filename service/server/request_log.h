// request_log.h — the server's log: one line per request, plus lifecycle lines, on stderr.
//
// Lines are logfmt (key=value), prefixed by a UTC timestamp, written with one write() each so that
// concurrent lines never interleave:
//   2025-01-02T03:04:05.678Z rpc method=Place digest=1a2b3c4d cache=HIT queue_ms=0.000
//       solve_ms=12.345 total_ms=0.612 status=OK
//   2025-01-02T03:04:05.678Z listening on 127.0.0.1:50051
// Error messages and every caller-supplied string (operation names) are quoted, escaped (no caller can
// end a line or forge a field) and truncated (kMaxCallerText), and the tenant is only set once the
// caller is authenticated.
//
// Example:
//   RequestLog log({.enabled = true});
//   log.Rpc({.method = Method::kPlace, .digest = digest, .code = absl::StatusCode::kOk});
//   LogLine("listening on 0.0.0.0:50051");
#ifndef PLACEMENT_SERVICE_SERVER_REQUEST_LOG_H_
#define PLACEMENT_SERVICE_SERVER_REQUEST_LOG_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "placement/v1/placement.pb.h"
#include "service/core/log_line.h"
#include "service/server/service_metrics.h"

namespace placement::server {

// Longest caller-supplied string logged (bytes of input; the rest is cut with its length noted).
inline constexpr size_t kMaxCallerText = 256;

struct RpcLogEntry {
  Method method = Method::kPlace;
  std::string digest;     // request_digest (only a prefix is logged)
  std::string operation;  // operation name, for the operation RPCs
  std::string tenant;     // the authenticated tenant ("" without authentication: not logged)
  v1::CacheResult cache = v1::CACHE_RESULT_UNSPECIFIED;
  absl::Duration queue_time;
  absl::Duration solve_time;
  absl::Duration total_time;
  absl::StatusCode code = absl::StatusCode::kOk;
  std::string message;  // error message (truncated when logged)
};

// Lifecycle lines go through the same writer as the core's (service/core/log_line.h).
using core::LogLine;

// Formats an entry as it is logged (without the timestamp); exposed for tests.
std::string FormatRpcLogEntry(const RpcLogEntry& entry);

class RequestLog {
 public:
  struct Options {
    bool enabled = true;
  };
  explicit RequestLog(Options options) : options_(options) {}
  void Rpc(const RpcLogEntry& entry) const;

 private:
  const Options options_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVICE_SERVER_REQUEST_LOG_H_
