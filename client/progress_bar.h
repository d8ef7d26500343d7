// progress_bar.h — a one-line progress bar for terminals (placementctl, while a job runs).
//
// Draws "\r[########------------]  40% mapping  best 12.345 ms" on a terminal stream, redrawing in place,
// and clears the line when done. Writes nothing when the stream is not a terminal (or when disabled), so
// scripts piping stderr see only errors.
//
// Example:
//   ProgressBar bar(stderr, ProgressBar::Enabled(stderr, "auto"));
//   bar.Update(op.metadata());
//   bar.Finish();
#ifndef PLACEMENT_CLIENT_PROGRESS_BAR_H_
#define PLACEMENT_CLIENT_PROGRESS_BAR_H_

#include <cstdio>
#include <string>

#include "absl/strings/string_view.h"
#include "placement/v1/operation.pb.h"

namespace placement::client {

class ProgressBar {
 public:
  // mode: "auto" (only if `stream` is a terminal), "always" or "never".
  static bool Enabled(std::FILE* stream, absl::string_view mode);

  ProgressBar(std::FILE* stream, bool enabled) : stream_(stream), enabled_(enabled) {}
  ~ProgressBar() { Finish(); }

  void Update(const v1::OperationProgress& progress);
  // Clears the line (once).
  void Finish();

  // The text of one frame, without the leading "\r" (exposed for tests).
  static std::string Render(const v1::OperationProgress& progress, int width = 30);

 private:
  std::FILE* stream_;
  bool enabled_;
  bool drawn_ = false;
  std::string last_;
};

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_PROGRESS_BAR_H_
