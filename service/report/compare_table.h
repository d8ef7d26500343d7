// compare_table.h — the table of `placement_offline compare`: one row per algorithm, all scored by the
// same simulator (through Solve), formatted as plain text (default), JSON, CSV or Markdown.
//
// Columns: algorithm (with the winner for `auto`), feasible, makespan, makespan / lower bound, peak memory
// per device as % of its capacity, transfer bytes, solve time. Text and Markdown use human units and mark
// the best feasible row with "*"; JSON and CSV carry exact integers (ns, bytes) for scripts (the
// benchmark in bench/compare reads the JSON).
//
// Example:
//   CompareReport report;
//   report.request = "bert.json";
//   report.rows.push_back(CompareRowFromPlacement("pardnn", placement));
//   std::cout << FormatCompareReport(report, CompareFormat::kText);
#ifndef PLACEMENT_SERVICE_REPORT_COMPARE_TABLE_H_
#define PLACEMENT_SERVICE_REPORT_COMPARE_TABLE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "placement/v1/placement.pb.h"

namespace placement::report {

struct CompareRow {
  std::string algorithm;  // as requested, e.g. "auto"
  std::string winner;     // provenance.winner: the member whose answer `auto` grew from, else empty
  // Non-empty when the algorithm failed; then only `algorithm` is meaningful.
  std::string error;
  bool feasible = false;
  std::string reason;  // why not feasible
  int64_t makespan_ns = 0;
  int64_t lower_bound_ns = 0;
  std::vector<int64_t> peak_memory_bytes;  // per device, cluster order
  std::vector<int64_t> capacity_bytes;     // per device, cluster order
  int64_t transfer_bytes = 0;
  int64_t solve_ns = 0;
  bool time_limited = false;
};

struct CompareReport {
  std::string request;  // file name or label
  int64_t num_ops = 0;
  int64_t num_edges = 0;
  std::vector<std::string> device_names;
  int64_t lower_bound_ns = 0;
  std::vector<CompareRow> rows;
};

enum class CompareFormat { kText, kJson, kCsv, kMarkdown };

// "text", "json", "csv", "markdown" (also "md"); INVALID_ARGUMENT otherwise.
absl::StatusOr<CompareFormat> ParseCompareFormat(std::string_view name);

// A row from a scored placement (Solve's result).
CompareRow CompareRowFromPlacement(std::string_view algorithm, const v1::Placement& placement);
// A row for an algorithm that failed.
CompareRow CompareRowFromError(std::string_view algorithm, std::string_view error);

// Index of the best row: feasible first, then smallest makespan, then earliest; -1 when no row has a
// result.
int32_t BestCompareRow(const CompareReport& report);

// The whole report; text and Markdown end with a newline, JSON is one object, CSV has a header line.
std::string FormatCompareReport(const CompareReport& report, CompareFormat format);


}  // namespace placement::report

#endif  // PLACEMENT_SERVICE_REPORT_COMPARE_TABLE_H_
