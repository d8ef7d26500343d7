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
//  * Makespan = latest finish. Lower bound: see LowerBoundNs. When the makespan is 0 every interval is
//    empty, so every peak is 0. Every decision in detail: below.
//
// Complexity O((V + E) log V) per run; constructing a Simulator costs O(V + E) once per model (it keeps
// a depth-ordered copy of the graph). A Simulator keeps scratch buffers: reuse one per thread; it is not
// thread-safe. Runs are deterministic: the same model and assignment give the same result.
//
// Example:
//   Simulator sim(model);
//   const SimResult& r = sim.Run(assignment);
//   int64_t step = r.makespan_ns;
//
// Every decision in detail (an independent implementation that follows it agrees to the nanosecond and
// the byte):
//
// **Op time.** Op v on device d takes `round(compute_ns / speed(d))`, halves away from zero
// (`std::llround` of the double quotient; `ScaledComputeNs` in model.h). Speed 1.0 is exact.
//
// **Transfers.** Edges are the model's merged edges (parallel edges between two ops add their bytes). When
// u on device A finishes, for every other device B hosting at least one consumer of u, exactly one transfer
// of `max(bytes of u's edges into B)` leaves at `finish(u)` and arrives at
// `finish(u) + latency(A,B) + round(bytes × 1e9 / bandwidth(A,B))`, the quotient rounded half up in exact
// integer arithmetic. A 0-byte transfer (control edges only) still costs the latency and is counted in
// `transfer_count` and in `transfers`. Transfers never slow each other down. An input from the same device
// arrives at the producer's finish.
//
// **Priority.** The bottom level under the simulated assignment:
// `bl(u) = time(u) + max(0, max over edges u→v of c(u,v) + bl(v))`, with `c = 0` on the same device and
// otherwise the duration of the one transfer from u to v's device (so every consumer on that device sees the
// duration of the largest edge into it). Higher bl first; ties by smaller OpId = smaller name in byte order.
//
// **Event order** (times are integer ns):
// 1. At time t, every event is applied first: op finishes (the device becomes free, its successors' inputs
//    become known) and, when memory is computed, transfer arrivals. An op whose last input arrives at t is
//    ready at t.
// 2. Then a pick round: every free device with a ready op starts its highest-priority one at t. "Devices pick
//    in id order" is honoured trivially: a device only takes ops from its own queue, so no device's pick can
//    change another's within a round.
// 3. An op of zero duration finishes at its start time; its finish is an event at t, applied before the
//    next pick round at t (so one device may run several zero-duration ops at one time, and an op made ready
//    by one of them is seen only by the next round). Rounds repeat until nothing more happens at t.
// 4. A device never idles while it has a ready op; there is no lookahead and no preemption.
//
// **Makespan** = latest finish (0 for an empty graph).
//
// **Memory** per device, as half-open intervals `[from, until)`:
//
// | what | bytes | interval |
// |---|---|---|
// | persistent | `persistent_bytes` of each op on d | `[0, makespan)` |
// | temp | `temp_bytes` | `[start, finish)` |
// | output of u | `output_bytes` | `[start(u), max(last finish of u's consumers on d, last arrival of u's transfers))`; `[start, finish)` when u has neither |
// | received copy on B | the transfer's bytes | `[arrival, last finish of u's consumers on B)` |
//
// Memory freed at t is available to an allocation at t, and an empty interval (`from == until`) counts
// nothing. Consequence worth knowing: when the makespan is 0 (every op takes no time), even persistent bytes
// count nothing and every peak is 0. `peak_memory_bytes` is the largest total over time; `peak_time_ns` the
// first time it is reached (0 when nothing is ever held). `MemoryFits` compares peaks to `capacity_bytes`
// (= `floor(memory_bytes × (1 − memory_headroom))`, computed by the model builder).
//
// Recorded intervals (`record_memory_intervals`) omit intervals of 0 bytes or 0 length; `op` of a received
// copy is the producer. They are in no particular order.
//
// **Lower bound** (`LowerBoundNs`): `max(P, W)`. P = longest path where each op takes
// `round(compute_ns / fastest speed)` (rounded per op) and communication is free. W =
// `llround(Σ compute_ns / Σ speed of all devices)`, the sum of compute in exact integer arithmetic then one
// double division. P never exceeds a simulated makespan (rounding is monotone in speed). W can exceed it by
// rounding alone when op times are rounded down (e.g. four 1 ns ops on two devices of speed 3 take 0 ns each
// while W = round(4/6) = 1): the contract defines the bound this way, so it is reported as defined.
//
// **Critical path** (`CriticalPath`): starting at the smallest-id op finishing at the makespan, step to
// whichever determined the op's start — an input whose arrival equals the start, or the op that ran just
// before on the same device (`SimResult::previous_on_device`) if it finished at the start — taking the
// smallest OpId on ties; stop at an op that starts at 0 with no such predecessor. The path runs first to last.
//
// ## Training plans (api.md §2.1), on the same code path
//
// The model's `plan` (M microbatches, window W, D replicas) and `once_per_step` ops. With M = 1, no once
// op and D = 1 everything below reduces to §2 above, nanosecond for nanosecond and byte for byte.
//
// **Unrolled step.** Every per-microbatch op u has copies u#0..u#M-1 (instances), all on u's device,
// each taking u's time; a once op runs once. Nothing is copied: an instance is an (op, microbatch) pair,
// indexed `m × num_ops + op` in SimResult (a once op only at m = 0).
//
// **Edges and transfers.** per-microbatch u → per-microbatch v: `u#m → v#m`; when u#m finishes, one
// transfer per other device B hosting per-microbatch consumers of u, of `max(bytes of u's edges into
// per-microbatch ops on B)`. per-microbatch u → once v (u is a *gradient producer*): v waits for the
// accumulated gradient, which is ready when the last copy of u has finished (with D > 1: when u's
// all-reduce has ended); then one transfer per other device B hosting once consumers of u, of `max(bytes
// of u's edges into once ops on B)`; a once consumer on u's own device has it at that time. Once u → any
// v: when u finishes, one transfer per other device hosting consumers of u, of `max(bytes of u's edges
// into B)` (§2); every copy of a per-microbatch consumer waits for it.
//
// **Priority** (ready instances on one device): the lowest microbatch index first (a once op counts as
// −1 when no per-microbatch op is among its ancestors, else as M), then the highest bottom level — u's in
// the one-microbatch graph under this assignment, §2 exactly (a cross-device edge costs the §2 transfer
// of `max(bytes of u's edges into B)`, all of u's consumers on B counted) — then the smaller name.
//
// **Window.** An instance of microbatch m >= W is not ready before every per-microbatch op's copy of
// microbatch m − W has finished; it becomes ready at that time (an event like an input's arrival). Once
// ops are not windowed. W is SimOptions::max_in_flight if set, else the plan's (0 = M = no limit).
//
// **All-reduce** (D > 1; the model is replica group 0's, see replica_group.h): for every gradient
// producer u, a ring all-reduce of `a = max(bytes of u's edges into once ops)` over the ring through u's
// device, taking `round(2(D−1) × a × 1e9 / (D × bandwidth)) + 2(D−1) × latency` with the ring's slowest
// link (`Model::ring_link`; the quotient rounded half up in exact integer arithmetic). It is ready when
// the last copy of u has finished. The all-reduces of one ring run one at a time: whenever the ring is
// free it starts, among those ready, the one ready first (ties: the smaller producer name). A ring
// picks only once nothing else happens at the current time (every event applied, every device's pick
// made, zero-duration ops and their consequences included), so all-reduces that become ready at the
// same time start in name order. Its end is an event (a zero-length all-reduce ends at its start,
// and what it releases is picked at that same time).
//
// **Memory.** §2 per instance: persistent bytes once per op over [0, makespan); temp bytes per instance;
// the output of u#m from its start until its per-microbatch consumers' copies m on its device have
// finished and its per-copy transfers have arrived ([start, finish) when it has neither); a received copy
// from its arrival until the consumers' copies m on B have finished. A once op's output and received
// copies are held until every consumer instance there (all M copies of a per-microbatch consumer) has
// finished. A gradient producer also holds one *accumulation buffer* of its output_bytes from the earliest
// start of its copies until its once consumers on its device have finished, its all-reduce has ended and
// its transfers to once consumers elsewhere have arrived; a received accumulated buffer is held from its
// arrival until the last once consumer there has finished.
//
// **Step and bound.** Makespan = the last finish of any instance. `busy_ns` counts every instance,
// `op_count` the ops placed (not their copies), `transfer_bytes`/`transfer_count` every transfer (per
// copy, and the accumulated ones). `LowerBoundNs` = max(longest path with free communication on the
// fastest device (the unrolled graph's longest path is one microbatch's), llround((M × Σ per-microbatch
// compute + Σ once compute) / Σ speed)) over the model's devices (group 0's).
//
// Cost: O(M × (V + E) log V) time, O(M × (V + T)) memory (T = transfers of one microbatch).
#ifndef PLACEMENT_SERVICE_ENGINE_SIM_SIMULATOR_H_
#define PLACEMENT_SERVICE_ENGINE_SIM_SIMULATOR_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "service/engine/model/model.h"

