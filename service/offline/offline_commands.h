// offline_commands.h — the verbs of `placement_offline` (api.md §3), one function each, sharing the
// flags declared here. Each returns the process exit status: 0 success, 1 invalid input or failure
// (every problem on stderr with its field path / file position; nothing on stdout), 2 usage error.
#ifndef PLACEMENT_SERVICE_OFFLINE_OFFLINE_COMMANDS_H_
#define PLACEMENT_SERVICE_OFFLINE_OFFLINE_COMMANDS_H_

#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "placement/v1/placement.pb.h"
#include "service/engine/io/placement_file.h"
#include "service/engine/model/model.h"

ABSL_DECLARE_FLAG(std::string, request);
ABSL_DECLARE_FLAG(std::string, placement);
ABSL_DECLARE_FLAG(std::string, algorithm);
ABSL_DECLARE_FLAG(std::string, algorithms);
ABSL_DECLARE_FLAG(std::string, out);
ABSL_DECLARE_FLAG(std::string, format);
ABSL_DECLARE_FLAG(std::string, from);
ABSL_DECLARE_FLAG(std::string, in);
ABSL_DECLARE_FLAG(std::string, cluster);
ABSL_DECLARE_FLAG(std::string, to);
ABSL_DECLARE_FLAG(double, time_limit_s);
ABSL_DECLARE_FLAG(uint64_t, seed);

namespace placement::offline {

// `args` are the positional arguments after the verb.
int RunPlace(const std::vector<std::string>& args);
int RunEvaluate(const std::vector<std::string>& args);
int RunCompare(const std::vector<std::string>& args);
int RunConvert(const std::vector<std::string>& args);
int RunExport(const std::vector<std::string>& args);
int RunReport(const std::vector<std::string>& args);

// Applies --microbatches, --max_in_flight and --data_parallel (api.md §2.1) to `options` where given.
void ApplyPlanFlags(v1::PlacementOptions* options);

// Re-placement: --previous=FILE with --previous_request=FILE (that placement's request) become the
// request's options.previous_placement (and as options.departed_devices the previous request's devices
// that its cluster lacks), and --move_weight options.move_weight_ns_per_byte, where given. An error
// names the file that could not be read, or the flag missing its partner.
absl::Status ApplyReplacementFlags(v1::PlaceRequest* request);

// Prints `status` on stderr as "CODE: message" and returns the exit code of a failed verb (1).
int Fail(const absl::Status& status);
// Prints `message` on stderr and returns the exit code of a usage error (2).
int UsageError(const std::string& message);

// The algorithms named in `list` (comma-separated, blanks ignored), each checked against the registry.
// INVALID_ARGUMENT naming `flag` ("--algorithms") and the known algorithms when one is unknown. An empty
// list gives no names.
absl::StatusOr<std::vector<std::string>> ParseAlgorithmNames(const std::string& flag,
                                                             const std::string& list);

// Time limit of a solve when neither --time_limit_s nor the request sets one.
inline constexpr absl::Duration kDefaultTimeLimit = absl::Seconds(60);

// The time limit of one solve: --time_limit_s, else the request's options.time_limit, else
// kDefaultTimeLimit.
absl::Duration SolveTimeLimit(const v1::PlacementOptions& options);
// engine::Solve with a deadline `limit` from now: each algorithm a verb runs gets the whole limit.
absl::StatusOr<v1::Placement> SolveWithin(const engine::Model& model, const v1::PlacementOptions& options,
                                          absl::Duration limit);

// Reads a Placement file, accepting a PlaceResponse or EvaluateResponse wrapper too.
using engine::ReadPlacementFile;

}  // namespace placement::offline

#endif  // PLACEMENT_SERVICE_OFFLINE_OFFLINE_COMMANDS_H_
