#include "service/engine/baselines/pipeline.h"

#include <algorithm>
#include <optional>
#include <cstdint>
#include <limits>
#include <vector>

#include "service/engine/baselines/placement_units.h"

namespace placement::engine {
namespace baselines {

std::vector<DeviceId> PipelineDeviceChain(const Model& model, const std::vector<DeviceId>& eligible) {
  const int32_t n = static_cast<int32_t>(eligible.size());
  if (n <= 2) return eligible;
  // Reference message: the mean edge (1 MiB for graphs without data edges).
  int64_t total_bytes = 0;
  for (int64_t bytes : model.out_bytes) total_bytes = SaturatingAdd(total_bytes, bytes);
  const int64_t reference_bytes =
      model.num_edges() > 0 && total_bytes > 0 ? std::max<int64_t>(1, total_bytes / model.num_edges())
                                               : (int64_t{1} << 20);
  auto cost = [&](DeviceId a, DeviceId b) { return model.TransferNs(a, b, reference_bytes); };

  std::vector<DeviceId> best_chain;
  int64_t best_cost = std::numeric_limits<int64_t>::max();
  // Every start on small clusters; on large ones the quadratic walk per start is enough from a few.
  const int32_t starts = n <= 64 ? n : 4;
  std::vector<uint8_t> visited(n);
  for (int32_t s = 0; s < starts; ++s) {
    std::fill(visited.begin(), visited.end(), 0);
    std::vector<DeviceId> chain{eligible[s]};
    visited[s] = 1;
    int64_t total = 0;
    for (int32_t step = 1; step < n; ++step) {
      const DeviceId last = chain.back();
      int32_t next = -1;
      int64_t next_cost = 0;
      for (int32_t i = 0; i < n; ++i) {
        if (visited[i]) continue;
        const int64_t c = cost(last, eligible[i]);
        if (next == -1 || c < next_cost) {
          next = i;
          next_cost = c;
        }
      }
      visited[next] = 1;
      chain.push_back(eligible[next]);
      total = SaturatingAdd(total, next_cost);
    }
    if (total < best_cost) {
      best_cost = total;
      best_chain = std::move(chain);
    }
  }
  return best_chain;
}

}  // namespace baselines

namespace {

using baselines::PlacementUnits;
using baselines::SaturatingAdd;

class PipelinePlanner {
 public:
  PipelinePlanner(const Model& model, const SolveContext& context, const PipelineOptions& options)
      : model_(model), context_(context), options_(options), units_(baselines::BuildPlacementUnits(model)) {}

  PartitionResult Run() {
    PartitionResult result;
    Prepare();
    // Upper end of the search: everything on the slowest chain device always satisfies the time bound.
    double slowest = std::numeric_limits<double>::infinity();
    for (DeviceId d : chain_) slowest = std::min(slowest, model_.speed[d]);
    // Each unit's time rounded on its own, as Split adds them: round(total / speed) can be less than
    // the sum of the rounded times (every unit rounding up), and the bound would then not be met.
    int64_t high = 1;
    for (int32_t u = 0; u < units_.num_units(); ++u) {
      high = SaturatingAdd(high, ScaledComputeNs(units_.compute_ns[u], slowest));
    }
    // Memory first: the smallest scale of the capacities for which K stages hold everything (1 when the
    // devices suffice). When they do not, the split balances memory as well as it can, and then time.
    double memory_scale = 1.0;
    if (!Split(high, memory_scale, nullptr)) {
      double fits = 2.0;
      while (fits < 1e9 && !Split(high, fits, nullptr)) fits *= 2.0;
      if (fits >= 1e9) {
        memory_scale = std::numeric_limits<double>::infinity();  // memory cannot separate the stages
      } else {
        double too_small = fits / 2.0;
        for (int step = 0; step < 20 && !context_.ShouldStop(); ++step) {
          const double middle = 0.5 * (too_small + fits);
          (Split(high, middle, nullptr) ? fits : too_small) = middle;
        }
        memory_scale = fits;
      }
    }
    int64_t low = 0;  // infeasible (unless everything is free; then high converges to 0 anyway)
    while (high - low > std::max<int64_t>(1, high / 20000)) {
      if (context_.ShouldStop()) {
        result.time_limited = true;
        break;
      }
      context_.Report("pipeline", 0.9 * (1.0 - static_cast<double>(high - low) / static_cast<double>(high)));
      const int64_t middle = low + (high - low) / 2;
      if (Split(middle, memory_scale, nullptr)) {
        high = middle;
      } else {
        low = middle;
      }
    }
    result.assignment.assign(model_.num_ops(), kNone);
    Split(high, memory_scale, &result.assignment);
    return result;
  }