namespace placement::engine {

struct SimOptions {
  // The window W to simulate with (api.md §2.1): 0 = the model's plan (plan.max_in_flight, or no window
  // when that is 0); else 1..M.
  int32_t max_in_flight = 0;
  // Compute per-device memory peaks (and the timeline below if requested). When false, the peaks are 0
  // and the schedule is the same.
  bool compute_memory = true;
  // Keep every memory interval in SimResult::memory_intervals (for memory repair and reports).
  bool record_memory_intervals = false;
  // Keep every transfer in SimResult::transfers (in the order their producers finish).
  bool record_transfers = false;
  // > 0: stop as soon as the step is certain to take at least this long. Two bounds, both exact
  // consequences of §2: an input of op v known to arrive at t makes the step at least t + bl(v) (v's
  // bottom level is a path of op times and transfers that nothing shortens; plain steps only: with a
  // plan a copy's transfers can be smaller than the §2 ones the priority counts), and a device picking
  // an op at t with W of its compute not yet started (that op's included; every copy of a plan) runs
  // until t + W at least. A search that only asks whether
  // an assignment beats one of step S passes S: an assignment stopped early cannot. Then
  // SimResult::stopped_early is set, makespan_ns is the bound reached (>= stop_at_ns, <= the step a
  // full run gives), the peaks cover only what was simulated, and nothing else in the result is valid.
  // (Rejected moves of the critical-path search are mostly told apart late: on Inception-v3 and
  // ResNet-32 steps a stopped run had simulated 68-88 % of the ops.)
  int64_t stop_at_ns = 0;
};

// One contiguous use of memory on a device: `bytes` held over [from_ns, until_ns).
struct MemoryInterval {
  // kAccumulation: a gradient producer's accumulation buffer (api.md §2.1); a received accumulated
  // buffer is kReceived with microbatch −1.
  enum class Kind : uint8_t { kPersistent, kTemp, kOutput, kReceived, kAccumulation };
  DeviceId device;
  OpId op;  // the op whose bytes these are (for kReceived: the producer)
  Kind kind;
  int64_t bytes;
  int64_t from_ns;
  int64_t until_ns;
  // The copy these bytes belong to; −1 for what is not per copy (persistent bytes, once ops,
  // accumulation buffers and their transfers).
  int32_t microbatch = -1;
};

struct TransferRecord {
  OpId producer;
  DeviceId from;
  DeviceId to;
  int64_t bytes;
  int64_t start_ns;    // = finish(producer), or when the accumulated gradient was ready
  int64_t arrival_ns;  // start + latency + round(bytes / bandwidth)
  int32_t microbatch = -1;  // the producer's copy; −1 for a once producer or an accumulated gradient
};

// One ring all-reduce of a gradient producer's accumulated gradient (api.md §2.1, D > 1).
struct AllReduceRecord {
  OpId producer;
  DeviceId device;  // the ring through this device of group 0
  int64_t bytes;
  int64_t ready_ns;  // the last copy of the producer finished
  int64_t start_ns;
  int64_t end_ns;
};

struct SimResult {
  int64_t makespan_ns = 0;
  // SimOptions::stop_at_ns cut the run short: makespan_ns is a lower bound >= stop_at_ns.
  bool stopped_early = false;
  // The plan simulated: M and the window W applied (M = no limit).
  int32_t microbatches = 1;
  int32_t max_in_flight = 1;
  // Per instance `m × num_ops + op` (canonical op id; m = 0 only for a once op, whose other slots hold
  // −1). With M = 1: per op.
  std::vector<int64_t> start_ns;
  std::vector<int64_t> finish_ns;
  // The instance that ran just before on the same device, or kNone (execution order, which (start,
  // finish) alone cannot give when zero-duration ops share a start time).
  std::vector<int32_t> previous_on_device;
  // Per op (canonical id): the priorities used (§2 bottom levels).
  std::vector<int64_t> bottom_level_ns;
  // Per op, only with once ops: when the accumulated gradient of a gradient producer could leave (its
  // last copy's finish, or its all-reduce's end with D > 1); −1 for other ops.
  std::vector<int64_t> gradient_ready_ns;
  // Per microbatch: when its last per-microbatch copy finished.
  std::vector<int64_t> microbatch_done_ns;
  // Per device.
  std::vector<int64_t> peak_memory_bytes;
  std::vector<int64_t> peak_time_ns;  // first time the peak is reached
  std::vector<int64_t> busy_ns;
  std::vector<int32_t> op_count;
  int64_t transfer_bytes = 0;
  int64_t transfer_count = 0;
  // Only with SimOptions::record_memory_intervals / record_transfers. Intervals with no bytes or no
  // duration are left out; transfers of 0 bytes (control edges across devices) are kept.
  std::vector<MemoryInterval> memory_intervals;
  std::vector<TransferRecord> transfers;
  std::vector<AllReduceRecord> all_reduces;  // with record_transfers, in the order they started

