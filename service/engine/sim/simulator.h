// simulator.h — the single judge: simulates one training step under an assignment (api.md §2).
//
// Semantics (exactly api.md §2):
//  * A device runs one op at a time; op v on device d takes round(compute_ns / speed(d)) ns.
//  * An op may start when its device is free and every input has arrived. Among ready ops a device picks
//    the one with the highest priority and never idles while an op is ready. Priority = bottom level under
//    the simulated assignment: own time + longest path to the end, where an edge u->v across devices costs
//    the transfer that carries u's output to v's device, an edge inside a device costs 0. Ties: smaller op
//    name (byte order) = smaller canonical OpId.
//  * When u finishes on A, for each other device B hosting consumers of u, one transfer of
//    max(bytes of u's edges into B) arrives at finish(u) + latency(A,B) + round(bytes / bandwidth(A,B)).
//  * Event order: all events (finishes, arrivals) at time t are applied before any device picks at t;
//    devices pick in id order; an op of zero duration finishes at its start time and its consequences
//    are applied before the next pick at the same time.
//  * Memory on device d: persistent_bytes of its ops over [0, makespan); temp_bytes over [start, finish);
//    output_bytes of u over [start(u), max(last local consumer finish, last outgoing transfer arrival)),
//    or [start(u), finish(u)) when it has neither; a received copy (the transfer's bytes) on B over
//    [arrival, last consumer on B finish). Intervals are half-open: memory freed at t is available at t.
//  * Makespan = latest finish. Lower bound: see LowerBoundNs.
//
// Complexity O((V + E) log V) per run. A Simulator keeps scratch buffers: reuse one per thread.
//
// Example:
//   Simulator sim(model);
//   const SimResult& r = sim.Run(assignment);
//   int64_t step = r.makespan_ns;
#ifndef PLACEMENT_SERVICE_ENGINE_SIM_SIMULATOR_H_
#define PLACEMENT_SERVICE_ENGINE_SIM_SIMULATOR_H_

#include <cstdint>
#include <vector>

#include "service/engine/model/model.h"

namespace placement::engine {

struct SimOptions {
  // Compute per-device memory peaks (and the timeline below if requested).
  bool compute_memory = true;
  // Keep every memory interval in SimResult::memory_intervals (for memory repair and reports).
  bool record_memory_intervals = false;
  // Keep every transfer in SimResult::transfers.
  bool record_transfers = false;
};

// One contiguous use of memory on a device: `bytes` held over [from_ns, until_ns).
struct MemoryInterval {
  enum class Kind : uint8_t { kPersistent, kTemp, kOutput, kReceived };
  DeviceId device;
  OpId op;  // the op whose bytes these are (for kReceived: the producer)
  Kind kind;
  int64_t bytes;
  int64_t from_ns;
  int64_t until_ns;
};

struct TransferRecord {
  OpId producer;
  DeviceId from;
  DeviceId to;
  int64_t bytes;
  int64_t start_ns;    // = finish(producer)
  int64_t arrival_ns;  // start + latency + round(bytes / bandwidth)
};

struct SimResult {
  int64_t makespan_ns = 0;
  // Per op (canonical id).
  std::vector<int64_t> start_ns;
  std::vector<int64_t> finish_ns;
  std::vector<int64_t> bottom_level_ns;  // the priorities used
  // Per device.
  std::vector<int64_t> peak_memory_bytes;
  std::vector<int64_t> peak_time_ns;  // first time the peak is reached
  std::vector<int64_t> busy_ns;
  std::vector<int32_t> op_count;
  int64_t transfer_bytes = 0;
  int64_t transfer_count = 0;
  // Only with SimOptions::record_memory_intervals / record_transfers.
  std::vector<MemoryInterval> memory_intervals;
  std::vector<TransferRecord> transfers;

  // True when every device's peak <= model.capacity_bytes.
  bool MemoryFits(const Model& model) const;
};

class Simulator {
 public:
  explicit Simulator(const Model& model);

  // Simulates `assignment` (device per canonical op id; every entry in [0, num_devices)). The returned
  // reference stays valid until the next Run on this simulator.
  const SimResult& Run(const Assignment& assignment, const SimOptions& options = SimOptions());

  const Model& model() const { return model_; }

 private:
  const Model& model_;
  SimResult result_;
  // Scratch reused across runs.
  std::vector<int32_t> pending_inputs_;
  std::vector<int64_t> ready_time_;
  std::vector<int64_t> arrival_scratch_;
  std::vector<int32_t> device_scratch_;
};

// max(longest path of op times on the fastest device with free communication (each op's time rounded
// individually), round(total compute_ns / total speed)).
int64_t LowerBoundNs(const Model& model);

// Ops on one critical path of a simulated schedule, from the first to the last: starting at an op that
// finishes at the makespan, repeatedly step to the input (or the previous op on the same device) whose
// arrival/finish determined the op's start. Ties by smaller OpId.
std::vector<OpId> CriticalPath(const Model& model, const Assignment& assignment,
                               const SimResult& result);

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_SIM_SIMULATOR_H_
