#include "service/report/report.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "service/engine/model/replica_group.h"
#include "service/engine/plans/plan_model.h"
#include "service/engine/solve/score_assignment.h"
#include "service/report/compare_table.h"
#include "service/report/human_units.h"

namespace placement::report {
namespace {

using engine::DeviceId;


using engine::Model;
using engine::OpId;
using engine::SimResult;

// Geometry of the charts, in CSS pixels.
constexpr int kLabelWidth = 130;  // lane labels left of the time axis
constexpr int kRightPad = 36;  // room for the last tick label, centred on the axis end
constexpr int kAxisHeight = 26;  // time ticks above the lanes
constexpr int kLaneHeight = 22;
constexpr int kLaneGap = 6;
constexpr int kMemoryPanelHeight = 64;
constexpr int kMemoryPanelGap = 14;

// Categorical colours for the most expensive op types; every other type shares kOtherColour. Eleven is
// about as many as people tell apart in a legend.
constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
                                    "#b07aa1", "#ff9da7", "#9c755f", "#17becf", "#8c564b"};
constexpr int kPaletteSize = sizeof(kPalette) / sizeof(kPalette[0]);
constexpr const char* kOtherColour = "#bab0ac";

constexpr char kStyle[] = R"(
body { font-family: sans-serif; margin: 24px; color: #222; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 18px; margin-top: 32px; border-bottom: 1px solid #ccc; }
h3 { font-size: 15px; margin-bottom: 4px; }
.subtitle, .note { color: #666; font-size: 13px; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: right; }
th { background: #f3f3f3; }
td.name, th.name { text-align: left; }
tr.best td { background: #eaf6ea; font-weight: bold; }
tr.over td { background: #fbeaea; }
.infeasible { color: #b00020; font-weight: bold; }
.feasible { color: #2a7a2a; font-weight: bold; }
.legend span.swatch { display: inline-block; width: 12px; height: 12px; margin: 0 4px 0 12px;
                      vertical-align: middle; border: 1px solid #888; }
.legend { font-size: 13px; margin: 6px 0; }
svg { display: block; margin: 6px 0; }
svg text { font-size: 11px; font-family: sans-serif; fill: #333; }
svg .lane-bg { fill: #f7f7f7; }
svg .transfer { stroke: #333; stroke-opacity: 0.35; stroke-width: 1; }
svg .capacity { stroke: #b00020; stroke-width: 1.5; stroke-dasharray: 6 3; }
svg .usage { fill: none; stroke: #4e79a7; stroke-width: 1.5; }
svg .grid { stroke: #ddd; stroke-width: 1; }
)";

std::string Num(double value) { return absl::StrFormat("%.2f", value); }

std::string Percent(int64_t part, int64_t whole) {
  if (whole <= 0) return part > 0 ? "∞" : "–";
  return absl::StrFormat("%.1f%%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
}

// Type shown for an op: its `type`, or a placeholder so the legend never has an empty entry.
std::string TypeName(const Model& model, OpId v) {
  return model.op_type[v].empty() ? "(no type)" : model.op_type[v];
}

// Colour of every op by its type. Types are ranked by total compute_ns (device independent, so every
// run of one report uses the same colours); the first kPaletteSize types get their own colour.
struct TypeColours {
  std::vector<int> colour_of_op;    // index into kPalette, or kPaletteSize for "other"
  std::vector<std::string> legend;  // per colour index; the last one is "other types" when used
  bool has_other = false;

  const char* Colour(int index) const { return index < kPaletteSize ? kPalette[index] : kOtherColour; }

  // Training plans (api.md §2.1): with microbatches > 1 a bar's colour is its microbatch (every
  // kPaletteSize-th microbatch shares one), once-per-step ops the "other" colour.
  int32_t microbatches = 1;
  int32_t num_ops = 0;
  const Model* model = nullptr;
  int ColourOfInstance(int32_t instance) const {
    if (microbatches <= 1) return colour_of_op[instance];
    const int32_t m = instance / num_ops;
    return model->is_once(instance - m * num_ops) ? kPaletteSize : m % kPaletteSize;
  }
};

TypeColours MicrobatchColours(const Model& model, int32_t microbatches) {
  TypeColours colours;
  colours.microbatches = microbatches;
  colours.num_ops = model.num_ops();
  colours.model = &model;
  for (int32_t m = 0; m < std::min(microbatches, kPaletteSize); ++m) {
    colours.legend.push_back(microbatches > kPaletteSize
                                 ? absl::StrCat("microbatch ", m, " (+", kPaletteSize, "k)")
                                 : absl::StrCat("microbatch ", m));
  }
  if (model.has_once_ops) {
    colours.has_other = true;
    colours.legend.push_back("once per step");
  }
  return colours;
}

TypeColours ColourTypes(const Model& model) {
  std::map<std::string, int64_t> work_by_type;
  for (OpId v = 0; v < model.num_ops(); ++v) work_by_type[TypeName(model, v)] += model.compute_ns[v];
  std::vector<std::pair<std::string, int64_t>> ranked(work_by_type.begin(), work_by_type.end());
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::map<std::string, int> colour_of_type;
  TypeColours colours;
  for (size_t i = 0; i < ranked.size(); ++i) {
    if (static_cast<int>(i) < kPaletteSize) {
      colour_of_type[ranked[i].first] = static_cast<int>(i);
      colours.legend.push_back(ranked[i].first);
    } else {
      colour_of_type[ranked[i].first] = kPaletteSize;
      colours.has_other = true;
    }
  }
  if (colours.has_other) {
    colours.legend.push_back(absl::StrCat(ranked.size() - kPaletteSize, " other types"));
  }
  colours.colour_of_op.resize(model.num_ops());
  for (OpId v = 0; v < model.num_ops(); ++v) {
    colours.colour_of_op[v] = colour_of_type[TypeName(model, v)];
  }
  return colours;
}

// Maps simulated time onto the horizontal axis shared by the Gantt and memory charts.
class TimeAxis {
 public:
  TimeAxis(int64_t makespan_ns, int width_px)
      : makespan_(std::max<int64_t>(makespan_ns, 1)),
        plot_width_(std::max(width_px - kLabelWidth - kRightPad, 100)) {}

  double X(int64_t time_ns) const {
    return kLabelWidth + static_cast<double>(time_ns) * plot_width_ / static_cast<double>(makespan_);
  }
  int plot_width() const { return plot_width_; }
  int total_width() const { return kLabelWidth + plot_width_ + kRightPad; }
  int64_t makespan() const { return makespan_; }

  // Ticks at 1, 2 or 5 × 10^k ns, about eight across the axis, with labels; vertical grid lines down to
  // `bottom`.
  void AppendTicks(std::string& svg, int bottom) const {
    const double raw = static_cast<double>(makespan_) / 8.0;
    double step = std::pow(10.0, std::floor(std::log10(std::max(raw, 1.0))));
    if (raw / step >= 5) {
      step *= 5;
    } else if (raw / step >= 2) {
      step *= 2;
    }
    for (double t = 0; t <= static_cast<double>(makespan_) + 0.5; t += step) {
      const double x = X(static_cast<int64_t>(t));
      absl::StrAppendFormat(&svg, "<line class=\"grid\" x1=\"%s\" y1=\"%d\" x2=\"%s\" y2=\"%d\"/>",
                            Num(x), kAxisHeight - 6, Num(x), bottom);
      absl::StrAppendFormat(&svg, "<text x=\"%s\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", Num(x),
                            kAxisHeight - 10, EscapeHtml(FormatDurationNs(static_cast<int64_t>(t))));
    }
  }

 private:
  int64_t makespan_;
  int plot_width_;
};

int LaneTop(DeviceId d) { return kAxisHeight + d * (kLaneHeight + kLaneGap); }

// Instances (op copies `m × num_ops + op`; just ops without microbatches) grouped by device, each group
// by start time (execution order).
std::vector<std::vector<int32_t>> InstancesByDevice(const Model& model,
                                                    const engine::Assignment& assignment,
                                                    const SimResult& sim) {
  std::vector<std::vector<int32_t>> instances(model.num_devices());
  const int32_t n = model.num_ops();
  for (int32_t m = 0; m < sim.microbatches; ++m) {
    for (OpId v = 0; v < n; ++v) {
      if (m > 0 && model.is_once(v)) continue;
      instances[assignment[v]].push_back(m * n + v);
    }
  }
  for (std::vector<int32_t>& list : instances) {
    std::stable_sort(list.begin(), list.end(),
                     [&](int32_t a, int32_t b) { return sim.start_ns[a] < sim.start_ns[b]; });
  }
  return instances;
}

// One bar per instance, with a tooltip naming it (and its microbatch).
void AppendOpBars(std::string& svg, const Model& model, const std::vector<int32_t>& instances,
                  DeviceId d, const SimResult& sim, const TimeAxis& axis, const TypeColours& colours) {
  const int top = LaneTop(d);
  const int32_t n = model.num_ops();
  for (int32_t i : instances) {
    const OpId v = i % n;
    const std::string copy =
        sim.microbatches > 1 && !model.is_once(v) ? absl::StrCat(" #", i / n) : std::string();
    const double x = axis.X(sim.start_ns[i]);
    const double width = std::max(axis.X(sim.finish_ns[i]) - x, 0.5);
    absl::StrAppendFormat(&svg,
                          "<rect class=\"op\" x=\"%s\" y=\"%d\" width=\"%s\" height=\"%d\" fill=\"%s\">"
                          "<title>%s%s (%s): %s – %s (%s)</title></rect>\n",
                          Num(x), top, Num(width), kLaneHeight,
                          colours.Colour(colours.ColourOfInstance(i)), EscapeHtml(model.op_name[v]),
                          copy, EscapeHtml(TypeName(model, v)),
                          EscapeHtml(FormatDurationNs(sim.start_ns[i])),
                          EscapeHtml(FormatDurationNs(sim.finish_ns[i])),
                          EscapeHtml(FormatDurationNs(sim.finish_ns[i] - sim.start_ns[i])));
  }
}

// Activity per pixel column: bar height = the fraction of the column the device is busy, colour = the
// type with most busy time in it (a named type before "other types"). Neighbouring columns that look
// the same become one rectangle, so a long op is one element however wide it is.
void AppendActivityColumns(std::string& svg, const std::vector<int32_t>& ops, DeviceId d,
                           const SimResult& sim, const TimeAxis& axis, const TypeColours& colours,
                           std::vector<double>& scratch) {
  const int columns = axis.plot_width();
  const int num_colours = kPaletteSize + 1;
  scratch.assign(static_cast<size_t>(columns) * num_colours, 0.0);
  const double column_ns = static_cast<double>(axis.makespan()) / columns;
  for (const int32_t v : ops) {
    const double start = static_cast<double>(sim.start_ns[v]);
    const double finish = static_cast<double>(sim.finish_ns[v]);
    if (finish <= start) continue;
    const int first = std::min(static_cast<int>(start / column_ns), columns - 1);
    const int last = std::min(static_cast<int>(finish / column_ns), columns - 1);
    for (int c = first; c <= last; ++c) {
      const double overlap = std::min(finish, (c + 1) * column_ns) - std::max(start, c * column_ns);
      if (overlap > 0) {
        scratch[static_cast<size_t>(c) * num_colours + colours.ColourOfInstance(v)] += overlap;
      }
    }
  }
  const int bottom = LaneTop(d) + kLaneHeight;
  int run_start = 0, run_height = 0, run_colour = -1;
  auto flush = [&](int end) {
    if (run_height > 0 && end > run_start) {
      absl::StrAppendFormat(&svg,
                            "<rect class=\"busy\" x=\"%s\" y=\"%d\" width=\"%d\" height=\"%d\" "
                            "fill=\"%s\"/>\n",
                            Num(kLabelWidth + run_start), bottom - run_height, end - run_start,
                            run_height, colours.Colour(run_colour));
    }
  };
  for (int c = 0; c < columns; ++c) {
    const double* busy = &scratch[static_cast<size_t>(c) * num_colours];
    // "Other types" lumps several types together, so it only wins a column no named type ran in.
    int dominant = static_cast<int>(std::max_element(busy, busy + kPaletteSize) - busy);
    if (busy[dominant] <= 0) dominant = kPaletteSize;
    const double total = std::accumulate(busy, busy + num_colours, 0.0);
    const int height = static_cast<int>(std::lround(std::min(1.0, total / column_ns) * kLaneHeight));
    const int colour = height > 0 ? dominant : -1;
    if (height != run_height || colour != run_colour) {
      flush(c);
      run_start = c;
      run_height = height;
      run_colour = colour;
    }
  }
  flush(columns);
}

// Indices of the transfers to draw: all of them, or the `limit` largest (ties by earlier start).
std::vector<size_t> TransfersToDraw(const std::vector<engine::TransferRecord>& transfers, int limit) {
  std::vector<size_t> order(transfers.size());
  std::iota(order.begin(), order.end(), 0);
  if (static_cast<int64_t>(order.size()) <= limit) return order;
  auto larger = [&](size_t a, size_t b) {
    if (transfers[a].bytes != transfers[b].bytes) return transfers[a].bytes > transfers[b].bytes;
    if (transfers[a].start_ns != transfers[b].start_ns)
      return transfers[a].start_ns < transfers[b].start_ns;
    return a < b;
  };
  std::nth_element(order.begin(), order.begin() + std::max(limit, 0), order.end(), larger);
  order.resize(std::max(limit, 0));
  std::sort(order.begin(), order.end());
  return order;
}

std::string GanttSvg(const Model& model, const engine::Assignment& assignment, const SimResult& sim,
                     const TimeAxis& axis, const TypeColours& colours, const ReportOptions& options,
                     std::string& notes) {
  const int height = LaneTop(model.num_devices()) + 4;
  std::string svg = absl::StrFormat(
      "<svg class=\"gantt\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
      "viewBox=\"0 0 %d %d\">\n",
      axis.total_width(), height, axis.total_width(), height);
  axis.AppendTicks(svg, height - 4);
  const int64_t bars = static_cast<int64_t>(sim.start_ns.size());
  const bool aggregate = bars > options.max_drawn_ops;
  if (aggregate) {
    absl::StrAppend(&notes, bars, sim.microbatches > 1 ? " op copies are more than " : " ops are more than ",
                    options.max_drawn_ops, ": lanes show the busy fraction per pixel column, coloured by the ",
                    sim.microbatches > 1 ? "microbatch" : "type", " with most busy time. ");
  }
  const std::vector<std::vector<int32_t>> ops = InstancesByDevice(model, assignment, sim);
  std::vector<double> scratch;
  for (DeviceId d = 0; d < model.num_devices(); ++d) {
    const int top = LaneTop(d);
    absl::StrAppendFormat(&svg, "<g class=\"lane\" data-device=\"%s\">\n",
                          EscapeHtml(model.device_name[d]));
    absl::StrAppendFormat(&svg, "<text x=\"4\" y=\"%d\">%s</text>\n", top + kLaneHeight / 2 + 4,
                          EscapeHtml(model.device_name[d]));
    absl::StrAppendFormat(&svg,
                          "<rect class=\"lane-bg\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"/>\n",
                          kLabelWidth, top, axis.plot_width(), kLaneHeight);
    if (aggregate) {
      AppendActivityColumns(svg, ops[d], d, sim, axis, colours, scratch);
    } else {
      AppendOpBars(svg, model, ops[d], d, sim, axis, colours);
    }
    svg += "</g>\n";
  }
  const std::vector<size_t> drawn = TransfersToDraw(sim.transfers, options.max_drawn_transfers);
  if (drawn.size() < sim.transfers.size()) {
    absl::StrAppend(&notes, "Only the ", drawn.size(), " largest of ", sim.transfers.size(),
                    " transfers are drawn. ");
  }
  svg += "<g class=\"transfers\">\n";
  for (size_t i : drawn) {
    const engine::TransferRecord& t = sim.transfers[i];
    const bool down = t.to > t.from;
    const int y1 = LaneTop(t.from) + (down ? kLaneHeight : 0);
    const int y2 = LaneTop(t.to) + (down ? 0 : kLaneHeight);
    absl::StrAppendFormat(&svg,
                          "<line class=\"transfer\" x1=\"%s\" y1=\"%d\" x2=\"%s\" y2=\"%d\">"
                          "<title>%s: %s → %s, %s, %s – %s</title></line>\n",
                          Num(axis.X(t.start_ns)), y1, Num(axis.X(t.arrival_ns)), y2,
                          EscapeHtml(model.op_name[t.producer]), EscapeHtml(model.device_name[t.from]),
                          EscapeHtml(model.device_name[t.to]), EscapeHtml(FormatBytes(t.bytes)),
                          EscapeHtml(FormatDurationNs(t.start_ns)),
                          EscapeHtml(FormatDurationNs(t.arrival_ns)));
  }
  svg += "</g>\n</svg>\n";
  return svg;
}

// Memory per device: the usage curve (the maximum within each pixel column, so no peak is lost) and the
// capacity as a dashed line.
std::string MemorySvg(const Model& model, const SimResult& sim, const TimeAxis& axis) {
  const std::vector<std::vector<std::pair<int64_t, int64_t>>> steps = MemorySteps(model, sim);
  const int panel = kMemoryPanelHeight + kMemoryPanelGap;
  const int height = kAxisHeight + model.num_devices() * panel;
  std::string svg = absl::StrFormat(
      "<svg class=\"memory\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
      "viewBox=\"0 0 %d %d\">\n",
      axis.total_width(), height, axis.total_width(), height);
  axis.AppendTicks(svg, height - kMemoryPanelGap);
  const int columns = axis.plot_width();
  const double column_ns = static_cast<double>(axis.makespan()) / columns;
  for (DeviceId d = 0; d < model.num_devices(); ++d) {
    const int top = kAxisHeight + d * panel;
    const int bottom = top + kMemoryPanelHeight;
    const int64_t capacity = model.capacity_bytes[d];
    const int64_t peak = sim.peak_memory_bytes[d];
    // Scaled to the capacity, unless the peak is so far below it that the curve would be a flat line at
    // the bottom: then scaled to the peak, with the capacity line pinned to the top and labelled.
    const bool capacity_off_scale = peak > 0 && peak * 4 < capacity;
    const double scale_max = std::max<double>(
        1.0, 1.08 * static_cast<double>(capacity_off_scale ? peak : std::max(capacity, peak)));
    auto y = [&](int64_t bytes) {
      return bottom - std::min(1.0, static_cast<double>(bytes) / scale_max) * kMemoryPanelHeight;
    };
    absl::StrAppendFormat(&svg, "<g class=\"memory-lane\" data-device=\"%s\">\n",
                          EscapeHtml(model.device_name[d]));
    absl::StrAppendFormat(&svg, "<text x=\"4\" y=\"%d\">%s</text>\n", top + 14,
                          EscapeHtml(model.device_name[d]));
    absl::StrAppendFormat(&svg, "<text x=\"4\" y=\"%d\">peak %s</text>\n", top + 30,
                          EscapeHtml(FormatBytes(peak)));
    absl::StrAppendFormat(&svg, "<text x=\"4\" y=\"%d\">cap %s</text>\n", top + 46,
                          EscapeHtml(FormatBytes(capacity)));
    absl::StrAppendFormat(&svg,
                          "<rect class=\"lane-bg\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"/>\n",
                          kLabelWidth, top, columns, kMemoryPanelHeight);
    // Column maxima of the step function.
    std::vector<int64_t> column_max(columns, 0);
    const std::vector<std::pair<int64_t, int64_t>>& curve = steps[d];
    int64_t level = 0;
    size_t next = 0;
    for (int c = 0; c < columns; ++c) {
      const double column_end = (c + 1) * column_ns;
      int64_t highest = level;
      while (next < curve.size() && static_cast<double>(curve[next].first) < column_end) {
        level = curve[next].second;
        highest = std::max(highest, level);
        ++next;
      }
      column_max[c] = highest;
    }
    std::string points = absl::StrCat(Num(kLabelWidth), ",", Num(y(column_max[0])));
    for (int c = 1; c < columns; ++c) {
      if (column_max[c] == column_max[c - 1]) continue;
      absl::StrAppend(&points, " ", Num(kLabelWidth + c), ",", Num(y(column_max[c - 1])), " ",
                      Num(kLabelWidth + c), ",", Num(y(column_max[c])));
    }
    absl::StrAppend(&points, " ", Num(kLabelWidth + columns), ",", Num(y(column_max[columns - 1])));
    absl::StrAppendFormat(&svg,
                          "<polyline class=\"usage\" points=\"%s\"><title>%s: peak %s at %s"
                          "</title></polyline>\n",
                          points, EscapeHtml(model.device_name[d]), EscapeHtml(FormatBytes(peak)),
                          EscapeHtml(FormatDurationNs(sim.peak_time_ns[d])));
    absl::StrAppendFormat(&svg,
                          "<line class=\"capacity\" x1=\"%d\" y1=\"%s\" x2=\"%d\" y2=\"%s\">"
                          "<title>capacity %s%s</title></line>\n",
                          kLabelWidth, Num(y(capacity)), kLabelWidth + columns, Num(y(capacity)),
                          EscapeHtml(FormatBytes(capacity)),
                          capacity_off_scale ? " (above the scale of this chart)" : "");
    if (capacity_off_scale) {
      absl::StrAppendFormat(&svg, "<text x=\"%d\" y=\"%s\" text-anchor=\"end\">capacity %s ↑</text>\n",
                            kLabelWidth + columns - 4, Num(y(capacity) + 12),
                            EscapeHtml(FormatBytes(capacity)));
    }
    absl::StrAppendFormat(&svg, "<text x=\"%d\" y=\"%s\">%s</text>\n", kLabelWidth + 4,
                          Num(y(peak) - 3 < top + 10 ? top + 10 : y(peak) - 3),
                          EscapeHtml(FormatBytes(peak)));
    svg += "</g>\n";
  }
  svg += "</svg>\n";
  return svg;
}

std::string LegendHtml(const TypeColours& colours) {
  std::string html = colours.microbatches > 1 ? "<div class=\"legend\">microbatches:"
                                              : "<div class=\"legend\">op types:";
  for (size_t i = 0; i < colours.legend.size(); ++i) {
    const int index =
        colours.has_other && i + 1 == colours.legend.size() ? kPaletteSize : static_cast<int>(i);
    absl::StrAppendFormat(&html, "<span class=\"swatch\" style=\"background:%s\"></span>%s",
                          colours.Colour(index), EscapeHtml(colours.legend[i]));
  }
  html += "</div>\n";
  return html;
}

std::string SummaryHtml(const Model& model, const v1::Placement& scored) {
  const v1::PlacementMetrics& m = scored.metrics();
  std::string html = "<table class=\"summary\">\n";
  auto row = [&](absl::string_view name, const std::string& value_html) {
    absl::StrAppend(&html, "<tr><th class=\"name\">", name, "</th><td class=\"name\">", value_html,
                    "</td></tr>\n");
  };
  if (scored.outcome() == v1::FEASIBLE) {
    row("outcome", "<span class=\"feasible\">FEASIBLE</span>");
  } else {
    row("outcome",
        absl::StrCat("<span class=\"infeasible\">INFEASIBLE</span> ", EscapeHtml(scored.reason())));
  }
  row("makespan", EscapeHtml(FormatDurationNs(m.makespan_ns())));
  row("lower bound", EscapeHtml(FormatDurationNs(m.lower_bound_ns())));
  row("makespan / lower bound",
      m.lower_bound_ns() > 0
          ? absl::StrFormat("%.3f", static_cast<double>(m.makespan_ns()) / m.lower_bound_ns())
          : std::string("–"));
  row("transfers",
      absl::StrCat(m.transfer_count(), " (", EscapeHtml(FormatBytes(m.transfer_bytes())), ")"));
  const v1::Provenance& p = scored.provenance();
  if (!p.algorithm().empty()) {
    std::string algorithm = EscapeHtml(p.algorithm());
    if (!p.requested_algorithm().empty() && p.requested_algorithm() != p.algorithm()) {
      absl::StrAppend(&algorithm, " (chosen by ", EscapeHtml(p.requested_algorithm()), ")");
    }
    if (!p.algorithm_version().empty())
      absl::StrAppend(&algorithm, ", version ", EscapeHtml(p.algorithm_version()));
    row("algorithm", algorithm);
    if (p.solve_ns() > 0) {
      row("solve time", absl::StrCat(EscapeHtml(FormatDurationNs(p.solve_ns())),
                                     p.time_limited() ? " (cut short by the time limit)" : ""));
    }
  }
  html += "</table>\n";

  html +=
      "<table class=\"devices\">\n<tr><th class=\"name\">device</th><th class=\"name\">kind</th>"
      "<th class=\"name\">node</th><th>ops</th><th>busy</th><th>busy / makespan</th>"
      "<th>peak memory</th><th>capacity</th><th>peak / capacity</th></tr>\n";
  for (DeviceId d = 0; d < model.num_devices() && d < m.devices_size(); ++d) {
    const v1::DeviceMetrics& dm = m.devices(d);
    absl::StrAppendFormat(
        &html,
        "<tr%s><td class=\"name\">%s</td><td class=\"name\">%s</td><td class=\"name\">%s</td>"
        "<td>%d</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n",
        dm.peak_memory_bytes() > dm.capacity_bytes() ? " class=\"over\"" : "",
        EscapeHtml(model.device_name[d]), EscapeHtml(model.kind_name[model.device_kind[d]]),
        EscapeHtml(model.node_name[model.device_node[d]]), dm.op_count(),
        EscapeHtml(FormatDurationNs(dm.busy_ns())), Percent(dm.busy_ns(), m.makespan_ns()),
        EscapeHtml(FormatBytes(dm.peak_memory_bytes())), EscapeHtml(FormatBytes(dm.capacity_bytes())),
        Percent(dm.peak_memory_bytes(), dm.capacity_bytes()));
  }
  html += "</table>\n";
  return html;
}

std::string CompareHtml(const std::vector<CompareRow>& rows) {
  CompareReport report;
  report.rows = rows;
  const int32_t best = BestCompareRow(report);
  std::string html =
      "<h2>Comparison</h2>\n<table class=\"compare\">\n<tr><th class=\"name\">algorithm</th>"
      "<th class=\"name\">feasible</th><th>makespan</th><th>makespan / lower bound</th>"
      "<th>highest peak / capacity</th><th>transfer bytes</th><th>solve time</th></tr>\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const CompareRow& row = rows[i];
    std::string name = EscapeHtml(row.algorithm);
    if (!row.winner.empty()) absl::StrAppend(&name, " → ", EscapeHtml(row.winner));
    if (static_cast<int32_t>(i) == best) absl::StrAppend(&name, " (best)");
    if (!row.error.empty()) {
      absl::StrAppendFormat(&html,
                            "<tr><td class=\"name\">%s</td><td class=\"name infeasible\" colspan=\"6\">"
                            "error: %s</td></tr>\n",
                            name, EscapeHtml(row.error));
      continue;
    }
    double worst_fill = 0;
    for (size_t d = 0; d < row.peak_memory_bytes.size() && d < row.capacity_bytes.size(); ++d) {
      if (row.capacity_bytes[d] > 0) {
        worst_fill = std::max(worst_fill, static_cast<double>(row.peak_memory_bytes[d]) /
                                              static_cast<double>(row.capacity_bytes[d]));
      }
    }
    absl::StrAppendFormat(
        &html,
        "<tr%s><td class=\"name\">%s</td><td class=\"name\">%s</td><td>%s</td><td>%s</td>"
        "<td>%.1f%%</td><td>%s</td><td>%s</td></tr>\n",
        static_cast<int32_t>(i) == best ? " class=\"best\"" : "", name,
        row.feasible ? "yes" : "<span class=\"infeasible\">no</span>",
        EscapeHtml(FormatDurationNs(row.makespan_ns)),
        row.lower_bound_ns > 0 ? absl::StrFormat("%.3f", static_cast<double>(row.makespan_ns) /
                                                             static_cast<double>(row.lower_bound_ns))
                               : std::string("–"),
        100.0 * worst_fill, EscapeHtml(FormatBytes(row.transfer_bytes)),
        row.solve_ns > 0 ? EscapeHtml(FormatDurationNs(row.solve_ns)) : std::string("–"));
  }
  html += "</table>\n";
  return html;
}

}  // namespace

std::string EscapeHtml(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::vector<std::vector<std::pair<int64_t, int64_t>>> MemorySteps(const Model& model,
                                                                  const SimResult& result) {
  std::vector<std::vector<std::pair<int64_t, int64_t>>> changes(model.num_devices());
  for (const engine::MemoryInterval& interval : result.memory_intervals) {
    changes[interval.device].emplace_back(interval.from_ns, interval.bytes);
    changes[interval.device].emplace_back(interval.until_ns, -interval.bytes);
  }
  std::vector<std::vector<std::pair<int64_t, int64_t>>> steps(model.num_devices());
  for (DeviceId d = 0; d < model.num_devices(); ++d) {
    std::vector<std::pair<int64_t, int64_t>>& delta = changes[d];
    std::sort(delta.begin(), delta.end());
    int64_t level = 0;
    for (size_t i = 0; i < delta.size();) {
      const int64_t time = delta[i].first;
      for (; i < delta.size() && delta[i].first == time; ++i) level += delta[i].second;
      if (!steps[d].empty() && steps[d].back().second == level) continue;
      steps[d].emplace_back(time, level);
    }
  }
  return steps;
}

absl::StatusOr<engine::Assignment> AssignmentOf(const Model& model, const v1::Placement& placement) {
  if (placement.device_size() != model.num_ops()) {
    return absl::InvalidArgumentError(absl::StrCat("the placement has ", placement.device_size(),
                                                   " devices, the graph ", model.num_ops(), " ops"));
  }
  engine::Assignment assignment(model.num_ops());
  for (int32_t i = 0; i < placement.device_size(); ++i) {
    const int32_t d = placement.device(i);
    if (d < 0 || d >= model.num_devices()) {
      return absl::InvalidArgumentError(absl::StrCat("device[", i, "] = ", d, " is not a device index (",
                                                     model.num_devices(), " devices)"));
    }
    assignment[model.op_of_request_index[i]] = d;
  }
  return assignment;
}

namespace {

// The replica count a placement was computed with, when the request allows it (else 1: group 0 = the
// whole cluster, and a device index beyond a group is still reported as an error by AssignmentOf).
int32_t PlanReplicas(const Model& model, const v1::Placement& placement) {
  const int32_t replicas = placement.plan().data_parallel();
  if (replicas <= 1) return 1;
  for (const int32_t allowed : engine::ReplicaCountsToTry(model)) {
    if (allowed == replicas) return replicas;
  }
  return 1;
}

// The window a placement was computed with (0 = the plan model's own when it is out of range).
int32_t PlanWindow(const Model& plan_model, const v1::Placement& placement) {
  const int32_t window = placement.plan().max_in_flight();
  return window >= 1 && window <= plan_model.plan.microbatches ? window : 0;
}

}  // namespace

absl::StatusOr<std::string> RenderHtmlReport(const Model& model, const std::vector<ReportRun>& runs,
                                             const ReportOptions& options) {
  const TypeColours colours = ColourTypes(model);
  engine::SimOptions sim_options;
  sim_options.record_memory_intervals = true;
  sim_options.record_transfers = true;

  std::vector<CompareRow> rows;
  std::string sections;
  for (const ReportRun& run : runs) {
    if (!run.error.empty()) {
      rows.push_back(CompareRowFromError(run.label, run.error));
      continue;
    }
    // The plan the placement ran with (api.md §2.1): replica group 0's devices and its window.
    const engine::PlanModel plan_model(model, PlanReplicas(model, run.placement));
    const Model& run_model = plan_model.model();
    const int32_t window = PlanWindow(run_model, run.placement);
    absl::StatusOr<engine::Assignment> assignment = AssignmentOf(run_model, run.placement);
    if (!assignment.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(run.label, ": ", assignment.status().message()));
    }
    v1::Placement scored = engine::ScoreAssignment(run_model, *assignment, nullptr, window);
    *scored.mutable_provenance() = run.placement.provenance();
    rows.push_back(CompareRowFromPlacement(run.label, scored));

    engine::Simulator simulator(run_model);
    sim_options.max_in_flight = window;
    const SimResult& sim = simulator.Run(*assignment, sim_options);
    const TimeAxis axis(sim.makespan_ns, options.chart_width_px);
    const TypeColours run_colours =
        sim.microbatches > 1 ? MicrobatchColours(run_model, sim.microbatches) : colours;
    std::string notes;
    absl::StrAppend(&sections, "<section class=\"run\">\n<h2>", EscapeHtml(run.label), "</h2>\n");
    absl::StrAppend(&sections, SummaryHtml(run_model, scored));
    absl::StrAppend(&sections, "<h3>Schedule</h3>\n", LegendHtml(run_colours));
    const std::string gantt =
        GanttSvg(run_model, *assignment, sim, axis, run_colours, options, notes);
    if (!notes.empty()) absl::StrAppend(&sections, "<p class=\"note\">", EscapeHtml(notes), "</p>\n");
    absl::StrAppend(&sections, gantt);
    absl::StrAppend(&sections, "<h3>Memory over time</h3>\n", MemorySvg(run_model, sim, axis),
                    "</section>\n");
  }

  std::string html =
      absl::StrCat("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>",
                   EscapeHtml(options.title), "</title>\n<style>", kStyle,
                   "</style>\n</head>\n<body>\n<h1>", EscapeHtml(options.title), "</h1>\n");
  if (!options.subtitle.empty()) {
    absl::StrAppend(&html, "<p class=\"subtitle\">", EscapeHtml(options.subtitle), "</p>\n");
  }
  absl::StrAppend(&html, "<p class=\"subtitle\">", model.num_ops(), " ops, ", model.num_edges(),
                  " edges, ", model.num_devices(), " devices; lower bound ",
                  EscapeHtml(FormatDurationNs(engine::LowerBoundNs(model))), "</p>\n");
  if (runs.size() >= 2) absl::StrAppend(&html, CompareHtml(rows));
  absl::StrAppend(&html, sections, "</body>\n</html>\n");
  return html;
}

}  // namespace placement::report