  // True when every device's peak <= model.capacity_bytes.
  bool MemoryFits(const Model& model) const;
  // Start and finish of op v's copy m (m = 0 for a once op).
  int64_t StartNs(OpId v, int32_t m, int32_t num_ops) const {
    return start_ns[static_cast<size_t>(m) * num_ops + v];
  }
  int64_t FinishNs(OpId v, int32_t m, int32_t num_ops) const {
    return finish_ns[static_cast<size_t>(m) * num_ops + v];
  }
};

class Simulator {
 public:
  explicit Simulator(const Model& model);
  // Leaves the per-instance buffers to the thread's SimulatorScratchScope, if one is open.
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  // Hands the per-instance buffers (the bulk of the memory: about 60 bytes per op copy) to the thread's
  // SimulatorScratchScope now, for a simulator about to be built beside this one; the next Run takes
  // them back, or allocates anew if another simulator took them. The last result is no longer valid.
  // No-op without an open scope.
  void ReleaseScratch();

  // Simulates `assignment` (device per canonical op id; every entry in [0, num_devices)). The returned
  // reference stays valid until the next Run on this simulator.
  const SimResult& Run(const Assignment& assignment, const SimOptions& options = SimOptions());

  const Model& model() const { return model_; }

 private:
  // Internally ops are numbered in (depth, OpId) order ("rank", a topological order): consumers then sit
  // close to their producers, so the per-edge state the simulation touches stays in cache (canonical ids
  // follow names and are scattered). An instance (op copy) is `m × num_ops + rank`; a once op's is its
  // rank. Results are written back under canonical ids.

