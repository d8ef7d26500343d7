// report.h — a self-contained HTML report of simulated placements, for people who want to *see* a
// schedule: a Gantt chart per device, memory over time against capacity, a summary and, when several
// placements of one request are shown, the comparison table of `placement_offline compare`.
//
// Every number comes from the engine's simulator (api.md §2): each placement is re-simulated with its
// timeline recorded (SimOptions::record_memory_intervals / record_transfers), so the report shows
// exactly what the metrics of a response were computed from. The HTML has no external resources (no
// scripts, fonts or style sheets from elsewhere): inline CSS and inline SVG only, so it can be mailed or
// attached to a ticket.
//
// Huge graphs: the number of SVG elements is bounded (see ReportOptions). Above `max_drawn_ops` ops a
// run's Gantt lanes show per-pixel-column activity (bar height = busy fraction, colour = the op type
// with most busy time in the column) instead of one bar per op; only the `max_drawn_transfers` largest
// transfers are drawn; memory curves are sampled per pixel column keeping the column's maximum, so peaks
// are never lost. The summary tables always count everything.
//
// Example:
//   absl::StatusOr<Model> model = BuildModel(request);
//   std::vector<ReportRun> runs = {{"pardnn", *placement}};
//   absl::StatusOr<std::string> html = RenderHtmlReport(*model, runs, ReportOptions());
#ifndef PLACEMENT_SERVICE_REPORT_REPORT_H_
#define PLACEMENT_SERVICE_REPORT_REPORT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "placement/v1/placement.pb.h"
#include "service/engine/model/model.h"
#include "service/engine/sim/simulator.h"

namespace placement::report {

struct ReportOptions {
  // Shown as the page title and heading.
  std::string title = "Placement report";
  // Shown under the heading (e.g. the request file name).
  std::string subtitle;
  // Width of every chart in CSS pixels; the time axis gets this minus the lane labels.
  int32_t chart_width_px = 1200;
  // A run with more ops than this draws aggregated activity columns instead of one bar per op.
  int32_t max_drawn_ops = 5000;
  // At most this many transfers are drawn per run (the largest by bytes, ties by earlier start).
  int32_t max_drawn_transfers = 1000;
};

// One placement to show.
struct ReportRun {
  // Heading of the run's section, e.g. the algorithm name or "server".
  std::string label;
  // `device` in the request's op order; provenance (algorithm, solve time) is shown when present.
  // Outcome and metrics are recomputed from the simulator, so a placement read from a file without
  // metrics is fine.
  v1::Placement placement;
  // Non-empty when the algorithm failed: the run appears in the comparison table only.
  std::string error;
};

// The whole HTML document. INVALID_ARGUMENT when a run's device list does not have one entry per op or
// names a device outside the cluster. The comparison table is included when there are two or more runs.
absl::StatusOr<std::string> RenderHtmlReport(const engine::Model& model,
                                             const std::vector<ReportRun>& runs,
                                             const ReportOptions& options);

// ---- Building blocks, exposed for tests ----

// `text` with &, <, >, " and ' replaced by entities: safe in element content and quoted attributes.
std::string EscapeHtml(absl::string_view text);

// Memory in use on each device over time, as steps: (time, bytes in use from that time on), one entry
// per distinct time at which usage changes, all changes at one time applied together (the simulator's
// half-open rule). Built from `result.memory_intervals` (record_memory_intervals must have been on).
std::vector<std::vector<std::pair<int64_t, int64_t>>> MemorySteps(const engine::Model& model,
                                                                  const engine::SimResult& result);

// The canonical assignment of `placement` (device per canonical op id); INVALID_ARGUMENT when it does
// not fit the model.
absl::StatusOr<engine::Assignment> AssignmentOf(const engine::Model& model,
                                                const v1::Placement& placement);

}  // namespace placement::report

#endif  // PLACEMENT_SERVICE_REPORT_REPORT_H_
