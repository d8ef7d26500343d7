// log_line.h — the service's one way to write a line to its log (stderr), shared by the core and the
// server (whose request log, server/request_log.h, is built on it).
//
// Each line is prefixed by a UTC timestamp and written with one write(), so concurrent lines never
// interleave:
//   2025-01-02T03:04:05.678Z listening on 127.0.0.1:50051
//
// Example:
//   LogLine(absl::StrCat("cache: ignoring a stored result for digest=", digest));
#ifndef PLACEMENT_SERVICE_CORE_LOG_LINE_H_
#define PLACEMENT_SERVICE_CORE_LOG_LINE_H_

#include "absl/strings/string_view.h"

namespace placement::core {

// Writes one line (timestamp + text + newline) to stderr atomically.
void LogLine(absl::string_view text);

}  // namespace placement::core

#endif  // PLACEMENT_SERVICE_CORE_LOG_LINE_H_