  // Per rank, fixed for one run.
  struct RankInfo {
    int64_t bottom_level;  // priority
    int64_t duration;      // run time on its device
    DeviceId device;
    // Priority class of a once op (−1 before the microbatches, M after them); 0 for per-microbatch ops,
    // whose class is their microbatch.
    int32_t once_class;
  };
  // Per instance: what the simulation tracks of one op copy.
  struct InstanceState {
    int64_t ready_time;  // latest arrival of an input known so far
    int32_t pending;     // inputs whose arrival time is not known yet
    int32_t holders;     // memory: local consumers + transfers not done with the output
  };
  // One transfer per producer and destination device (and, for a gradient producer, separately for
  // its per-copy consumers and its once consumers); also the received copy it leaves there.
  enum class TransferKind : uint8_t { kPerCopy, kGradient, kOnce };
  struct Transfer {
    int64_t duration;
    int64_t bytes;
    DeviceId device;
    int32_t consumers;  // consumer instances on `device` that read the received copy (memory)
    TransferKind kind;
  };
  // A pending event: `kind` >= 0 is a transfer id (`op` = the producer's instance) arriving at `time`;
  // kFinish / kReady are about instance `op`; kAllReduceEnd about the gradient producer of rank `op`.
  struct Event {
    int64_t time;
    int32_t op;
    int32_t kind;
  };
  // An instance waiting on its device: the lowest class (microbatch) first, then the greatest bottom
  // level, then the smaller OpId.
  struct ReadyOp {
    int64_t bottom_level;
    OpId op;       // canonical id, for the tie-break
    int32_t instance;
    int32_t rank;
    int32_t klass;
  };
  // A gradient producer waiting for its ring: the earliest ready first, then the smaller OpId.
  struct ReadyAllReduce {
    int64_t ready_time;
    OpId op;
    int32_t rank;
  };
  static constexpr int32_t kFinish = -1;
  static constexpr int32_t kReady = -2;
  static constexpr int32_t kAllReduceEnd = -3;

