#include "client/progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace placement::client {

bool ProgressBar::Enabled(std::FILE* stream, absl::string_view mode) {
  if (mode == "always") return true;
  if (mode == "never") return false;
  return isatty(fileno(stream)) != 0;
}

std::string ProgressBar::Render(const v1::OperationProgress& progress, int width) {
  const double fraction = std::clamp(progress.fraction(), 0.0, 1.0);
  const int filled = static_cast<int>(std::lround(fraction * width));
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(width - filled), '-');
  std::string line = absl::StrFormat("[%s] %3d%% %s", bar, static_cast<int>(fraction * 100),
                                     progress.stage().empty() ? "queued" : progress.stage());
  if (progress.best_makespan_ns() > 0) {
    absl::StrAppendFormat(&line, "  best %.3f ms", progress.best_makespan_ns() / 1e6);
  }
  return line;
}

void ProgressBar::Update(const v1::OperationProgress& progress) {
  if (!enabled_) return;
  std::string line = Render(progress);
  if (line == last_) return;
  // Pad with spaces so a shorter line fully covers a longer previous one.
  const size_t width = std::max(line.size(), last_.size());
  std::fprintf(stream_, "\r%-*s", static_cast<int>(width), line.c_str());
  std::fflush(stream_);
  last_ = std::move(line);
  drawn_ = true;
}

void ProgressBar::Finish() {
  if (!enabled_ || !drawn_) return;
  std::fprintf(stream_, "\r%*s\r", static_cast<int>(last_.size()), "");
  std::fflush(stream_);
  drawn_ = false;
  last_.clear();
}

}  // namespace placement::client
