// placement_units.h — what every baseline needs before it places anything: colocation groups collapsed
// into *units* (a unit is a colocation group, or a single op without a group), the devices each unit may
// use (the intersection of its members' pins and allowed kinds), and small shared helpers (a stop checker
// that polls the deadline cheaply, a fallback that completes a partial assignment when time runs out).
//
// Baselines place units, never single members of a group, so colocation holds by construction; they only
// offer a unit devices for which `Allowed` is true, so pins and kinds hold too. When the constraints of a
// unit contradict each other (two members pinned to different devices, or kinds that no device has), no
// assignment can satisfy them; the unit is then allowed on the devices its first member accepts (or on
// every device when even that set is empty) and the simulator/constraint checker reports the violation.
//
// Example:
//   PlacementUnits units = BuildPlacementUnits(model);
//   int32_t u = units.unit_of_op[v];
//   for (DeviceId d = 0; d < model.num_devices(); ++d)
//     if (units.Allowed(u, d)) Consider(u, d);
//
// The contract every baseline keeps (these helpers are how):
//
// - **Constraints by construction.** Units (a colocation group, or one op) are placed whole, and only on
//   devices that every member's pin and kinds allow. Contradictory constraints (validation normally rules
//   them out) fall back to the first member's, and the constraint checker reports the rest.
// - **Deadline and cancellation.** `SolveContext::ShouldStop()` is polled every few hundred loop steps
//   (`StopChecker`); on stop, the ops not yet placed are completed cheaply (`CompleteAssignment`) and
//   `time_limited` is set. There is always a complete answer.
// - **Determinism.** Results depend on the model and the seed only: ties by op id then device id; METIS gets
//   the request's seed. Tests check that a shuffled request gives the same answer.
// - **Bounded on huge clusters.** Up to 64 devices the list schedulers consider every allowed device, as
//   published; beyond that each op sees the devices of its inputs plus a rotating window of 64 devices
//   (`CandidateDevices`), which keeps m_etf's heaps and both schedulers' time at O(E * 64).
// - **Infeasible is an answer.** When nothing fits, the unit goes where the overflow is smallest and the
//   simulator reports it.
#ifndef PLACEMENT_SERVICE_ENGINE_BASELINES_PLACEMENT_UNITS_H_
#define PLACEMENT_SERVICE_ENGINE_BASELINES_PLACEMENT_UNITS_H_

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/time/time.h"
#include "service/engine/model/model.h"
#include "service/engine/partition/partitioner.h"

namespace placement::engine::baselines {

// a + b clamped to the int64 range: sums of byte counts over a million ops may exceed it in absurd inputs.
inline int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t sum;
  if (__builtin_add_overflow(a, b, &sum)) return b > 0 ? INT64_MAX : INT64_MIN;
  return sum;
}

struct PlacementUnits {
  // Unit of every op; units are numbered in order of their smallest member's OpId.
  std::vector<int32_t> unit_of_op;
  // Members of each unit, CSR, ascending OpId.
  std::vector<int32_t> offset;
  std::vector<OpId> member;
  // Effective constraints of each unit. `pin` = kNone when free; `kind_mask` = 0 when any kind is fine.
  // `any_device` = true when the constraints are contradictory or unsatisfiable (see the file comment)
  // and the unit has been relaxed to "every device".
  std::vector<DeviceId> pin;
  std::vector<uint64_t> kind_mask;
  std::vector<uint8_t> any_device;
  // Sums over the members.
  std::vector<int64_t> compute_ns;
  std::vector<int64_t> persistent_bytes;

  int32_t num_units() const { return static_cast<int32_t>(pin.size()); }
  int32_t begin(int32_t unit) const { return offset[unit]; }
  int32_t end(int32_t unit) const { return offset[unit + 1]; }
  int32_t size(int32_t unit) const { return offset[unit + 1] - offset[unit]; }
  bool Constrained(int32_t unit) const {
    return any_device[unit] == 0 && (pin[unit] != kNone || kind_mask[unit] != 0);
  }

