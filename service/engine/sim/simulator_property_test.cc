// Property tests of the simulator on seeded random DAGs (1..200 ops, 1..6 devices, random assignments):
//  * invariants read off the schedule: precedence with transfer delays, one op at a time per device,
//    no device idle while one of its ops is ready, recorded memory intervals sane and their brute-force
//    peaks equal to the reported ones, makespan >= lower bound, independence of the request's op order;
//  * equality with a deliberately simple reference simulator written below (time stepping over every
//    op and edge at each event time: O((V + E) x events)), which shares no code with simulator.cc.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "placement/v1/placement.pb.h"
#include "service/engine/model/model.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/sim/simulator.h"
#include "tests/testutil/random_graph.h"

namespace placement::engine {
namespace {

using Interval = std::tuple<DeviceId, OpId, int, int64_t, int64_t, int64_t>;  // dev, op, kind, B, [from, until)

// ---------------------------------------------------------------------------------------------------
// Reference simulator. Written for obviousness, not speed; it reads only the model's raw arrays.
// ---------------------------------------------------------------------------------------------------
struct Reference {
  std::vector<int64_t> duration, start, finish, bottom;
  int64_t makespan = 0;
  std::vector<Interval> intervals;  // sorted
  std::vector<int64_t> peak, peak_time;
  int64_t transfer_bytes = 0;
  int64_t transfer_count = 0;
};

// round(bytes * 1e9 / bandwidth), halves up, by quotient and remainder.
int64_t RefTransferNs(const Model& m, DeviceId a, DeviceId b, int64_t bytes) {
  const LinkCost& link = m.link[static_cast<size_t>(a) * m.num_devices() + b];
  const __int128 scaled = static_cast<__int128>(bytes) * 1000000000;
  __int128 quotient = scaled / link.bandwidth_bytes_per_second;
  const __int128 remainder = scaled % link.bandwidth_bytes_per_second;
  if (2 * remainder >= link.bandwidth_bytes_per_second) ++quotient;
  return link.latency_ns + static_cast<int64_t>(quotient);
}

// Peak and first time of the peak per device, by evaluating the usage at every interval start.
void BruteForcePeaks(const std::vector<Interval>& intervals, int32_t num_devices,
                     std::vector<int64_t>* peak, std::vector<int64_t>* peak_time) {
  peak->assign(num_devices, 0);
  peak_time->assign(num_devices, 0);
  for (DeviceId d = 0; d < num_devices; ++d) {
    bool any = false;
    for (const Interval& probe : intervals) {
      if (std::get<0>(probe) != d) continue;
      const int64_t t = std::get<4>(probe);
      int64_t usage = 0;
      for (const Interval& i : intervals) {
        if (std::get<0>(i) == d && std::get<4>(i) <= t && t < std::get<5>(i)) usage += std::get<3>(i);
      }
      if (!any || usage > (*peak)[d] || (usage == (*peak)[d] && t < (*peak_time)[d])) {
        (*peak)[d] = usage;
        (*peak_time)[d] = t;
        any = true;
      }
    }
  }
}

Reference RunReference(const Model& m, const Assignment& dev) {
  const int32_t n = m.num_ops();
  const int32_t num_devices = m.num_devices();
  Reference r;
  r.duration.resize(n);
  for (OpId v = 0; v < n; ++v) {
    const double speed = m.speed[dev[v]];
    r.duration[v] = std::llround(static_cast<double>(m.compute_ns[v]) / speed);
  }
  // Transfer of u into device b: the largest of u's edges into b; kNone-like -1 when u has none there.
  std::vector<std::vector<int64_t>> transfer_bytes(n, std::vector<int64_t>(num_devices, -1));
  for (OpId u = 0; u < n; ++u) {
    for (EdgeId e = m.out_offset[u]; e < m.out_offset[u + 1]; ++e) {
      const DeviceId b = dev[m.out_dst[e]];
      if (b == dev[u]) continue;
      transfer_bytes[u][b] = std::max(transfer_bytes[u][b], m.out_bytes[e]);
    }
  }
  std::vector<std::vector<int64_t>> transfer_ns(n, std::vector<int64_t>(num_devices, 0));
  for (OpId u = 0; u < n; ++u) {
    for (DeviceId b = 0; b < num_devices; ++b) {
      if (transfer_bytes[u][b] < 0) continue;
      transfer_ns[u][b] = RefTransferNs(m, dev[u], b, transfer_bytes[u][b]);
      r.transfer_bytes += transfer_bytes[u][b];
      ++r.transfer_count;
    }
  }
  // Bottom levels: relax until nothing changes (a DAG settles in at most n passes).
  r.bottom.assign(n, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (OpId u = 0; u < n; ++u) {
      int64_t best = 0;
      for (EdgeId e = m.out_offset[u]; e < m.out_offset[u + 1]; ++e) {
        const OpId v = m.out_dst[e];
        const int64_t cost = dev[v] == dev[u] ? 0 : transfer_ns[u][dev[v]];
        best = std::max(best, cost + r.bottom[v]);
      }
      if (r.duration[u] + best != r.bottom[u]) {
        r.bottom[u] = r.duration[u] + best;
        changed = true;
      }
    }
  }
  // Inputs of each op, from the out CSR.
  std::vector<std::vector<OpId>> inputs(n);
  for (OpId u = 0; u < n; ++u) {
    for (EdgeId e = m.out_offset[u]; e < m.out_offset[u + 1]; ++e) inputs[m.out_dst[e]].push_back(u);
  }
  auto arrival = [&](OpId u, OpId v) {
    return r.finish[u] + (dev[u] == dev[v] ? 0 : transfer_ns[u][dev[v]]);
  };

  // Time stepping: at each time, apply completions, then let every free device pick; repeat at the same
  // time while a pick finishes immediately (zero duration); then jump to the next event.
  r.start.assign(n, -1);
  r.finish.assign(n, -1);
  std::vector<bool> started(n, false), completed(n, false);
  int64_t t = 0;
  int32_t num_completed = 0;
  for (;;) {
    for (OpId v = 0; v < n; ++v) {
      if (started[v] && !completed[v] && r.finish[v] <= t) {
        completed[v] = true;
        ++num_completed;
      }
    }
    if (num_completed == n) break;
    bool picked_zero = false;
    for (DeviceId d = 0; d < num_devices; ++d) {
      bool running = false;
      for (OpId v = 0; v < n; ++v) running = running || (dev[v] == d && started[v] && !completed[v]);
      if (running) continue;
      OpId best = -1;
      for (OpId v = 0; v < n; ++v) {
        if (dev[v] != d || started[v]) continue;
        bool ready = true;
        for (const OpId u : inputs[v]) ready = ready && completed[u] && arrival(u, v) <= t;
        if (!ready) continue;
        if (best < 0 || r.bottom[v] > r.bottom[best]) best = v;  // ties keep the smaller id
      }
      if (best < 0) continue;
      started[best] = true;
      r.start[best] = t;
      r.finish[best] = t + r.duration[best];
      picked_zero = picked_zero || r.duration[best] == 0;
    }
    if (picked_zero) continue;
    int64_t next = std::numeric_limits<int64_t>::max();
    for (OpId v = 0; v < n; ++v) {
      if (started[v] && !completed[v]) next = std::min(next, r.finish[v]);
      if (started[v]) continue;
      for (const OpId u : inputs[v]) {
        if (completed[u] && arrival(u, v) > t) next = std::min(next, arrival(u, v));
      }
    }
    if (next == std::numeric_limits<int64_t>::max()) {
      ADD_FAILURE() << "reference simulator is stuck at " << t;
      return r;
    }
    t = next;
  }
  for (OpId v = 0; v < n; ++v) r.makespan = std::max(r.makespan, r.finish[v]);

  // Memory intervals straight from the definitions.
  auto add = [&](DeviceId d, OpId op, MemoryInterval::Kind kind, int64_t bytes, int64_t from,
                 int64_t until) {
    if (bytes > 0 && from < until) {
      r.intervals.emplace_back(d, op, static_cast<int>(kind), bytes, from, until);
    }
  };
  for (OpId u = 0; u < n; ++u) {
    const DeviceId a = dev[u];
    add(a, u, MemoryInterval::Kind::kPersistent, m.persistent_bytes[u], 0, r.makespan);
    add(a, u, MemoryInterval::Kind::kTemp, m.temp_bytes[u], r.start[u], r.finish[u]);
    bool held = false;
    int64_t until = 0;
    std::vector<int64_t> last_use(num_devices, -1);
    for (EdgeId e = m.out_offset[u]; e < m.out_offset[u + 1]; ++e) {
      const OpId v = m.out_dst[e];
      held = true;
      until = std::max(until, dev[v] == a ? r.finish[v] : arrival(u, v));
      if (dev[v] != a) last_use[dev[v]] = std::max(last_use[dev[v]], r.finish[v]);
    }
    add(a, u, MemoryInterval::Kind::kOutput, m.output_bytes[u], r.start[u], held ? until : r.finish[u]);
    for (DeviceId b = 0; b < num_devices; ++b) {
      if (transfer_bytes[u][b] < 0) continue;
      add(b, u, MemoryInterval::Kind::kReceived, transfer_bytes[u][b], r.finish[u] + transfer_ns[u][b],
          last_use[b]);
    }
  }
  std::sort(r.intervals.begin(), r.intervals.end());
  BruteForcePeaks(r.intervals, num_devices, &r.peak, &r.peak_time);
  return r;
}

// ---------------------------------------------------------------------------------------------------
// Random cases.
// ---------------------------------------------------------------------------------------------------
struct Case {
  v1::PlaceRequest request;
  // Device per op in request order, for a few assignments.
  std::vector<std::vector<DeviceId>> assignments;
  // All speeds in {0.5, 1, 2}: no op time is rounded down, so the work term is a true bound.
  bool speeds_round_up = false;
};

Case MakeCase(uint64_t seed) {
  testutil::Rng rng(seed * 7919 + 13);
  testutil::RandomGraphOptions o;
  o.seed = seed;
  o.num_ops = static_cast<int32_t>(rng.Uniform(1, 200));
  o.avg_out_degree = 0.5 + 2.5 * rng.UniformDouble();
  o.layer_width = static_cast<int32_t>(rng.Uniform(1, 20));
  o.max_layer_skip = static_cast<int32_t>(rng.Uniform(1, 4));
  o.control_edge_fraction = 0.2;
  o.parallel_edge_fraction = 0.1;
  o.scramble_names = rng.Bernoulli(0.7);
  // Small times and sizes make ties, zero durations and zero-time transfers common.
  o.min_compute_ns = 0;
  o.max_compute_ns = rng.Bernoulli(0.5) ? 12 : 1000;
  o.min_output_bytes = 0;
  o.max_output_bytes = 100;
  o.edge_bytes_from_output = rng.Bernoulli(0.5);
  o.min_edge_bytes = 0;
  o.max_edge_bytes = 100;
  o.persistent_fraction = 0.3;
  o.min_persistent_bytes = 1;
  o.max_persistent_bytes = 100;
  o.temp_fraction = 0.3;
  o.min_temp_bytes = 1;
  o.max_temp_bytes = 100;
  o.num_devices = static_cast<int32_t>(rng.Uniform(1, 6));
  o.num_nodes = static_cast<int32_t>(rng.Uniform(1, std::min<int32_t>(3, o.num_devices)));
  const int64_t bandwidths[] = {1'000'000'000, 2'000'000'000, 3'000'000'000, 700'000'000};
  o.intra_node = {bandwidths[rng.Uniform(0, 3)], rng.Uniform(0, 5)};
  o.inter_node = {bandwidths[rng.Uniform(0, 3)] / 2, rng.Uniform(0, 30)};
  o.num_link_overrides = o.num_devices >= 2 ? static_cast<int32_t>(rng.Uniform(0, 2)) : 0;

  Case c;
  c.request = testutil::RandomLayeredRequest(o);
  // Speeds chosen here: {0.5, 1, 2} round every op time up (or keep it), others may round down.
  c.speeds_round_up = rng.Bernoulli(0.6);
  const double round_up[] = {0.5, 1.0, 2.0};
  const double any_speed[] = {0.75, 1.0, 1.25, 1.5, 3.0, 0.5};
  for (v1::Device& device : *c.request.mutable_cluster()->mutable_devices()) {
    device.set_speed(c.speeds_round_up ? round_up[rng.Uniform(0, 2)] : any_speed[rng.Uniform(0, 5)]);
  }
  const int32_t n = c.request.graph().ops_size();
  for (int k = 0; k < 3; ++k) {
    std::vector<DeviceId> devices(n, 0);
    const int64_t mode = rng.Uniform(0, 4);
    for (int32_t i = 0; i < n; ++i) {
      if (mode == 0) {
        devices[i] = 0;  // everything on one device: no transfers at all
      } else if (mode == 1) {
        devices[i] = static_cast<DeviceId>((i * o.num_devices) / n);  // contiguous blocks
      } else {
        devices[i] = static_cast<DeviceId>(rng.Uniform(0, o.num_devices - 1));
      }
    }
    c.assignments.push_back(devices);
  }
  return c;
}

Assignment ToCanonical(const Model& model, const std::vector<DeviceId>& by_request_index) {
  Assignment a(model.num_ops());
  for (OpId v = 0; v < model.num_ops(); ++v) a[v] = by_request_index[model.request_index[v]];
  return a;
}

std::vector<Interval> SortedIntervals(const SimResult& r) {
  std::vector<Interval> out;
  for (const MemoryInterval& m : r.memory_intervals) {
    out.emplace_back(m.device, m.op, static_cast<int>(m.kind), m.bytes, m.from_ns, m.until_ns);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Checks everything that can be read off one simulated schedule.
void CheckInvariants(const Model& m, const Assignment& dev, const SimResult& r,
                     bool speeds_round_up) {
  const int32_t n = m.num_ops();
  const int32_t num_devices = m.num_devices();
  // Precedence and transfer delays; ready time of each op.
  std::vector<int64_t> ready(n, 0);
  for (OpId u = 0; u < n; ++u) {
    EXPECT_EQ(r.finish_ns[u] - r.start_ns[u], m.OpTimeNs(u, dev[u])) << m.op_name[u];
    for (EdgeId e = m.out_offset[u]; e < m.out_offset[u + 1]; ++e) {
      const OpId v = m.out_dst[e];
      int64_t arrival = r.finish_ns[u];
      if (dev[v] != dev[u]) {
        int64_t bytes = 0;
        for (EdgeId f = m.out_offset[u]; f < m.out_offset[u + 1]; ++f) {
          if (dev[m.out_dst[f]] == dev[v]) bytes = std::max(bytes, m.out_bytes[f]);
        }
        arrival += RefTransferNs(m, dev[u], dev[v], bytes);
      }
      EXPECT_GE(r.start_ns[v], arrival) << m.op_name[u] << " -> " << m.op_name[v];
      ready[v] = std::max(ready[v], arrival);
    }
  }
  // One op at a time per device, and no idling while an op is ready.
  for (DeviceId d = 0; d < num_devices; ++d) {
    std::vector<OpId> ops;
    for (OpId v = 0; v < n; ++v) {
      if (dev[v] == d) ops.push_back(v);
    }
    std::sort(ops.begin(), ops.end(), [&](OpId a, OpId b) {
      return std::make_pair(r.start_ns[a], r.finish_ns[a]) < std::make_pair(r.start_ns[b], r.finish_ns[b]);
    });
    for (size_t i = 1; i < ops.size(); ++i) {
      EXPECT_LE(r.finish_ns[ops[i - 1]], r.start_ns[ops[i]]) << "overlap on device " << d;
    }
    for (const OpId v : ops) {
      int64_t covered = ready[v];
      while (covered < r.start_ns[v]) {
        int64_t until = -1;
        for (const OpId w : ops) {
          if (r.start_ns[w] <= covered && covered < r.finish_ns[w]) until = r.finish_ns[w];
        }
        if (until < 0) {
          ADD_FAILURE() << "device " << d << " idles at " << covered << " while " << m.op_name[v]
                        << " is ready (since " << ready[v] << ", starts " << r.start_ns[v] << ")";
          break;
        }
        covered = until;
      }
    }
  }
  // Memory intervals: positive, inside the step; their brute-force peaks are the reported ones.
  for (const MemoryInterval& i : r.memory_intervals) {
    EXPECT_GT(i.bytes, 0);
    EXPECT_GE(i.from_ns, 0);
    EXPECT_LT(i.from_ns, i.until_ns);
    EXPECT_LE(i.until_ns, r.makespan_ns);
  }
  std::vector<int64_t> peak, peak_time;
  BruteForcePeaks(SortedIntervals(r), num_devices, &peak, &peak_time);
  EXPECT_EQ(peak, r.peak_memory_bytes);
  EXPECT_EQ(peak_time, r.peak_time_ns);
  // Makespan = latest finish, and at least the lower bound. The path term always holds (op times on
  // the fastest device are never longer); the work term holds when no op time is rounded down.
  int64_t latest = 0;
  for (OpId v = 0; v < n; ++v) latest = std::max(latest, r.finish_ns[v]);
  EXPECT_EQ(r.makespan_ns, latest);
  EXPECT_GE(r.makespan_ns, ProvenLowerBoundNs(m));  // whatever the rounding
  if (speeds_round_up) {
    EXPECT_GE(r.makespan_ns, LowerBoundNs(m));
  } else {
    double total_speed = 0, slack = 0;
    for (DeviceId d = 0; d < num_devices; ++d) total_speed += m.speed[d];
    for (OpId v = 0; v < n; ++v) slack += 0.5 * m.speed[dev[v]];
    double work = 0;
    for (OpId v = 0; v < n; ++v) work += static_cast<double>(m.compute_ns[v]);
    EXPECT_GE(static_cast<double>(r.makespan_ns) * total_speed, work - slack - 1e-6);
  }
  // Transfers: one per (producer, other device with consumers).
  int64_t bytes = 0;
  for (const TransferRecord& t : r.transfers) bytes += t.bytes;
  EXPECT_EQ(static_cast<int64_t>(r.transfers.size()), r.transfer_count);
  EXPECT_EQ(bytes, r.transfer_bytes);
  // Critical path: ends at the makespan, starts at 0, each step explained by an input or the device.
  const std::vector<OpId> path = CriticalPath(m, dev, r);
  if (n > 0) {
    ASSERT_FALSE(path.empty());
    EXPECT_EQ(r.finish_ns[path.back()], r.makespan_ns);
    EXPECT_EQ(r.start_ns[path.front()], 0);
    for (size_t i = 1; i < path.size(); ++i) EXPECT_LE(r.finish_ns[path[i - 1]], r.start_ns[path[i]]);
  }
}

TEST(SimulatorPropertyTest, RandomDagsMatchTheReferenceAndKeepInvariants) {
  constexpr int kCases = 1000;
  SimOptions record;
  record.record_memory_intervals = true;
  record.record_transfers = true;
  int64_t total_ops = 0;
  for (int seed = 1; seed <= kCases; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Case c = MakeCase(seed);
    absl::StatusOr<Model> model = BuildModel(c.request);
    ASSERT_TRUE(model.ok()) << model.status();
    const v1::PlaceRequest shuffled_request = testutil::ShuffleRequest(c.request, seed + 100000);
    absl::StatusOr<Model> shuffled = BuildModel(shuffled_request);
    ASSERT_TRUE(shuffled.ok()) << shuffled.status();
    // The shuffled request's op j is the original's op original_index[name of j].
    std::map<std::string, int32_t> original_index;
    for (int32_t i = 0; i < c.request.graph().ops_size(); ++i) {
      original_index[c.request.graph().ops(i).name()] = i;
    }
    Simulator sim(*model);
    Simulator shuffled_sim(*shuffled);
    total_ops += model->num_ops();
    for (const std::vector<DeviceId>& by_request : c.assignments) {
      const Assignment dev = ToCanonical(*model, by_request);
      const SimResult& r = sim.Run(dev, record);
      CheckInvariants(*model, dev, r, c.speeds_round_up);

      const Reference ref = RunReference(*model, dev);
      ASSERT_EQ(r.start_ns, ref.start);
      ASSERT_EQ(r.finish_ns, ref.finish);
      EXPECT_EQ(r.bottom_level_ns, ref.bottom);
      EXPECT_EQ(r.makespan_ns, ref.makespan);
      EXPECT_EQ(SortedIntervals(r), ref.intervals);
      EXPECT_EQ(r.peak_memory_bytes, ref.peak);
      EXPECT_EQ(r.peak_time_ns, ref.peak_time);
      EXPECT_EQ(r.transfer_bytes, ref.transfer_bytes);
      EXPECT_EQ(r.transfer_count, ref.transfer_count);

      // Same problem in another op order: same canonical schedule.
      std::vector<DeviceId> shuffled_by_request(by_request.size());
      for (int32_t j = 0; j < shuffled_request.graph().ops_size(); ++j) {
        shuffled_by_request[j] = by_request[original_index.at(shuffled_request.graph().ops(j).name())];
      }
      const Assignment shuffled_dev = ToCanonical(*shuffled, shuffled_by_request);
      EXPECT_EQ(shuffled_dev, dev);
      const SimResult& s = shuffled_sim.Run(shuffled_dev, record);
      EXPECT_EQ(s.start_ns, r.start_ns);
      EXPECT_EQ(s.finish_ns, r.finish_ns);
      EXPECT_EQ(s.peak_memory_bytes, r.peak_memory_bytes);
      EXPECT_EQ(s.peak_time_ns, r.peak_time_ns);
      EXPECT_EQ(s.busy_ns, r.busy_ns);

      // Without memory the schedule is unchanged.
      SimOptions no_memory;
      no_memory.compute_memory = false;
      const std::vector<int64_t> start = r.start_ns;
      EXPECT_EQ(sim.Run(dev, no_memory).start_ns, start);
    }
    if (::testing::Test::HasFailure()) break;  // one failing seed is enough to read
  }
  EXPECT_GT(total_ops, 50 * kCases);
}

// SimOptions::stop_at_ns: a run asked to stop at S <= the step stops, with a bound in [S, step]; asked
// to stop above the step, it is the full run, schedule and peaks included.
TEST(SimulatorPropertyTest, StopAtGivesABoundInRangeOrTheFullRun) {
  int64_t stopped = 0, full_runs = 0;
  for (int seed = 1; seed <= 300; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Case c = MakeCase(seed);
    absl::StatusOr<Model> model = BuildModel(c.request);
    ASSERT_TRUE(model.ok()) << model.status();
    Simulator sim(*model);
    for (const std::vector<DeviceId>& by_request : c.assignments) {
      const Assignment dev = ToCanonical(*model, by_request);
      const SimResult full = sim.Run(dev);  // a copy: the next runs reuse the buffer
      EXPECT_FALSE(full.stopped_early);
      const int64_t step = full.makespan_ns;
      if (step <= 0) continue;
      for (const int64_t stop : {int64_t{1}, step / 3, step / 2, step - 1, step}) {
        if (stop <= 0) continue;
        SimOptions options;
        options.stop_at_ns = stop;
        const SimResult& r = sim.Run(dev, options);
        ASSERT_TRUE(r.stopped_early) << "stop at " << stop << " of " << step;
        EXPECT_GE(r.makespan_ns, stop);
        EXPECT_LE(r.makespan_ns, step);
        ++stopped;
      }
      SimOptions above;
      above.stop_at_ns = step + 1;
      const SimResult& r = sim.Run(dev, above);
      EXPECT_FALSE(r.stopped_early);
      EXPECT_EQ(r.makespan_ns, step);
      EXPECT_EQ(r.start_ns, full.start_ns);
      EXPECT_EQ(r.finish_ns, full.finish_ns);
      EXPECT_EQ(r.peak_memory_bytes, full.peak_memory_bytes);
      ++full_runs;
    }
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_GT(stopped, 1000);
  EXPECT_GT(full_runs, 300);
}

// Simulators built in turn under a SimulatorScratchScope take over each other's per-instance buffers
// (larger, smaller, with stale contents from another model, handed over mid-use by ReleaseScratch);
// every result is the same as a fresh simulator's.
TEST(SimulatorScratchTest, SimulatorsBuiltInTurnUnderAScopeGiveTheSameResults) {
  struct Run {
    Model model;
    Assignment assignment;
    SimResult fresh;
  };
  std::vector<Run> runs;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    testutil::Rng rng(seed * 31 + 7);
    testutil::RandomGraphOptions o;
    o.seed = seed;
    o.num_ops = static_cast<int32_t>(rng.Uniform(5, seed % 3 == 0 ? 600 : 120));
    o.num_devices = static_cast<int32_t>(rng.Uniform(1, 5));
    o.max_output_bytes = 4 << 20;
    v1::PlaceRequest request = testutil::RandomLayeredRequest(o);
    request.mutable_options()->set_microbatches(static_cast<int32_t>(rng.Uniform(1, 8)));
    request.mutable_options()->set_max_in_flight(rng.Bernoulli(0.5) ? 1 : 0);
    absl::StatusOr<Model> model = BuildModel(request);
    ASSERT_TRUE(model.ok()) << model.status();
    Run run{*std::move(model), {}, {}};
    run.assignment.resize(run.model.num_ops());
    for (DeviceId& d : run.assignment) d = static_cast<DeviceId>(rng.Uniform(0, run.model.num_devices() - 1));
    run.fresh = Simulator(run.model).Run(run.assignment);
    runs.push_back(std::move(run));
  }
  const auto same = [](const SimResult& a, const SimResult& b, size_t k) {
    EXPECT_EQ(a.makespan_ns, b.makespan_ns) << "run " << k;
    EXPECT_EQ(a.start_ns, b.start_ns) << "run " << k;
    EXPECT_EQ(a.finish_ns, b.finish_ns) << "run " << k;
    EXPECT_EQ(a.previous_on_device, b.previous_on_device) << "run " << k;
    EXPECT_EQ(a.peak_memory_bytes, b.peak_memory_bytes) << "run " << k;
    EXPECT_EQ(a.transfer_bytes, b.transfer_bytes) << "run " << k;
  };
  const SimulatorScratchScope scope;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t k = 0; k < runs.size(); ++k) {
      const size_t i = pass == 0 ? k : runs.size() - 1 - k;
      Simulator simulator(runs[i].model);
      same(simulator.Run(runs[i].assignment), runs[i].fresh, i);
      // A second simulator beside the first, after the first released its buffers; then the first again.
      const size_t j = (i + 5) % runs.size();
      simulator.ReleaseScratch();
      Simulator beside(runs[j].model);
      same(beside.Run(runs[j].assignment), runs[j].fresh, j);
      same(simulator.Run(runs[i].assignment), runs[i].fresh, i);
    }
  }
}

}  // namespace
}  // namespace placement::engine
