#include "service/report/compare_table.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "service/report/human_units.h"

namespace placement::report {
namespace {

// Above this many devices the text table shows max and mean instead of one figure per device.
constexpr size_t kMaxDevicesListed = 8;

double Percent(int64_t peak, int64_t capacity) {
  return capacity > 0 ? 100.0 * static_cast<double>(peak) / static_cast<double>(capacity) : 0.0;
}

std::string RatioText(const CompareRow& row) {
  if (row.lower_bound_ns <= 0) return "-";
  return absl::StrFormat("%.2f", static_cast<double>(row.makespan_ns) /
                                     static_cast<double>(row.lower_bound_ns));
}

std::string PeakMemoryText(const CompareRow& row) {
  const size_t n = std::min(row.peak_memory_bytes.size(), row.capacity_bytes.size());
  if (n == 0) return "-";
  if (n <= kMaxDevicesListed) {
    std::vector<std::string> cells;
    for (size_t d = 0; d < n; ++d) {
      cells.push_back(absl::StrFormat("%.0f%%", Percent(row.peak_memory_bytes[d], row.capacity_bytes[d])));
    }
    return absl::StrJoin(cells, " ");
  }
  double max = 0.0, sum = 0.0;
  for (size_t d = 0; d < n; ++d) {
    const double p = Percent(row.peak_memory_bytes[d], row.capacity_bytes[d]);
    max = std::max(max, p);
    sum += p;
  }
  return absl::StrFormat("max %.0f%% mean %.0f%%", max, sum / static_cast<double>(n));
}

std::string AlgorithmText(const CompareRow& row, bool best) {
  std::string text = row.algorithm;
  if (!row.winner.empty()) absl::StrAppend(&text, " (", row.winner, ")");
  if (best) absl::StrAppend(&text, " *");
  return text;
}

std::string FeasibleText(const CompareRow& row) {
  if (!row.error.empty()) return "error";
  return row.feasible ? "yes" : "no";
}

std::string SolveText(const CompareRow& row) {
  std::string text = FormatDurationNs(row.solve_ns);
  if (row.time_limited) absl::StrAppend(&text, " (limit)");
  return text;
}

// The cells of one row in table order (text and Markdown).
std::vector<std::string> Cells(const CompareRow& row, bool best) {
  if (!row.error.empty()) return {AlgorithmText(row, false), "error", "-", "-", "-", "-", "-"};
  return {AlgorithmText(row, best),      FeasibleText(row),         FormatDurationNs(row.makespan_ns),
          RatioText(row),                PeakMemoryText(row),       FormatBytes(row.transfer_bytes),
          SolveText(row)};
}

const std::vector<std::string>& Header() {
  static const auto* header = new std::vector<std::string>{
      "algorithm", "feasible", "makespan", "makespan/LB", "peak memory (% of capacity)", "transfer",
      "solve time"};
  return *header;
}
// Numbers are right-aligned.
constexpr bool kRightAligned[] = {false, false, true, true, false, true, true};

// Notes under the table: why rows failed or are infeasible.
std::vector<std::string> Notes(const CompareReport& report) {
  std::vector<std::string> notes;
  for (const CompareRow& row : report.rows) {
    if (!row.error.empty()) {
      notes.push_back(absl::StrCat(row.algorithm, ": ", row.error));
    } else if (!row.feasible && !row.reason.empty()) {
      notes.push_back(absl::StrCat(row.algorithm, ": ", row.reason));
    }
  }
  return notes;
}

std::string Summary(const CompareReport& report) {
  return absl::StrCat(report.num_ops, " ops, ", report.num_edges, " edges, ", report.device_names.size(),
                      " devices (", absl::StrJoin(report.device_names, ", "),
                      "); lower bound ", FormatDurationNs(report.lower_bound_ns));
}

std::string FormatText(const CompareReport& report) {
  const int32_t best = BestCompareRow(report);
  std::vector<std::vector<std::string>> table{Header()};
  for (size_t i = 0; i < report.rows.size(); ++i) {
    table.push_back(Cells(report.rows[i], static_cast<int32_t>(i) == best));
  }
  std::vector<size_t> width(Header().size(), 0);
  for (const auto& line : table) {
    for (size_t c = 0; c < line.size(); ++c) width[c] = std::max(width[c], line[c].size());
  }
  std::string out = absl::StrCat("request: ", report.request, "\n", Summary(report), "\n\n");
  for (const auto& line : table) {
    std::string text;
    for (size_t c = 0; c < line.size(); ++c) {
      if (c > 0) text += "  ";
      const std::string pad(width[c] - line[c].size(), ' ');
      absl::StrAppend(&text, kRightAligned[c] ? pad : "", line[c], kRightAligned[c] ? "" : pad);
    }
    // No trailing blanks: golden files and diffs stay clean.
    text.erase(text.find_last_not_of(' ') + 1);
    absl::StrAppend(&out, text, "\n");
  }
  if (best >= 0) absl::StrAppend(&out, "\n* best feasible (smallest simulated makespan)\n");
  const std::vector<std::string> notes = Notes(report);
  if (!notes.empty()) {
    absl::StrAppend(&out, best >= 0 ? "" : "\n");
    for (const std::string& note : notes) absl::StrAppend(&out, note, "\n");
  }
  return out;
}

std::string MarkdownEscape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

std::string FormatMarkdown(const CompareReport& report) {
  const int32_t best = BestCompareRow(report);
  std::string out = absl::StrCat("**", MarkdownEscape(report.request), "**: ", MarkdownEscape(Summary(report)),
                                 "\n\n| ", absl::StrJoin(Header(), " | "), " |\n|");
  for (bool right : kRightAligned) absl::StrAppend(&out, right ? "---:|" : "---|");
  out += "\n";
  for (size_t i = 0; i < report.rows.size(); ++i) {
    std::vector<std::string> cells = Cells(report.rows[i], static_cast<int32_t>(i) == best);
    for (std::string& cell : cells) cell = MarkdownEscape(cell);
    absl::StrAppend(&out, "| ", absl::StrJoin(cells, " | "), " |\n");
  }
  if (best >= 0) absl::StrAppend(&out, "\n\\* best feasible (smallest simulated makespan)\n");
  const std::vector<std::string> notes = Notes(report);
  if (!notes.empty()) {
    out += "\n";
    for (const std::string& note : notes) absl::StrAppend(&out, "- ", MarkdownEscape(note), "\n");
  }
  return out;
}

std::string JsonString(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          absl::StrAppendFormat(&out, "\\u%04x", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += "\"";
  return out;
}

std::string Percentages(const CompareRow& row, std::string_view separator) {
  std::vector<std::string> cells;
  const size_t n = std::min(row.peak_memory_bytes.size(), row.capacity_bytes.size());
  for (size_t d = 0; d < n; ++d) {
    cells.push_back(absl::StrFormat("%.1f", Percent(row.peak_memory_bytes[d], row.capacity_bytes[d])));
  }
  return absl::StrJoin(cells, std::string(separator));
}

std::string Ratio(const CompareRow& row) {
  if (row.lower_bound_ns <= 0) return "null";
  return absl::StrFormat("%.4f", static_cast<double>(row.makespan_ns) / static_cast<double>(row.lower_bound_ns));
}

std::string FormatJson(const CompareReport& report) {
  const int32_t best = BestCompareRow(report);
  std::vector<std::string> devices;
  for (const std::string& name : report.device_names) devices.push_back(JsonString(name));
  std::string out = absl::StrCat(
      "{\n  \"request\": ", JsonString(report.request), ",\n  \"ops\": ", report.num_ops,
      ",\n  \"edges\": ", report.num_edges, ",\n  \"devices\": [", absl::StrJoin(devices, ", "),
      "],\n  \"lower_bound_ns\": ", report.lower_bound_ns, ",\n  \"best\": ",
      best >= 0 ? JsonString(report.rows[best].algorithm) : "null", ",\n  \"rows\": [");
  for (size_t i = 0; i < report.rows.size(); ++i) {
    const CompareRow& row = report.rows[i];
    absl::StrAppend(&out, i == 0 ? "\n" : ",\n", "    {\"algorithm\": ", JsonString(row.algorithm));
    if (!row.error.empty()) {
      absl::StrAppend(&out, ", \"error\": ", JsonString(row.error), "}");
      continue;
    }
    absl::StrAppend(&out, ", \"winner\": ", JsonString(row.winner.empty() ? row.algorithm : row.winner),
                    ", \"feasible\": ", row.feasible ? "true" : "false",
                    ", \"makespan_ns\": ", row.makespan_ns, ", \"lower_bound_ns\": ", row.lower_bound_ns,
                    ", \"makespan_over_lower_bound\": ", Ratio(row),
                    ", \"peak_memory_percent\": [", Percentages(row, ", "),
                    "], \"peak_memory_bytes\": [", absl::StrJoin(row.peak_memory_bytes, ", "),
                    "], \"capacity_bytes\": [", absl::StrJoin(row.capacity_bytes, ", "),
                    "], \"transfer_bytes\": ", row.transfer_bytes, ", \"solve_ns\": ", row.solve_ns,
                    ", \"time_limited\": ", row.time_limited ? "true" : "false",
                    ", \"reason\": ", JsonString(row.reason), "}");
  }
  absl::StrAppend(&out, report.rows.empty() ? "]\n}\n" : "\n  ]\n}\n");
  return out;
}

std::string CsvField(std::string_view text) {
  if (text.find_first_of(",\"\n\r") == std::string_view::npos) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  out += "\"";
  return out;
}

std::string FormatCsv(const CompareReport& report) {
  std::string out =
      "algorithm,winner,feasible,makespan_ns,lower_bound_ns,makespan_over_lower_bound,"
      "peak_memory_percent,transfer_bytes,solve_ns,time_limited,error,reason\n";
  for (const CompareRow& row : report.rows) {
    if (!row.error.empty()) {
      absl::StrAppend(&out, CsvField(row.algorithm), ",,,,,,,,,,", CsvField(row.error), ",\n");
      continue;
    }
    const std::string ratio = Ratio(row);
    absl::StrAppend(&out, CsvField(row.algorithm), ",",
                    CsvField(row.winner.empty() ? row.algorithm : row.winner), ",",
                    row.feasible ? "true" : "false", ",", row.makespan_ns, ",", row.lower_bound_ns, ",",
                    ratio == "null" ? "" : ratio, ",", Percentages(row, ";"), ",", row.transfer_bytes, ",",
                    row.solve_ns, ",", row.time_limited ? "true" : "false", ",,", CsvField(row.reason),
                    "\n");
  }
  return out;
}

}  // namespace

absl::StatusOr<CompareFormat> ParseCompareFormat(std::string_view name) {
  const std::string lower = absl::AsciiStrToLower(std::string(name));
  if (lower == "text" || lower.empty()) return CompareFormat::kText;
  if (lower == "json") return CompareFormat::kJson;
  if (lower == "csv") return CompareFormat::kCsv;
  if (lower == "markdown" || lower == "md") return CompareFormat::kMarkdown;
  return absl::InvalidArgumentError(
      absl::StrCat("--format: unknown format \"", std::string(name), "\" (text, json, csv or markdown)"));
}

CompareRow CompareRowFromPlacement(std::string_view algorithm, const v1::Placement& placement) {
  CompareRow row;
  row.algorithm = std::string(algorithm);
  row.winner = placement.provenance().winner();  // set by portfolios (auto) only
  row.feasible = placement.outcome() == v1::FEASIBLE;
  row.reason = placement.reason();
  row.makespan_ns = placement.metrics().makespan_ns();
  row.lower_bound_ns = placement.metrics().lower_bound_ns();
  for (const v1::DeviceMetrics& device : placement.metrics().devices()) {
    row.peak_memory_bytes.push_back(device.peak_memory_bytes());
    row.capacity_bytes.push_back(device.capacity_bytes());
  }
  row.transfer_bytes = placement.metrics().transfer_bytes();
  row.solve_ns = placement.provenance().solve_ns();
  row.time_limited = placement.provenance().time_limited();
  return row;
}

CompareRow CompareRowFromError(std::string_view algorithm, std::string_view error) {
  CompareRow row;
  row.algorithm = std::string(algorithm);
  row.error = std::string(error);
  return row;
}

int32_t BestCompareRow(const CompareReport& report) {
  int32_t best = -1;
  for (size_t i = 0; i < report.rows.size(); ++i) {
    const CompareRow& row = report.rows[i];
    if (!row.error.empty() || !row.feasible) continue;
    if (best == -1 || row.makespan_ns < report.rows[best].makespan_ns) best = static_cast<int32_t>(i);
  }
  return best;
}

std::string FormatCompareReport(const CompareReport& report, CompareFormat format) {
  switch (format) {
    case CompareFormat::kJson: return FormatJson(report);
    case CompareFormat::kCsv: return FormatCsv(report);
    case CompareFormat::kMarkdown: return FormatMarkdown(report);
    case CompareFormat::kText: break;
  }
  return FormatText(report);
}

}  // namespace placement::report