 private:
  void Prepare() {
    const OpId n = model_.num_ops();
    const std::vector<OpId>& order = model_.topo_order;
    position_.resize(n);
    for (int32_t p = 0; p < n; ++p) position_[order[p]] = p;
    // Release lists: op v's output (and copies of it) go away after the op at last_use[v] has run.
    std::vector<int32_t> last_use(n);
    release_offset_.assign(n + 1, 0);
    for (OpId v = 0; v < n; ++v) {
      int32_t last = position_[v];
      for (EdgeId e = model_.out_begin(v); e < model_.out_end(v); ++e) {
        last = std::max(last, position_[model_.out_dst[e]]);
      }
      last_use[v] = last;
      ++release_offset_[last + 1];
    }
    for (int32_t p = 0; p < n; ++p) release_offset_[p + 1] += release_offset_[p];
    release_.resize(n);
    {
      std::vector<int32_t> fill(release_offset_.begin(), release_offset_.end() - 1);
      for (OpId v = 0; v < n; ++v) release_[fill[last_use[v]]++] = v;
    }
    // Devices that take part: those whose kind is allowed for at least half as much compute as the best.
    const DeviceId num_devices = model_.num_devices();
    std::vector<double> allowed_compute(num_devices, 0.0);
    double free_compute = 0.0;
    for (int32_t u = 0; u < units_.num_units(); ++u) {
      const double compute = static_cast<double>(units_.compute_ns[u]) + 1.0;
      if (!units_.Constrained(u)) {
        free_compute += compute;
        continue;
      }
      for (DeviceId d = 0; d < num_devices; ++d) {
        if (units_.Allowed(model_, u, d)) allowed_compute[d] += compute;
      }
    }
    double most = 0.0;
    for (DeviceId d = 0; d < num_devices; ++d) most = std::max(most, allowed_compute[d] + free_compute);
    std::vector<DeviceId> eligible;
    for (DeviceId d = 0; d < num_devices; ++d) {
      if (allowed_compute[d] + free_compute >= 0.5 * most) eligible.push_back(d);
    }
    chain_ = baselines::PipelineDeviceChain(model_, eligible);
    chain_index_.assign(num_devices, std::numeric_limits<int32_t>::max());
    for (int32_t i = 0; i < static_cast<int32_t>(chain_.size()); ++i) chain_index_[chain_[i]] = i;

    unit_device_.resize(units_.num_units());
    produced_stage_.resize(n);
    received_stage_.resize(n);
    received_bytes_.resize(n);

    // The most a stage's estimate can reach: every unit's persistent bytes, every output and every
    // received copy (at most one per edge) held at once, and the largest scratch. When the smallest chain
    // device holds that, no pass ever closes a stage for memory (the scale is never below 1).
    int64_t most_bytes = 0, largest_temp = 0;
    for (int32_t u = 0; u < units_.num_units(); ++u) most_bytes = SaturatingAdd(most_bytes, units_.persistent_bytes[u]);
    for (OpId v = 0; v < n; ++v) {
      most_bytes = SaturatingAdd(most_bytes, model_.output_bytes[v]);
      largest_temp = std::max(largest_temp, model_.temp_bytes[v]);
    }
    for (const int64_t bytes : model_.in_bytes) most_bytes = SaturatingAdd(most_bytes, bytes);
    most_bytes = SaturatingAdd(most_bytes, largest_temp);
    int64_t least_capacity = std::numeric_limits<int64_t>::max();
    for (const DeviceId d : chain_) least_capacity = std::min(least_capacity, model_.capacity_bytes[d]);
    track_memory_ = !options_.skip_memory_when_it_cannot_bind || most_bytes > least_capacity;
  }

