// A short plain-text summary of a placement, for people reading a terminal: outcome and reason, the
// step time against the lower bound and against the whole step on the fastest single device, one row
// per device (ops, busy %, peak memory / capacity), transfers, what a re-placement moved, the algorithm
// (and `auto`'s winner),
// cache state, queue and solve time.
//
// `placementctl place|wait|evaluate` and `placement_offline place|evaluate` print it instead of JSON
// when standard output is a terminal or with --format=summary; JSON stays the default everywhere else
// so that scripts keep working.
//
// Deliberately light: it needs only the protobuf messages (no engine, no simulator), so the command-
// line client can keep it when it sheds the engine.
#ifndef PLACEMENT_SERVICE_REPORT_TEXT_SUMMARY_H_
#define PLACEMENT_SERVICE_REPORT_TEXT_SUMMARY_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "placement/v1/cluster.pb.h"
#include "placement/v1/graph.pb.h"
#include "placement/v1/placement.pb.h"
#include "placement/v1/placement_service.pb.h"

namespace placement::report {

// Every line of the summary is at most this wide (a 100-column terminal), for any number of devices.
inline constexpr int kSummaryWidth = 100;

// What to print on standard output.
enum class OutputFormat { kJson, kSummary };

// Resolves --format: "json" and "summary" force one; "auto" (or "") picks the summary when standard
// output is a terminal. Anything else is INVALID_ARGUMENT naming the accepted values.
absl::StatusOr<OutputFormat> ResolveOutputFormat(absl::string_view flag, bool stdout_is_terminal);

// True when file descriptor 1 is a terminal.
bool StdoutIsTerminal();

// The makespan of the whole step on the fastest device of `cluster`: one device runs its ops one after
// another, never idling while an op is ready, and moves nothing (api.md §2), so its makespan is the sum
// of its op times, round(compute_ns / speed) each, rounded as the simulator does; with M microbatches
// (api.md §2.1) every per-microbatch op runs M times. nullopt when the cluster has no devices.
std::optional<int64_t> SingleDeviceMakespanNs(const v1::Graph& graph, const v1::Cluster& cluster,
                                              int32_t microbatches = 1);

struct SummaryContext {
  // The request's graph and cluster, when known: device names and the single-device comparison need
  // them (placementctl wait has only the placement). Not owned; may be null.
  const v1::Graph* graph = nullptr;
  const v1::Cluster* cluster = nullptr;
  // evaluate: the constraints the assignment breaks. May be null.
  const google::protobuf::RepeatedPtrField<v1::ConstraintViolation>* violations = nullptr;
  // Shown when the single-device comparison is missing for want of the request (e.g.
  // "give --request=FILE"); empty = just "n/a".
  std::string request_hint;
  // The request's options, when known: with a previous placement (re-placement) the summary says what
  // moved, even when nothing did. Not owned; may be null (a placement that reports moves still shows them).
  const v1::PlacementOptions* options = nullptr;
};

// The summary, lines ended by '\n', none wider than kSummaryWidth.
std::string FormatSummary(const v1::Placement& placement, const SummaryContext& context);

// A Recommend answer as a table, one row per candidate (devices, replicas, M, W, step, microbatches/s,
// speed-up, efficiency, fits, cache), the recommended row marked, then the reason. Rows whose candidate
// failed show its error instead. Lines ended by '\n'; the device names are listed for the
// recommended row only (the JSON has every row's).
std::string FormatRecommendation(const v1::RecommendResponse& response);

}  // namespace placement::report

#endif  // PLACEMENT_SERVICE_REPORT_TEXT_SUMMARY_H_
