#include "service/engine/baselines/heft.h"

#include <algorithm>
#include <optional>
#include <cstdint>
#include <limits>
#include <vector>

#include "service/engine/baselines/free_slots.h"
#include "service/engine/baselines/list_scheduler_base.h"
#include "service/engine/baselines/placement_units.h"

namespace placement::engine {
namespace {

using baselines::FreeSlots;
using baselines::SaturatingAdd;

class HeftScheduler : private baselines::ListSchedulerBase {
 public:
  using ListSchedulerBase::ListSchedulerBase;

  PartitionResult Run() {
    const std::vector<OpId> order = RankOrder();
    slots_.assign(num_devices_, FreeSlots());
    consumers_unplaced_.resize(num_ops_);
    for (OpId v = 0; v < num_ops_; ++v) {
      consumers_unplaced_[v] = static_cast<int32_t>(model_.out_end(v) - model_.out_begin(v));
    }

    baselines::StopChecker stop(context_, "heft", 256);
    std::vector<int64_t> arrival(num_devices_);
    std::vector<DeviceId> candidates;
    int32_t placed = 0;
    for (const OpId v : order) {
      if (stop.Step(static_cast<double>(placed) / num_ops_)) break;
      const int32_t u = units_.unit_of_op[v];
      const DeviceId fixed = unit_device_[u];
      baselines::CandidateDevices(model_, units_, v, fixed, device_, candidates);
      for (const DeviceId d : candidates) arrival[d] = ArrivalOn(v, d);
      DeviceId best = kNone;
      int64_t best_start = 0, best_finish = 0;
      DeviceId roomiest = kNone;
      int64_t roomiest_room = std::numeric_limits<int64_t>::min();
      for (const DeviceId d : candidates) {
        const int64_t run = model_.OpTimeNs(v, d);
        const int64_t start = slots_[d].EarliestStart(arrival[d], run);
        const int64_t room = model_.capacity_bytes[d] - used_[d] - Need(v, d);
        if (room >= 0 && (best == kNone || start + run < best_finish)) {
          best = d;
          best_start = start;
          best_finish = start + run;
        }
        if (room > roomiest_room) {
          roomiest_room = room;
          roomiest = d;
        }
      }
      if (best == kNone) {
        best = roomiest;
        best_start = slots_[best].EarliestStart(arrival[best], model_.OpTimeNs(v, best));
        best_finish = best_start + model_.OpTimeNs(v, best);
      }
      Place(v, best, best_start, best_finish);
      ++placed;
    }
    return ResultOfScheduled(placed);
  }

 private:
  // Ops by decreasing upward rank; ties by topological position.
  std::vector<OpId> RankOrder() const {
    const baselines::MeanLinkCost mean_link(model_);
    std::vector<int64_t> rank(num_ops_, 0);
    std::vector<int32_t> position(num_ops_);
    for (int32_t i = num_ops_ - 1; i >= 0; --i) {
      const OpId v = model_.topo_order[i];
      position[v] = i;
      int64_t tail = 0;
      for (EdgeId e = model_.out_begin(v); e < model_.out_end(v); ++e) {
        tail = std::max(tail, mean_link.TransferNs(model_.out_bytes[e]) + rank[model_.out_dst[e]]);
      }
      rank[v] = baselines::MeanOpTimeNs(model_, units_, v) + tail;
    }
    std::vector<OpId> order(model_.topo_order);
    std::sort(order.begin(), order.end(), [&](OpId a, OpId b) {
      if (rank[a] != rank[b]) return rank[a] > rank[b];
      return position[a] < position[b];
    });
    return order;
  }

  void Release(OpId p) {
    used_[device_[p]] -= model_.output_bytes[p];
    copies_.ReleaseAll(p, [&](DeviceId d, int64_t bytes) { used_[d] -= bytes; });
  }

  void Place(OpId v, DeviceId d, int64_t start, int64_t finish) {
    BindUnit(v, d);
    used_[d] = baselines::AddInputCopies(model_, device_, copies_, v, d, used_[d]);
    device_[v] = d;
    finish_[v] = finish;
    slots_[d].Occupy(start, finish - start);
    used_[d] = SaturatingAdd(used_[d], model_.output_bytes[v]);
    if (consumers_unplaced_[v] == 0) Release(v);
    for (EdgeId e = model_.in_begin(v); e < model_.in_end(v); ++e) {
      const OpId p = model_.in_src[e];
      if (--consumers_unplaced_[p] == 0) Release(p);
    }
  }

  std::vector<FreeSlots> slots_;
  std::vector<int32_t> consumers_unplaced_;
};

class HeftPartitioner final : public Partitioner {
 public:
  std::string_view name() const override { return "heft"; }
  std::string_view version() const override { return "1"; }
  std::string_view description() const override {
    return "HEFT: upward rank with mean costs, insertion-based earliest finish time on heterogeneous "
           "devices and links, with a memory check";
  }
  absl::StatusOr<PartitionResult> Partition(const Model& model,
                                            const SolveContext& context) const override {
    if (std::optional<PartitionResult> none = baselines::NothingToPlace(model)) return *std::move(none);
    return HeftScheduler(model, context).Run();
  }
};

}  // namespace

std::unique_ptr<Partitioner> MakeHeftPartitioner() { return std::make_unique<HeftPartitioner>(); }

}  // namespace placement::engine