  // The allowed device nearest to `stage` along the chain (devices off the chain last).
  DeviceId NearestAllowed(int32_t u, int32_t stage) const {
    DeviceId best = kNone;
    int64_t best_distance = std::numeric_limits<int64_t>::max();
    for (DeviceId d = 0; d < model_.num_devices(); ++d) {
      if (!units_.Allowed(model_, u, d)) continue;
      const int32_t index = chain_index_[d];
      const int64_t distance = index == std::numeric_limits<int32_t>::max()
                                   ? std::numeric_limits<int64_t>::max() - 1
                                   : std::abs(static_cast<int64_t>(index) - stage);
      if (distance < best_distance) {
        best_distance = distance;
        best = d;
      }
    }
    return best;
  }

  // Bytes of inputs of v that must be received on d in the current stage (not produced on d, not yet
  // received in this stage).
  int64_t ReceivedBytes(OpId v, DeviceId d, int32_t stage) const {
    int64_t bytes = 0;
    for (EdgeId e = model_.in_begin(v); e < model_.in_end(v); ++e) {
      const OpId w = model_.in_src[e];
      if (assigned_[w] == d || received_stage_[w] == stage) continue;
      bytes = SaturatingAdd(bytes, model_.in_bytes[e]);
    }
    return bytes;
  }

  // Adds the copies v needs on d. The simulator sends a tensor as soon as its producer finishes, so a
  // copy from an earlier stage is there from (about) the start of this stage: it raises the stage's peak
  // so far, not only the current level.
  void Receive(OpId v, DeviceId d, int32_t stage) {
    for (EdgeId e = model_.in_begin(v); e < model_.in_end(v); ++e) {
      const OpId w = model_.in_src[e];
      if (assigned_[w] == d) continue;
      if (received_stage_[w] == stage) {
        // One copy per producer and device: the largest edge's bytes (api.md §2).
        if (model_.in_bytes[e] > received_bytes_[w]) {
          live_ += model_.in_bytes[e] - received_bytes_[w];
          peak_ += model_.in_bytes[e] - received_bytes_[w];
          received_bytes_[w] = model_.in_bytes[e];
        }
        continue;
      }
      received_stage_[w] = stage;
      received_bytes_[w] = model_.in_bytes[e];
      live_ = SaturatingAdd(live_, model_.in_bytes[e]);
      peak_ = SaturatingAdd(peak_, model_.in_bytes[e]);
    }
  }

  // One greedy pass with bottleneck `limit`, each stage's estimated peak kept within memory_scale times
  // its device's capacity (infinity = time only). Returns false when the ops need more stages than there
  // are chain devices (or one unit alone exceeds the limit). Writes the assignment when `out` is set.
  bool Split(int64_t limit, double memory_scale, Assignment* out) {
    return track_memory_ ? SplitPass<true>(limit, memory_scale, out) : SplitPass<false>(limit, memory_scale, out);
  }