  // Run's phases (simulator.cc).
  void PrepareTransfers(const Assignment& assignment, bool memory);
  void ComputeBottomLevels();
  void PrepareInstances(bool memory);
  // kPlan = false: the plain step (one microbatch, no once op, no replicas), with every plan branch
  // compiled out; the same code otherwise.
  template <bool kPlan>
  void Simulate(const SimOptions& options);
  void WriteResult(const SimOptions& options);
  void StartOp(int32_t instance, int32_t rank, DeviceId d, int64_t now, bool memory);
  template <bool kPlan>
  void FinishOp(int32_t instance, int64_t now, const SimOptions& options);
  template <bool kPlan>
  void InputKnown(int32_t instance, int64_t arrival, int64_t now);
  void ReleaseGradient(int32_t u, int64_t now, const SimOptions& options);
  template <bool kPlan>
  void ArriveTransfer(int32_t instance, int32_t x, int64_t now, const SimOptions& options);
  template <bool kPlan>
  void ReleaseInputs(int32_t instance, int32_t u, int32_t m, DeviceId a, int64_t now, bool record);
  template <bool kPlan>
  void MakeReady(int32_t instance);
  template <bool kPlan>
  void Enqueue(int32_t instance, int32_t rank, int32_t klass);
  void MicrobatchDone(int32_t m, int64_t now);
  void PushEvent(int64_t time, int32_t op, int32_t kind);
  void Allocate(DeviceId d, int64_t bytes);
  void Release(DeviceId d, int64_t bytes) { Allocate(d, -bytes); }
  void RecordPeaks(int64_t now);
  void RecordInterval(DeviceId d, int32_t rank, MemoryInterval::Kind kind, int64_t bytes, int64_t from,
                      int64_t until, int32_t microbatch);
  int64_t TransferTimeNs(DeviceId a, DeviceId b, int64_t bytes) const;
  int32_t ProducerOfTransfer(int32_t x) const;
  bool IsOnce(int32_t rank) const { return once_rank_[rank] != 0; }

  // Per-instance buffers between the thread's scope and a simulator (simulator.cc).
  struct InstanceScratch;
  friend class SimulatorScratchScope;
  void TakeScratch(size_t instances);
  void LeaveScratch();
  void SwapScratch(InstanceScratch& other);

  const Model& model_;
  SimResult result_;

  // ---- Built once per model, in rank order ----
  std::vector<OpId> op_of_rank_;
  std::vector<EdgeId> out_offset_;         // out CSR over ranks, edges in the model's order
  std::vector<int32_t> out_dst_;           // consumer rank
  std::vector<int64_t> out_bytes_;
  std::vector<int32_t> out_to_in_;         // position of the same edge in the in CSR
  std::vector<EdgeId> in_offset_;          // in CSR over ranks
  std::vector<int32_t> in_src_;            // producer rank
  std::vector<int64_t> compute_ns_, persistent_bytes_;
  // temp_bytes and output_bytes side by side: both are read when an op starts and when it finishes.
  std::vector<std::pair<int64_t, int64_t>> temp_output_bytes_;
  // Per ordered device pair: the largest byte count whose transfer time is exact in 64-bit arithmetic
  // (-1 when the link has no positive bandwidth).
  std::vector<int64_t> link_fast_bytes_;
  // Training plan: M, D, once flags and priority classes, per-microbatch op count.
  int32_t microbatches_ = 1;
  int32_t replicas_ = 1;
  bool has_once_ = false;
  std::vector<uint8_t> once_rank_;
  std::vector<int32_t> once_class_;        // per rank: −1 or M for once ops, 0 otherwise
  std::vector<uint8_t> gradient_producer_;  // per rank: a per-microbatch op with an edge into a once op
  int32_t per_microbatch_ops_ = 0;

