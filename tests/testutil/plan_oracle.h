// plan_oracle.h — an independent reference simulator of api.md §2 and §2.1 (training plans), for
// differential tests of the product's simulator (service/engine/sim/simulator.h).
//
// It is written from the contract's text and the documented decisions at the top of simulator.h, and
// shares no code with the engine: it reads the PlaceRequest protobuf itself (names, merged edges, links,
// speeds) and never touches Model or Simulator. It is meant to be obviously right, not fast:
//
//  * the unrolled step is materialised: one node per (op, microbatch) instance (one per once op), one
//    object per transfer (every copy's, every accumulated gradient's, every once producer's), one object
//    per all-reduce;
//  * the schedule is a plain loop over a time-ordered event list: at time t every event at t is applied
//    (op finishes, transfer arrivals, all-reduce ends), then a device round (every free device starts
//    its best ready instance), repeated while rounds start something (zero durations add events at t);
//    once nothing more happens at t, a ring round (every free ring starts its earliest-ready
//    all-reduce, ties by producer name), and again from the top while that adds events at t; then time
//    moves to the next event;
//  * memory is a list of explicit half-open [from, until) intervals per device, swept by brute force.
//
// Quadratic or worse: meant for graphs of tens of ops, a few devices and a few microbatches.
//
// Example:
//   v1::PlaceRequest request = ...;                 // the whole cluster (all D groups)
//   std::vector<int32_t> device = {0, 1, 1, 0};     // per op in request order, group-0 device index
//   OracleResult r = SimulatePlanOracle(request, device, /*microbatches=*/4, /*max_in_flight=*/2,
//                                       /*data_parallel=*/1);
//   if (!r.error.empty()) ...;                      // bad input or no progress (a deadlock)
//   int64_t step = r.makespan_ns;
#ifndef PLACEMENT_TESTS_TESTUTIL_PLAN_ORACLE_H_
#define PLACEMENT_TESTS_TESTUTIL_PLAN_ORACLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "placement/v1/placement.pb.h"

namespace placement::testutil {

// One run of an op: per-microbatch ops have M instances (microbatch 0..M-1), once ops one (microbatch 0).
struct OracleInstance {
  int32_t op = 0;  // index into request.graph.ops
  int32_t microbatch = 0;
  int32_t device = 0;
  int64_t start_ns = 0;
  int64_t finish_ns = 0;
};

struct OracleTransfer {
  enum class Kind { kPerCopy, kAccumulated, kOnce };
  Kind kind = Kind::kPerCopy;
  int32_t producer = 0;     // request op index
  int32_t microbatch = -1;  // the producer's copy for kPerCopy; -1 otherwise
  int32_t from = 0;
  int32_t to = 0;
  int64_t bytes = 0;
  int64_t leave_ns = 0;
  int64_t arrival_ns = 0;
};

struct OracleAllReduce {
  int32_t producer = 0;  // request op index of the gradient producer
  int32_t device = 0;    // group-0 device whose ring carries it
  int64_t bytes = 0;
  int64_t duration_ns = 0;
  int64_t ready_ns = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

struct OracleInterval {
  enum class Kind { kPersistent, kTemp, kOutput, kReceived, kAccumulation, kReceivedAccumulated };
  Kind kind = Kind::kPersistent;
  int32_t device = 0;
  int32_t op = 0;           // request op index (for received copies: the producer)
  int32_t microbatch = -1;  // per-copy bytes only; -1 for persistent, once ops and accumulated buffers
  int64_t bytes = 0;
  int64_t from_ns = 0;
  int64_t until_ns = 0;
};

struct OracleResult {
  std::string error;  // empty on success
  int64_t makespan_ns = 0;
  int64_t lower_bound_ns = 0;
  // Per device of group 0.
  std::vector<int64_t> peak_memory_bytes;
  std::vector<int64_t> peak_time_ns;
  std::vector<int64_t> busy_ns;
  std::vector<int32_t> op_count;
  int64_t transfer_bytes = 0;
  int64_t transfer_count = 0;
  // Per op (request order): the §2 bottom level used as priority.
  std::vector<int64_t> bottom_level_ns;
  // Per op: when a gradient producer's accumulated gradient could leave (its last copy's finish, or its
  // all-reduce's end with D > 1); -1 for other ops.
  std::vector<int64_t> gradient_ready_ns;
  // Per microbatch: the last finish of its per-microbatch instances (0 when there are none).
  std::vector<int64_t> microbatch_done_ns;
  // Every instance, ordered by (op, microbatch).
  std::vector<OracleInstance> instances;
  std::vector<OracleTransfer> transfers;     // in creation order (not sorted)
  std::vector<OracleAllReduce> all_reduces;  // one per gradient producer when data_parallel > 1
  // Every interval, including empty ones and zero-byte ones.
  std::vector<OracleInterval> intervals;

  // The instance of request op `op`, microbatch `m` (0 for a once op), or nullptr.
  const OracleInstance* Find(int32_t op, int32_t m) const;
};

// Simulates one step of `request` (its graph; its cluster is the whole cluster, D groups of N/D devices)
// with `device[i]` the group-0 device of request op i, M = `microbatches` (>= 1), W = `max_in_flight`
// (1..M) and D = `data_parallel` (>= 1, dividing the device count). The request's own options are
// ignored. Expects a valid request (names unique, a DAG, the once-op rule of api.md §2.1); a violation
// or a run that cannot make progress is reported in `error`.
OracleResult SimulatePlanOracle(const v1::PlaceRequest& request, const std::vector<int32_t>& device,
                                int32_t microbatches, int32_t max_in_flight, int32_t data_parallel);

}  // namespace placement::testutil

#endif  // PLACEMENT_TESTS_TESTUTIL_PLAN_ORACLE_H_