  // Split's pass; without kTrackMemory (memory cannot bind) the estimate is left out: no stage would be
  // closed for it.
  template <bool kTrackMemory>
  bool SplitPass(int64_t limit, double memory_scale, Assignment* out) {
    const OpId n = model_.num_ops();
    const int32_t stages = static_cast<int32_t>(chain_.size());
    std::fill(unit_device_.begin(), unit_device_.end(), kNone);
    std::fill(produced_stage_.begin(), produced_stage_.end(), -1);
    std::fill(received_stage_.begin(), received_stage_.end(), -1);
    assigned_.assign(n, kNone);
    int32_t stage = 0;
    DeviceId device = chain_[0];
    int64_t stage_time = 0;
    int64_t persistent = 0;
    live_ = 0;
    peak_ = 0;
    bool stage_empty = true;
    for (int32_t p = 0; p < n; ++p) {
      const OpId v = model_.topo_order[p];
      const int32_t u = units_.unit_of_op[v];
      if (unit_device_[u] == kNone) {
        if (!units_.Allowed(model_, u, device)) {
          unit_device_[u] = NearestAllowed(u, stage);
        } else {
          const int64_t time = ScaledComputeNs(units_.compute_ns[u], model_.speed[device]);
          const bool too_long = stage_time > limit - time;
          bool too_big = false;
          if constexpr (kTrackMemory) {
            const int64_t received = ReceivedBytes(v, device, stage);
            const int64_t transient = std::max(
                SaturatingAdd(peak_, received),
                SaturatingAdd(SaturatingAdd(live_, received),
                              SaturatingAdd(model_.output_bytes[v], model_.temp_bytes[v])));
            const int64_t peak =
                SaturatingAdd(SaturatingAdd(persistent, units_.persistent_bytes[u]), transient);
            too_big = static_cast<double>(peak) >
                      memory_scale * static_cast<double>(model_.capacity_bytes[device]);
          }
          if (!stage_empty && (too_long || too_big)) {
            if (++stage >= stages) return false;
            device = chain_[stage];
            stage_time = 0;
            persistent = 0;
            live_ = 0;
            peak_ = 0;
            stage_empty = true;
          }
          if (!units_.Allowed(model_, u, device)) {
            unit_device_[u] = NearestAllowed(u, stage);
          } else {
            const int64_t fresh_time = ScaledComputeNs(units_.compute_ns[u], model_.speed[device]);
            if (fresh_time > limit) return false;
            stage_time += fresh_time;
            persistent = SaturatingAdd(persistent, units_.persistent_bytes[u]);
            unit_device_[u] = device;
            stage_empty = false;
          }
        }
      }
      const DeviceId d = unit_device_[u];
      assigned_[v] = d;
      if constexpr (!kTrackMemory) continue;
      if (d == device) {
        Receive(v, d, stage);
        live_ = SaturatingAdd(live_, model_.output_bytes[v]);
        peak_ = std::max(peak_, SaturatingAdd(live_, model_.temp_bytes[v]));
        produced_stage_[v] = stage;
      }
      for (int32_t i = release_offset_[p]; i < release_offset_[p + 1]; ++i) {
        const OpId w = release_[i];
        if (produced_stage_[w] == stage) live_ -= model_.output_bytes[w];
        if (received_stage_[w] == stage) live_ -= received_bytes_[w];
        // A tensor is released once; stale stage stamps must not release it again.
        produced_stage_[w] = -1;
        received_stage_[w] = -1;
      }
    }
    if (out != nullptr) *out = assigned_;
    return true;
  }

  const Model& model_;
  const SolveContext& context_;
  const PipelineOptions options_;
  const PlacementUnits units_;
  // False when memory cannot bind (Prepare): the passes leave the estimate out.
  bool track_memory_ = true;
  std::vector<int32_t> position_;
  std::vector<int32_t> release_offset_;
  std::vector<OpId> release_;
  std::vector<DeviceId> chain_;
  std::vector<int32_t> chain_index_;
  // Scratch of one pass.
  std::vector<DeviceId> unit_device_;
  std::vector<DeviceId> assigned_;
  std::vector<int32_t> produced_stage_;
  std::vector<int32_t> received_stage_;
  std::vector<int64_t> received_bytes_;
  int64_t live_ = 0;  // bytes held at the current position of the stage (outputs, copies)
  int64_t peak_ = 0;  // the most held at any position of the stage so far
};

class PipelinePartitioner final : public Partitioner {
 public:
  explicit PipelinePartitioner(PipelineOptions options) : options_(options) {}
  std::string_view name() const override { return "pipeline"; }
  std::string_view version() const override { return "2"; }
  std::string_view description() const override {
    return "Contiguous split of a topological order into one stage per device, balancing stage time under "
           "memory; stages chained along fast links";
  }
  absl::StatusOr<PartitionResult> Partition(const Model& model,
                                            const SolveContext& context) const override {
    if (std::optional<PartitionResult> none = baselines::NothingToPlace(model)) return *std::move(none);
    return PipelinePlanner(model, context, options_).Run();
  }

 private:
  const PipelineOptions options_;
};

}  // namespace

std::unique_ptr<Partitioner> MakePipelinePartitioner(PipelineOptions options) {
  return std::make_unique<PipelinePartitioner>(options);
}

}  // namespace placement::engine
