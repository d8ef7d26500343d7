#include "service/report/text_summary.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "service/report/human_units.h"

namespace placement::report {
namespace {

// Width of the label column ("outcome", "step", ...).
constexpr int kLabelWidth = 12;
// The device column of the table; longer names lose the prefix all devices share, then their middle.
constexpr int kNameWidth = 28;
// A device name in a sentence.
constexpr int kInlineNameWidth = 32;
// Memory bar of the device table.
constexpr int kBarWidth = 20;
// With more devices than this the table shows the fullest kShownDevices (the JSON has all of them).
constexpr int kMaxDeviceRows = 24;
constexpr int kShownDevices = 16;
// Violations listed by evaluate's summary; the rest are counted.
constexpr int kShownViolations = 5;
// Lines of an INFEASIBLE reason shown (it names every full device; the table marks them too).
constexpr int kReasonLines = 4;

std::string Label(absl::string_view label, absl::string_view text) {
  return absl::StrFormat("%-*s%s", kLabelWidth, label, text);
}

// Keeps a name within `width` columns, mostly its tail, where names tend to differ:
// "/job:worker/replica:0/task:3/device:GPU:3" -> "/job:w~device:GPU:3".
std::string Clip(absl::string_view name, size_t width) {
  if (name.size() <= width) return std::string(name);
  const size_t head = width / 3;
  const size_t tail = width - 1 - head;
  return absl::StrCat(name.substr(0, head), "~", name.substr(name.size() - tail));
}

// Breaks `line` at spaces so that no piece is wider than kSummaryWidth; continuation lines are
// indented to the text column. A word longer than a line is cut. At most `max_lines` lines; a cut
// text ends in "...".
void AppendWrapped(const std::string& line, std::string* out, int max_lines = 1 << 20) {
  const std::string indent(kLabelWidth, ' ');
  std::string rest = line;
  bool first = true;
  for (int lines = 1;; ++lines) {
    if (lines == max_lines && static_cast<int>(indent.size() + rest.size()) > kSummaryWidth) {
      rest = absl::StrCat(rest.substr(0, kSummaryWidth - indent.size() - 4), " ...");
    }
    const std::string prefix = first ? "" : indent;
    if (prefix.size() + rest.size() <= static_cast<size_t>(kSummaryWidth)) {
      absl::StrAppend(out, prefix, rest, "\n");
      return;
    }
    const size_t room = kSummaryWidth - prefix.size();
    size_t cut = rest.rfind(' ', room);
    if (cut == std::string::npos || cut <= (first ? static_cast<size_t>(kLabelWidth) : 0)) cut = room;
    absl::StrAppend(out, prefix, rest.substr(0, cut), "\n");
    rest = rest.substr(cut);
    while (!rest.empty() && rest.front() == ' ') rest.erase(rest.begin());
    if (rest.empty()) return;
    first = false;
  }
}

// What the names in `names` share at the front, up to and including its last '/' or ':' (so that no
// name is cut inside a component): "/job:worker/replica:0/" for TensorFlow-style device names.
std::string SharedPrefix(const std::vector<std::string>& names) {
  if (names.size() < 2) return "";
  size_t length = names.front().size();
  for (const std::string& name : names) {
    size_t i = 0;
    while (i < length && i < name.size() && name[i] == names.front()[i]) ++i;
    length = i;
  }
  const size_t separator = names.front().find_last_of("/:", length == 0 ? 0 : length - 1);
  if (length == 0 || separator == std::string::npos) return "";
  return names.front().substr(0, separator + 1);
}

std::string Percent(double fraction) { return absl::StrFormat("%.1f %%", 100.0 * fraction); }

std::string CacheName(v1::CacheResult cache) {
  switch (cache) {
    case v1::MISS:
      return "MISS (computed now)";
    case v1::HIT:
      return "HIT (from the cache)";
    case v1::COALESCED:
      return "COALESCED (joined the same computation)";
    default:
      return "";
  }
}

std::string AlgorithmLine(const v1::Provenance& provenance, int64_t makespan_ns) {
  std::string text = provenance.algorithm().empty() ? "unknown" : provenance.algorithm();
  if (!provenance.winner().empty()) {
    std::string gained;
    if (provenance.winner_makespan_ns() > 0) {
      const double fraction =
          static_cast<double>(provenance.winner_makespan_ns() - makespan_ns) /
          static_cast<double>(provenance.winner_makespan_ns());
      gained = absl::StrCat(", search gained ", Percent(fraction));
    }
    absl::StrAppend(&text, " (winner: ", provenance.winner(), gained, ")");
  }
  if (!provenance.requested_algorithm().empty() &&
      provenance.requested_algorithm() != provenance.algorithm()) {
    absl::StrAppend(&text, ", asked for ", provenance.requested_algorithm());
  }
  // The version (long for a portfolio) stays in the JSON; a reader wants the method.
  if (provenance.time_limited()) absl::StrAppend(&text, ", cut short by the time limit");
  return text;
}

// "step" and "one device" lines.
void AppendStepLines(const v1::Placement& placement, const SummaryContext& context,
                     std::string* out) {
  const v1::PlacementMetrics& metrics = placement.metrics();
  const int64_t makespan = metrics.makespan_ns();
  std::string step = FormatDurationNs(makespan);
  if (metrics.lower_bound_ns() > 0) {
    absl::StrAppend(&step, "   lower bound ", FormatDurationNs(metrics.lower_bound_ns()), " (step is +",
                    Percent(static_cast<double>(makespan - metrics.lower_bound_ns()) /
                            static_cast<double>(metrics.lower_bound_ns())),
                    ")");
  }
  AppendWrapped(Label("step", step), out);
  const v1::TrainingPlan& plan = placement.plan();
  const int32_t microbatches = std::max(1, plan.microbatches());
  const int32_t replicas = std::max(1, plan.data_parallel());
  if (microbatches > 1 || replicas > 1) {
    // Training plan (api.md §2.1): how the step runs and what it delivers.
    std::string text = absl::StrCat(microbatches, microbatches == 1 ? " microbatch" : " microbatches",
                                    ", at most ", std::max(1, plan.max_in_flight()), " in flight");
    if (replicas > 1) {
      absl::StrAppend(&text, ", ", replicas, " data-parallel replicas of ", metrics.devices_size(),
                      metrics.devices_size() == 1 ? " device" : " devices");
    }
    if (metrics.microbatches_per_second() > 0) {
      absl::StrAppend(&text, ": ", absl::StrFormat("%.1f", metrics.microbatches_per_second()),
                      " microbatches/s");
    }
    AppendWrapped(Label("plan", text), out);
  }

  std::optional<int64_t> single;
  if (context.graph != nullptr && context.cluster != nullptr) {
    single = SingleDeviceMakespanNs(*context.graph, *context.cluster, microbatches);
  }
  if (!single.has_value()) {
    AppendWrapped(Label("one device", context.request_hint.empty()
                                          ? "n/a"
                                          : absl::StrCat("n/a (", context.request_hint, ")")),
                  out);
    return;
  }
  // The fastest device (the first of equals), and whether its memory could hold even the weights.
  const v1::Cluster& cluster = *context.cluster;
  auto speed = [&cluster](int d) {
    return cluster.devices(d).has_speed() ? cluster.devices(d).speed() : 1.0;
  };
  int fastest = 0;
  for (int d = 1; d < cluster.devices_size(); ++d) {
    if (speed(d) > speed(fastest)) fastest = d;
  }
  std::string text = absl::StrCat(FormatDurationNs(*single), " alone on ",
                                  Clip(cluster.devices(fastest).name(), kInlineNameWidth));
  if (microbatches > 1) absl::StrAppend(&text, " (", microbatches, " microbatches)");
  if (makespan > 0) {
    // With D replicas each step does D times the work of one device's step: compare throughputs.
    const int devices = replicas > 1 ? replicas * metrics.devices_size() : cluster.devices_size();
    absl::StrAppend(&text, ": speed-up ",
                    absl::StrFormat("%.2fx", static_cast<double>(*single) * replicas /
                                                 static_cast<double>(makespan)),
                    " on ", devices, devices == 1 ? " device" : " devices");
  }
  int64_t persistent = 0;
  for (const v1::Op& op : context.graph->ops()) persistent += op.persistent_bytes();
  if (fastest < metrics.devices_size() && metrics.devices(fastest).capacity_bytes() > 0 &&
      persistent > metrics.devices(fastest).capacity_bytes()) {
    absl::StrAppend(&text, " (would not fit: ", FormatBytes(persistent), " of weights and state)");
  }
  AppendWrapped(Label("one device", text), out);
}

void AppendDeviceTable(const v1::Placement& placement, const SummaryContext& context,
                       std::string* out) {
  const v1::PlacementMetrics& metrics = placement.metrics();
  const int count = metrics.devices_size();
  if (count == 0) return;
  auto fill = [&](int d) {
    const v1::DeviceMetrics& device = metrics.devices(d);
    return device.capacity_bytes() > 0 ? static_cast<double>(device.peak_memory_bytes()) /
                                             static_cast<double>(device.capacity_bytes())
                                       : 0.0;
  };
  std::vector<int> shown(count);
  std::iota(shown.begin(), shown.end(), 0);
  if (count > kMaxDeviceRows) {
    // The fullest devices are the ones a reader needs; ties keep cluster order.
    std::stable_sort(shown.begin(), shown.end(), [&](int a, int b) { return fill(a) > fill(b); });
    shown.resize(kShownDevices);
    std::sort(shown.begin(), shown.end());
  }
  // Device names; when some are too long for the column, the prefix they all share goes to the header.
  std::vector<std::string> names;
  bool too_long = false;
  for (int d : shown) {
    names.push_back(context.cluster != nullptr && d < context.cluster->devices_size()
                        ? context.cluster->devices(d).name()
                        : absl::StrCat("#", d));
    too_long = too_long || names.back().size() > static_cast<size_t>(kNameWidth);
  }
  std::string header = "device";
  if (too_long) {
    const std::string prefix = SharedPrefix(names);
    if (!prefix.empty()) {
      for (std::string& name : names) name.erase(0, prefix.size());
      header = absl::StrCat(prefix, "*");
    }
  }
  // The column is as wide as its longest entry, up to kNameWidth.
  size_t width = std::min<size_t>(header.size(), kNameWidth);
  for (const std::string& name : names) width = std::max(width, std::min<size_t>(name.size(), kNameWidth));
  absl::StrAppend(out, absl::StrFormat("%-*s %6s %8s %11s / %-11s %5s\n", width,
                                       Clip(header, kNameWidth), "ops", "busy", "peak memory",
                                       "capacity", "use"));
  for (size_t row = 0; row < shown.size(); ++row) {
    const int d = shown[row];
    const v1::DeviceMetrics& device = metrics.devices(d);
    const std::string name = Clip(names[row], kNameWidth);
    const double busy = metrics.makespan_ns() > 0 ? static_cast<double>(device.busy_ns()) /
                                                        static_cast<double>(metrics.makespan_ns())
                                                  : 0.0;
    const double used = fill(d);
    std::string gauge;
    if (device.capacity_bytes() > 0 && device.peak_memory_bytes() > device.capacity_bytes()) {
      gauge = absl::StrCat(
          "FULL: ", FormatBytes(device.peak_memory_bytes() - device.capacity_bytes()), " over");
    } else {
      const int hashes = std::clamp(static_cast<int>(std::lround(used * kBarWidth)), 0, kBarWidth);
      gauge = absl::StrCat(std::string(hashes, '#'), std::string(kBarWidth - hashes, '.'));
    }
    absl::StrAppend(out, absl::StrFormat("%-*s %6d %8s %11s / %-11s %5s  %s\n", width, name,
                                         device.op_count(), Percent(busy),
                                         FormatBytes(device.peak_memory_bytes()),
                                         FormatBytes(device.capacity_bytes()),
                                         used > 9.99 ? std::string(">999%")
                                                     : absl::StrFormat("%.0f%%", 100.0 * used),
                                         gauge));
  }
  if (static_cast<int>(shown.size()) < count) {
    absl::StrAppend(out, absl::StrFormat("... and %d more devices (the fullest are shown; "
                                         "--format=json lists all)\n",
                                         count - static_cast<int>(shown.size())));
  }
}

}  // namespace

absl::StatusOr<OutputFormat> ResolveOutputFormat(absl::string_view flag, bool stdout_is_terminal) {
  if (flag == "json") return OutputFormat::kJson;
  if (flag == "summary") return OutputFormat::kSummary;
  if (flag.empty() || flag == "auto") {
    return stdout_is_terminal ? OutputFormat::kSummary : OutputFormat::kJson;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--format=", flag, ": expected auto, json or summary"));
}

bool StdoutIsTerminal() { return isatty(STDOUT_FILENO) == 1; }

std::optional<int64_t> SingleDeviceMakespanNs(const v1::Graph& graph, const v1::Cluster& cluster,
                                              int32_t microbatches) {
  if (cluster.devices_size() == 0) return std::nullopt;
  double fastest = 0.0;
  for (const v1::Device& device : cluster.devices()) {
    fastest = std::max(fastest, device.has_speed() ? device.speed() : 1.0);
  }
  if (!(fastest > 0.0) || !std::isfinite(fastest)) return std::nullopt;
  int64_t total = 0;
  for (const v1::Op& op : graph.ops()) {
    // The simulator's rounding (engine::ScaledComputeNs): nearest, halves away from zero. A
    // per-microbatch op runs once per microbatch (api.md §2.1).
    total += static_cast<int64_t>(std::llround(static_cast<double>(op.compute_ns()) / fastest)) *
             (op.once_per_step() ? 1 : std::max(1, microbatches));
  }
  return total;
}

std::string FormatSummary(const v1::Placement& placement, const SummaryContext& context) {
  std::string out;
  const v1::PlacementMetrics& metrics = placement.metrics();
  const v1::Provenance& provenance = placement.provenance();

  std::string outcome;
  switch (placement.outcome()) {
    case v1::FEASIBLE:
      outcome = "FEASIBLE: every device's memory fits";
      break;
    case v1::INFEASIBLE:
      outcome = placement.reason().empty() ? "INFEASIBLE"
                                           : absl::StrCat("INFEASIBLE: ", placement.reason());
      break;
    default:
      outcome = "unknown";
  }
  // A reason may span lines; each is wrapped on its own.
  bool first = true;
  for (absl::string_view line : absl::StrSplit(outcome, '\n')) {
    AppendWrapped(first ? Label("outcome", line) : std::string(kLabelWidth, ' ') + std::string(line),
                  &out, kReasonLines);
    first = false;
  }
  if (context.violations != nullptr && !context.violations->empty()) {
    AppendWrapped(Label("violations", absl::StrCat(context.violations->size(),
                                                   " constraint(s) broken")),
                  &out);
    int listed = 0;
    for (const v1::ConstraintViolation& violation : *context.violations) {
      if (listed++ == kShownViolations) break;
      AppendWrapped(absl::StrCat(std::string(kLabelWidth, ' '), violation.field(), ": ",
                                 violation.description()),
                    &out);
    }
    if (context.violations->size() > kShownViolations) {
      AppendWrapped(absl::StrCat(std::string(kLabelWidth, ' '), "... and ",
                                 context.violations->size() - kShownViolations, " more"),
                    &out);
    }
  }
  AppendStepLines(placement, context, &out);
  AppendWrapped(Label("transfers", metrics.transfer_count() == 0 && metrics.transfer_bytes() == 0
                                       ? std::string("none")
                                       : absl::StrCat(metrics.transfer_count(), " (",
                                                      FormatBytes(metrics.transfer_bytes()), ")")),
                &out);
  const bool replaced = context.options != nullptr && !context.options->previous_placement().empty();
  if (replaced || metrics.ops_moved() > 0 || metrics.bytes_moved() > 0) {
    std::string moved = metrics.ops_moved() == 0
                            ? std::string("nothing (every op stayed where it was)")
                            : absl::StrCat(metrics.ops_moved(), metrics.ops_moved() == 1 ? " op, " : " ops, ",
                                           FormatBytes(metrics.bytes_moved()), " of weights and state");
    if (context.graph != nullptr && metrics.bytes_moved() > 0) {
      int64_t persistent = 0;
      for (const v1::Op& op : context.graph->ops()) persistent += op.persistent_bytes();
      if (persistent > 0) {
        absl::StrAppend(&moved, absl::StrFormat(" (%.1f %% of all)", 100.0 *
                                                    static_cast<double>(metrics.bytes_moved()) /
                                                    static_cast<double>(persistent)));
      }
    }
    AppendWrapped(Label("moved", moved), &out);
  }
  AppendWrapped(Label("algorithm", AlgorithmLine(provenance, metrics.makespan_ns())), &out);
  std::string timing;
  const std::string cache = CacheName(provenance.cache());
  if (!cache.empty()) {
    // A hit's solve time is the original computation's.
    timing = absl::StrCat(cache, "   queue ", FormatDurationNs(provenance.queue_ns()),
                          provenance.cache() == v1::HIT ? "   solved earlier in " : "   solve ",
                          FormatDurationNs(provenance.solve_ns()));
    AppendWrapped(Label("cache", timing), &out);
  } else if (provenance.solve_ns() > 0) {  // evaluate solves nothing
    AppendWrapped(Label("solve", FormatDurationNs(provenance.solve_ns())), &out);
  }
  out.push_back('\n');
  AppendDeviceTable(placement, context, &out);
  return out;
}

std::string FormatRecommendation(const v1::RecommendResponse& response) {
  std::string out = absl::StrFormat("%-2s %7s %8s %4s %4s %12s %14s %8s %6s %-4s %s\n", "", "devices",
                                    "replicas", "M", "W", "step", "microbatches/s", "speed-up",
                                    "effic.", "fits", "cache");
  for (int32_t i = 0; i < response.candidates_size(); ++i) {
    const v1::RecommendCandidate& row = response.candidates(i);
    const std::string mark = i == response.recommended() ? "=>" : "";
    if (row.has_error()) {
      std::string line = absl::StrFormat("%-2s %7d %8d  error: %s", mark, row.devices(), row.data_parallel(),
                                         row.error().message());
      if (line.size() > static_cast<size_t>(kSummaryWidth)) line = line.substr(0, kSummaryWidth - 3) + "...";
      absl::StrAppend(&out, line, "\n");
      continue;
    }
    const std::string cache = !row.operation().empty() && row.step_ns() == 0
                                  ? "running"
                                  : absl::AsciiStrToLower(v1::CacheResult_Name(row.cache()));
    absl::StrAppend(&out, absl::StrFormat("%-2s %7d %8d %4d %4d %12s %14.4g %7.2fx %6.2f %-4s %s\n", mark,
                                          row.devices(), row.data_parallel(), row.microbatches(),
                                          row.max_in_flight(), FormatDurationNs(row.step_ns()),
                                          row.microbatches_per_second(), row.speedup(), row.efficiency(),
                                          row.feasible() ? "yes" : "no", cache));
  }
  if (response.recommended() >= 0 && response.recommended() < response.candidates_size()) {
    const v1::RecommendCandidate& chosen = response.candidates(response.recommended());
    AppendWrapped(Label("devices", absl::StrJoin(chosen.device_names(), " ")), &out);
  }
  AppendWrapped(Label("recommended", response.reason()), &out);
  std::string answered = absl::StrCat(FormatDurationNs(response.elapsed_ns()), ", ", response.cache_hits(),
                                      " of ", response.candidates_size(), " candidates from the cache");
  if (response.refined() > 0) {
    absl::StrAppend(&answered, ", ", response.refined(), " contender", response.refined() == 1 ? "" : "s",
                    " re-solved with a longer share");
  }
  AppendWrapped(Label("answered", answered), &out);
  return out;
}

}  // namespace placement::report