  // ---- Scratch reused across runs (sized on the first run, never shrunk) ----
  int32_t window_ = 1;
  std::vector<RankInfo> info_;
  std::vector<InstanceState> state_;        // per instance
  std::vector<int64_t> start_;             // per instance
  std::vector<int32_t> previous_;          // per instance: instance that ran before on the device, or -1
  std::vector<int32_t> holders_init_;      // per rank: an instance's output holders at the start
  std::vector<int32_t> transfer_offset_;   // per rank + 1: its transfers, contiguous
  std::vector<int32_t> gradient_offset_;   // per rank: where its gradient transfers begin
  std::vector<Transfer> transfers_;
  std::vector<int32_t> edge_transfer_;     // per out-edge: transfer carrying it, or -1 inside a device
  std::vector<int64_t> edge_cost_;         // per out-edge, with once ops: its §2 transfer time (priority)
  // Per in-edge: what its consumer holds while it runs: the producer's output (its rank, >= 0) or a
  // received copy (~transfer id, < 0).
  std::vector<int32_t> in_holder_;
  std::vector<int32_t> transfer_holders_;  // per instance transfer `m × T + x` (memory)
  std::vector<int64_t> transfer_arrival_;  // per instance transfer (memory intervals)
  // Gradient producers, per rank.
  std::vector<int32_t> copies_left_;       // copies not finished
  std::vector<int32_t> accumulation_holders_;
  std::vector<int64_t> accumulation_start_;  // −1 until the first copy starts
  std::vector<int64_t> gradient_ready_;      // when the accumulated gradient could leave, or −1
  std::vector<int64_t> all_reduce_duration_;
  std::vector<int64_t> all_reduce_bytes_;
  std::vector<int64_t> all_reduce_ready_;
  std::vector<int64_t> all_reduce_start_;
  // Window: per microbatch, copies left and when it completed; instances parked on microbatch k (those
  // of k + W whose inputs are all there), as linked lists through gate_next_.
  std::vector<int32_t> microbatch_left_;
  std::vector<int64_t> microbatch_done_;
  std::vector<int32_t> gate_head_;
  std::vector<int32_t> gate_next_;
  // Per device.
  std::vector<int32_t> device_slot_;       // transfer of the current producer into the device, or -1
  std::vector<std::vector<ReadyOp>> ready_;
  std::vector<uint8_t> busy_;
  std::vector<int32_t> last_instance_;
  std::vector<int64_t> usage_;             // memory in use, persistent bytes excluded
  std::vector<int64_t> persistent_;
  std::vector<uint8_t> is_candidate_;
  std::vector<DeviceId> candidates_;       // devices that may pick in the next round
  std::vector<uint8_t> is_dirty_;
  std::vector<DeviceId> dirty_;            // devices whose memory changed at the current time
  // Per ring (= per device of group 0, D > 1).
  std::vector<std::vector<ReadyAllReduce>> ring_ready_;
  std::vector<uint8_t> ring_busy_;
  std::vector<uint8_t> ring_is_candidate_;
  std::vector<DeviceId> ring_candidates_;
  std::vector<Event> events_;              // min-heap on time
  int64_t makespan_ = 0;
  // SimOptions::stop_at_ns of the plain step's run (0 = none) and the bound that reached it.
  int64_t stop_at_ = 0;
  int64_t stopped_at_ = 0;
  // A lower bound on the step: the run stops at the next time step once one reaches stop_at_ (the
  // first such bound is reported).
  void ReachBound(int64_t step_at_least) {
    if (stopped_at_ == 0 && step_at_least >= stop_at_) stopped_at_ = step_at_least;
  }
  std::vector<int64_t> work_left_;  // per device, with stop_at_: compute not started yet
};

// Keeps the per-instance buffers of simulators destroyed on this thread while the scope is open, and
// hands them to the next simulator built on it that needs buffers that size. A solve builds several
// simulators of one model in turn (each member of `auto`, the search, the final score); on a 100K-op step
// at M = 16 fresh buffers cost each first run ~0.2 s of page faults (a run is ~0.25 s). At most one set
// is kept; it is freed when the scope closes. Scopes nest (the innermost is used); not thread-safe by
// design: one per thread, opened and closed on it.
class SimulatorScratchScope {
 public:
  SimulatorScratchScope();
  ~SimulatorScratchScope();
  SimulatorScratchScope(const SimulatorScratchScope&) = delete;
  SimulatorScratchScope& operator=(const SimulatorScratchScope&) = delete;

