#include "service/shared_ops/rate_limited_log.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace placement::shared_ops {

RateLimitedLog::RateLimitedLog(Sink sink, absl::Duration interval, const Clock* clock)
    : sink_(std::move(sink)),
      interval_(interval),
      clock_(clock != nullptr ? clock : Clock::Real()) {}

bool RateLimitedLog::Log(absl::string_view kind, absl::string_view line) {
  const absl::Time now = clock_->Now();
  int64_t left_out = 0;
  {
    absl::MutexLock lock(&mu_);
    Kind& state = kinds_[kind];
    if (now - state.last_written < interval_) {
      ++state.left_out;
      return false;
    }
    state.last_written = now;
    left_out = state.left_out;
    state.left_out = 0;
  }
  if (sink_ == nullptr) return true;
  if (left_out == 0) {
    sink_(line);
  } else {
    sink_(absl::StrCat(line, " (", left_out, " more like it since the last such line)"));
  }
  return true;
}

}  // namespace placement::shared_ops