  bool Allowed(const Model& model, int32_t unit, DeviceId d) const {
    if (any_device[unit] != 0) return true;
    if (pin[unit] != kNone && pin[unit] != d) return false;
    const uint64_t mask = kind_mask[unit];
    return mask == 0 || ((mask >> model.device_kind[d]) & 1) != 0;
  }
  // The allowed device with the smallest id (always exists).
  DeviceId FirstAllowed(const Model& model, int32_t unit) const;
};

PlacementUnits BuildPlacementUnits(const Model& model);

// A model without ops or without devices leaves nothing to place: every baseline then answers one kNone
// per op (Solve's completeness check turns a model without devices into an error). nullopt when there is
// work to do.
//   if (std::optional<PartitionResult> none = NothingToPlace(model)) return *std::move(none);
std::optional<PartitionResult> NothingToPlace(const Model& model);

// On clusters of more than kFullScanDevices devices, list schedulers consider a bounded set of devices
// per op so that they stay O(E * kFullScanDevices) in time and memory instead of O(E * D) (m_etf keeps a
// heap entry per candidate device of every ready op): the devices holding its inputs, plus a window of
// kFullScanDevices consecutive device ids that rotates with the op id (so every device gets work).
// Up to kFullScanDevices devices, every allowed device is a candidate, as published.
inline constexpr int32_t kFullScanDevices = 64;

// Fills `out` with the devices op v may be scheduled on: `fixed` alone when its unit is already placed,
// else the allowed candidates described above (never empty). `device_of` gives the devices of placed ops
// (kNone for the others).
void CandidateDevices(const Model& model, const PlacementUnits& units, OpId v, DeviceId fixed,
                      const std::vector<DeviceId>& device_of, std::vector<DeviceId>& out);

// Copies of producers' outputs held on other devices, as list schedulers track them: one copy per
// (producer, device), as large as the largest edge of the producer into that device (api.md §2), kept in
// a pool of short lists per producer (a producer rarely feeds more than a few devices).
class ReceivedCopies {
 public:
  explicit ReceivedCopies(OpId num_ops) : head_(num_ops, -1) {}

  // Bytes device d must add to hold an edge of `bytes` from producer p.
  int64_t ExtraBytes(OpId p, DeviceId d, int64_t bytes) const {
    for (int32_t c = head_[p]; c != -1; c = pool_[c].next) {
      if (pool_[c].device == d) return bytes > pool_[c].bytes ? bytes - pool_[c].bytes : 0;
    }
    return bytes;
  }
  // Records the edge's copy on d; returns the bytes added.
  int64_t Add(OpId p, DeviceId d, int64_t bytes) {
    for (int32_t c = head_[p]; c != -1; c = pool_[c].next) {
      if (pool_[c].device != d) continue;
      if (bytes <= pool_[c].bytes) return 0;
      const int64_t extra = bytes - pool_[c].bytes;
      pool_[c].bytes = bytes;
      return extra;
    }
    pool_.push_back(Copy{d, bytes, head_[p]});
    head_[p] = static_cast<int32_t>(pool_.size()) - 1;
    return bytes;
  }
  // Calls release(device, bytes) for every copy of p and forgets them.
  template <typename Release>
  void ReleaseAll(OpId p, Release release) {
    for (int32_t c = head_[p]; c != -1; c = pool_[c].next) release(pool_[c].device, pool_[c].bytes);
    head_[p] = -1;
  }

 private:
  struct Copy {
    DeviceId device;
    int64_t bytes;
    int32_t next;
  };
  std::vector<int32_t> head_;
  std::vector<Copy> pool_;
};