 private:
  friend class Simulator;
  static SimulatorScratchScope* Current();
  SimulatorScratchScope* outer_;
  std::unique_ptr<Simulator::InstanceScratch> spare_;
};

// max(longest path of op times on the fastest device with free communication (each op's time rounded
// individually), round(total compute_ns / total speed)); with a plan the total counts every microbatch
// copy (M × per-microbatch compute + once compute), over the model's devices (api.md §2.1).
int64_t LowerBoundNs(const Model& model);

// A bound no simulated step of this model is below, even where LowerBoundNs's work term is not (see
// "Lower bound" above: it rounds the total, while the simulator rounds each op): the same longest path,
// and as the work term, on devices of one speed, the ceiling of every instance's rounded time over the
// devices; on mixed speeds, the total compute less half a ns per instance at the fastest speed, over the
// total speed. What "no answer can be shorter" may rely on (the portfolio's near-optimal stop).
int64_t ProvenLowerBoundNs(const Model& model);

// A lower bound on the step a given assignment can simulate to, computed in O(V + E) (about one
// sixteenth of a simulation at M = 16): the largest over devices d of
//   head(d) + busy(d) + tail(d),
// busy(d) = every instance d runs (M copies of each per-microbatch op, once ops once), head(d) = the
// earliest any op of d can start (longest path into it: op times on their assigned devices, and a
// cross-device edge between per-microbatch ops costs at least the transfer of that edge's bytes), tail(d)
// = the least work that must follow any op of d (longest path out of it, likewise), and the longest such
// path through one op. Edges to or from once ops count as free (an accumulated gradient's transfer leaves
// only after the last copy); windows and all-reduces only delay. Used to skip simulating answers that
// cannot beat one already simulated (the portfolio, the stage planner). `scratch`, when given, keeps the
// per-op buffers between calls (a caller bounding many assignments of one model holds one: on a 1M-op
// graph allocating them was a good part of each call).
class LowerBoundScratch;
int64_t AssignedLowerBoundNs(const Model& model, const Assignment& assignment,
                             LowerBoundScratch* scratch = nullptr);

// AssignedLowerBoundNs's buffers: what an edge into or out of an op reads, side by side (the function is
// bound by the random reads of the edges' other ends on large graphs: one cache line each this way).
class LowerBoundScratch {
 private:
  friend int64_t AssignedLowerBoundNs(const Model& model, const Assignment& assignment,
                                      LowerBoundScratch* scratch);
  struct Node {
    int64_t finish = 0;  // head + time: every instance of the op starts at or after head
    int64_t from = 0;    // time + tail: at least tail follows any instance of the op
    int64_t time = 0;
    DeviceId device = 0;
    bool once = false;
  };
  std::vector<Node> nodes_;
};

// Ops on one critical path of a simulated schedule, from the first to the last: starting at an op that
// finishes at the makespan, repeatedly step to the input (or the previous op on the same device) whose
// arrival/finish determined the op's start. Ties by smaller OpId. With a plan the path runs through
// instances (an input's copy, an accumulated gradient's last copy, the previous instance on the device,
// or the last copy of the microbatch the window waited for) and each op is listed once, at its first
// appearance.
std::vector<OpId> CriticalPath(const Model& model, const Assignment& assignment,
                               const SimResult& result);

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_SIM_SIMULATOR_H_
