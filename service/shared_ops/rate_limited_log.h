// rate_limited_log.h — log lines about recurring events (Redis errors, fallbacks, takeovers) that say
// each kind of event once per interval instead of once per occurrence.
//
// The first line of a kind is written at once; further lines of that kind within `interval` are
// counted, and the next line written says how many were left out. Time comes from a Clock, so
// tests move it by hand.
//
// Example:
//   RateLimitedLog log(core::LogLine, absl::Minutes(1));
//   log.Log("oom", "Redis is out of memory: ...");   // written
//   log.Log("oom", "Redis is out of memory: ...");   // counted
//   ... a minute later: "Redis is out of memory: ... (1 more like it in the last 1m)"
#ifndef PLACEMENT_SERVICE_SHARED_OPS_RATE_LIMITED_LOG_H_
#define PLACEMENT_SERVICE_SHARED_OPS_RATE_LIMITED_LOG_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "service/clock/clock.h"

namespace placement::shared_ops {

class RateLimitedLog {
 public:
  using Sink = std::function<void(absl::string_view line)>;

  // `sink` null = lines go nowhere (still counted); `clock` null = Clock::Real().
  RateLimitedLog(Sink sink, absl::Duration interval, const Clock* clock = nullptr);

  // Writes `line` unless a line of `kind` was written less than the interval ago. Thread-safe.
  // Returns whether it was written.
  bool Log(absl::string_view kind, absl::string_view line) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Kind {
    absl::Time last_written = absl::InfinitePast();
    int64_t left_out = 0;
  };

  const Sink sink_;
  const absl::Duration interval_;
  const Clock* const clock_;
  absl::Mutex mu_;
  // Kinds are a fixed set of names in the code, so this stays small.
  absl::flat_hash_map<std::string, Kind> kinds_ ABSL_GUARDED_BY(mu_);
};

}  // namespace placement::shared_ops

#endif  // PLACEMENT_SERVICE_SHARED_OPS_RATE_LIMITED_LOG_H_