// The memory model the list schedulers (heft, m_etf) share: the bytes that placing op v on device d adds
// to d — its temp and output bytes, its unit's persistent bytes when the unit is not placed yet
// (`unit_device` of it is kNone), and the part of each input produced on another device that d does not
// hold a large enough copy of yet. `device_of` gives the devices of placed ops.
inline int64_t BytesAddedByPlacing(const Model& model, const PlacementUnits& units,
                                   const std::vector<DeviceId>& unit_device,
                                   const std::vector<DeviceId>& device_of, const ReceivedCopies& copies,
                                   OpId v, DeviceId d) {
  const int32_t u = units.unit_of_op[v];
  int64_t need = SaturatingAdd(model.temp_bytes[v], model.output_bytes[v]);
  if (unit_device[u] == kNone) need = SaturatingAdd(need, units.persistent_bytes[u]);
  for (EdgeId e = model.in_begin(v); e < model.in_end(v); ++e) {
    const OpId p = model.in_src[e];
    if (device_of[p] != d) need = SaturatingAdd(need, copies.ExtraBytes(p, d, model.in_bytes[e]));
  }
  return need;
}

// Records on d the copies of v's inputs produced elsewhere (when v is placed there); returns the bytes
// d holds in addition (added to `used` saturating, as every byte count of the list schedulers).
inline int64_t AddInputCopies(const Model& model, const std::vector<DeviceId>& device_of,
                              ReceivedCopies& copies, OpId v, DeviceId d, int64_t used) {
  for (EdgeId e = model.in_begin(v); e < model.in_end(v); ++e) {
    const OpId p = model.in_src[e];
    if (device_of[p] == d) continue;
    used = SaturatingAdd(used, copies.Add(p, d, model.in_bytes[e]));
  }
  return used;
}

// Polls SolveContext::ShouldStop every `stride` calls (reading the clock costs more than a loop step on a
// million-op graph) and reports progress at most every 50 ms of wall time.
class StopChecker {
 public:
  StopChecker(const SolveContext& context, std::string_view stage, int32_t stride = 1024)
      : context_(context), stage_(stage), stride_(stride) {}

  // Call once per loop step with the fraction of the work done; true = stop now.
  bool Step(double fraction) {
    if (stopped_) return true;
    if (++count_ < stride_) return false;
    count_ = 0;
    if (context_.ShouldStop()) {
      stopped_ = true;
      return true;
    }
    if (context_.on_progress) {
      const absl::Time now = context_.Now();
      if (now - last_report_ >= absl::Milliseconds(50)) {
        last_report_ = now;
        context_.Report(stage_, fraction);
      }
    }
    return false;
  }
  bool stopped() const { return stopped_; }

 private:
  const SolveContext& context_;
  std::string_view stage_;
  int32_t stride_;
  int32_t count_ = 0;
  bool stopped_ = false;
  absl::Time last_report_ = absl::InfinitePast();
};

// Gives every op whose entry is kNone a device, cheaply, for runs cut short by the deadline: the device of
// its unit if another member is placed, else the device of its heaviest placed input when allowed, else
// the allowed device with the least work per speed. Walks the topological order, so inputs come first.
void CompleteAssignment(const Model& model, const PlacementUnits& units, Assignment& assignment);

// Sum of bottom levels with mean op times and mean transfer costs is used by several list schedulers;
// these are the means they share. Mean op time of `op` over the devices its unit may use.
int64_t MeanOpTimeNs(const Model& model, const PlacementUnits& units, OpId op);

// Mean over ordered pairs of distinct devices of the transfer time of `bytes` (0 with one device), as
// latency + bytes * mean seconds-per-byte; computed once per model.
class MeanLinkCost {
 public:
  explicit MeanLinkCost(const Model& model);
  int64_t TransferNs(int64_t bytes) const;

 private:
  double mean_latency_ns_ = 0.0;
  double mean_ns_per_byte_ = 0.0;
  bool single_device_ = true;
};

}  // namespace placement::engine::baselines

#endif  // PLACEMENT_SERVICE_ENGINE_BASELINES_PLACEMENT_UNITS_H_
