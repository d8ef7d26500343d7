#include "tests/testutil/plan_oracle.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace placement::testutil {
namespace {

// round(numerator / denominator), halves up, for numerator >= 0 and denominator > 0.
int64_t DivideRoundHalfUp(__int128 numerator, __int128 denominator) {
  __int128 quotient = numerator / denominator;
  const __int128 remainder = numerator % denominator;
  if (2 * remainder >= denominator) ++quotient;
  return static_cast<int64_t>(quotient);
}

// round(compute / speed), halves away from zero; speed 1.0 is exact.
int64_t ScaledTime(int64_t compute_ns, double speed) {
  if (speed == 1.0) return compute_ns;
  return static_cast<int64_t>(std::llround(static_cast<double>(compute_ns) / speed));
}

struct LinkParams {
  int64_t bandwidth = 0;
  int64_t latency = 0;
};

// What an instance waits for.
struct Dependency {
  enum class Kind { kInstanceDone, kTransferArrived, kGradientReady, kMicrobatchDone };
  Kind kind;
  int32_t index;  // instance, transfer, producer op, or microbatch
};

struct Node {
  int32_t op;
  int32_t microbatch;
  int32_t device;
  int64_t duration;
  int32_t klass;  // priority class: the microbatch, or -1 / M for a once op
  std::vector<Dependency> waits_for;
  bool started = false;
  bool done = false;
  int64_t start = 0;
  int64_t finish = 0;
};

struct Transfer {
  OracleTransfer::Kind kind;
  int32_t producer;
  int32_t microbatch;  // kPerCopy only
  int32_t from;
  int32_t to;
  int64_t bytes;
  int64_t duration;
  bool left = false;
  bool arrived = false;
  int64_t leave = 0;
  int64_t arrival = 0;
};

struct AllReduce {
  int32_t producer;
  int32_t ring;
  int64_t bytes;
  int64_t duration;
  bool ready = false;
  bool started = false;
  bool ended = false;
  int64_t ready_time = 0;
  int64_t start = 0;
  int64_t end = 0;
};

struct Event {
  enum class Kind { kInstanceFinish, kTransferArrival, kAllReduceEnd };
  int64_t time;
  Kind kind;
  int32_t index;
};

class Oracle {
 public:
  Oracle(const v1::PlaceRequest& request, const std::vector<int32_t>& device, int32_t microbatches,
         int32_t max_in_flight, int32_t data_parallel)
      : request_(request),
        assigned_(device),
        m_(microbatches),
        w_(max_in_flight),
        d_(data_parallel) {}

  OracleResult Run() {
    OracleResult result;
    result.error = ReadRequest();
    if (result.error.empty()) result.error = CheckPlanRule();
    if (!result.error.empty()) return result;
    ComputeBottomLevels();
    BuildNodes();
    BuildTransfers();
    BuildDependencies();
    BuildAllReduces();
    result.error = Simulate();
    if (!result.error.empty()) return result;
    Report(&result);
    return result;
  }

 private:
  // ---------------------------------------------------------------------------------------------
  // The request, read directly.
  // ---------------------------------------------------------------------------------------------
  std::string ReadRequest() {
    const v1::Graph& graph = request_.graph();
    const v1::Cluster& cluster = request_.cluster();
    n_ = graph.ops_size();
    num_cluster_devices_ = cluster.devices_size();
    if (m_ < 1) return "microbatches must be >= 1";
    if (w_ < 1 || w_ > m_) return "max_in_flight must be in 1..microbatches";
    if (d_ < 1 || num_cluster_devices_ == 0 || num_cluster_devices_ % d_ != 0) {
      return "data_parallel must divide the device count";
    }
    g_ = num_cluster_devices_ / d_;
    if (static_cast<int32_t>(assigned_.size()) != n_) return "one device per op expected";
    for (int32_t i = 0; i < n_; ++i) {
      if (assigned_[i] < 0 || assigned_[i] >= g_) return absl::StrCat("op ", i, ": device out of group 0");
    }
    for (const v1::Op& op : graph.ops()) {
      name_.push_back(op.name());
      compute_.push_back(op.compute_ns());
      output_.push_back(op.output_bytes());
      persistent_.push_back(op.persistent_bytes());
      temp_.push_back(op.temp_bytes());
      once_.push_back(op.once_per_step());
    }
    std::set<std::string> names(name_.begin(), name_.end());
    if (static_cast<int32_t>(names.size()) != n_) return "op names are not unique";
    // Parallel edges add their bytes.
    std::map<std::pair<int32_t, int32_t>, int64_t> merged;
    for (const v1::Edge& e : graph.edges()) {
      if (e.src() < 0 || e.src() >= n_ || e.dst() < 0 || e.dst() >= n_ || e.src() == e.dst()) {
        return "bad edge";
      }
      merged[{e.src(), e.dst()}] += e.bytes();
    }
    out_.assign(n_, {});
    in_.assign(n_, {});
    for (const auto& [ends, bytes] : merged) {
      out_[ends.first].push_back({ends.second, bytes});
      in_[ends.second].push_back({ends.first, bytes});
    }
    // Topological order (Kahn, smallest index first; any order would do).
    std::vector<int32_t> indegree(n_, 0);
    for (int32_t v = 0; v < n_; ++v) indegree[v] = static_cast<int32_t>(in_[v].size());
    std::vector<bool> placed(n_, false);
    for (int32_t step = 0; step < n_; ++step) {
      int32_t next = -1;
      for (int32_t v = 0; v < n_ && next < 0; ++v) {
        if (!placed[v] && indegree[v] == 0) next = v;
      }
      if (next < 0) return "the graph has a cycle";
      placed[next] = true;
      topo_.push_back(next);
      for (const auto& [v, bytes] : out_[next]) --indegree[v];
    }
    // Devices: the whole cluster (ring links cross the groups).
    std::map<std::string, int32_t> device_index;
    for (int32_t d = 0; d < num_cluster_devices_; ++d) {
      const v1::Device& device = cluster.devices(d);
      speed_.push_back(device.has_speed() ? device.speed() : 1.0);
      node_.push_back(device.node());
      device_index[device.name()] = d;
    }
    link_.assign(static_cast<size_t>(num_cluster_devices_) * num_cluster_devices_, LinkParams());
    for (int32_t a = 0; a < num_cluster_devices_; ++a) {
      for (int32_t b = 0; b < num_cluster_devices_; ++b) {
        const v1::LinkSpec& spec = node_[a] == node_[b] ? cluster.intra_node() : cluster.inter_node();
        link_[a * num_cluster_devices_ + b] = {spec.bandwidth_bytes_per_second(), spec.latency_ns()};
      }
    }
    for (const v1::Link& l : cluster.links()) {
      const int32_t a = device_index.at(l.a());
      const int32_t b = device_index.at(l.b());
      const LinkParams params{l.spec().bandwidth_bytes_per_second(), l.spec().latency_ns()};
      link_[a * num_cluster_devices_ + b] = params;
      link_[b * num_cluster_devices_ + a] = params;
    }
    for (int32_t u = 0; u < n_; ++u) time_.push_back(ScaledTime(compute_[u], speed_[assigned_[u]]));
    return "";
  }

  const LinkParams& Link(int32_t a, int32_t b) const { return link_[a * num_cluster_devices_ + b]; }

  int64_t TransferTime(int32_t a, int32_t b, int64_t bytes) const {
    const LinkParams& link = Link(a, b);
    return link.latency + DivideRoundHalfUp(static_cast<__int128>(bytes) * 1000000000, link.bandwidth);
  }

  // Per op: whether some per-microbatch op is among its ancestors / descendants. A once op with both
  // breaks api.md §2.1's rule (and would deadlock the window).
  std::string CheckPlanRule() {
    per_microbatch_ancestor_.assign(n_, false);
    std::vector<bool> per_microbatch_descendant(n_, false);
    for (int32_t v : topo_) {
      for (const auto& [u, bytes] : in_[v]) {
        if (!once_[u] || per_microbatch_ancestor_[u]) per_microbatch_ancestor_[v] = true;
      }
    }
    for (auto it = topo_.rbegin(); it != topo_.rend(); ++it) {
      const int32_t u = *it;
      for (const auto& [v, bytes] : out_[u]) {
        if (!once_[v] || per_microbatch_descendant[v]) per_microbatch_descendant[u] = true;
      }
    }
    for (int32_t v = 0; v < n_; ++v) {
      if (once_[v] && per_microbatch_ancestor_[v] && per_microbatch_descendant[v]) {
        return absl::StrCat("once op ", name_[v], " sits inside the microbatch flow");
      }
    }
    return "";
  }

  // ---------------------------------------------------------------------------------------------
  // Priority: the §2 bottom level of the one-microbatch graph under the assignment.
  // ---------------------------------------------------------------------------------------------
  // max(bytes of u's edges into ops on device b), over consumers accepted by `which`.
  template <typename Filter>
  int64_t MaxBytesInto(int32_t u, int32_t b, Filter which) const {
    int64_t bytes = 0;
    for (const auto& [v, edge_bytes] : out_[u]) {
      if (assigned_[v] == b && which(v)) bytes = std::max(bytes, edge_bytes);
    }
    return bytes;
  }

  void ComputeBottomLevels() {
    bottom_level_.assign(n_, 0);
    for (auto it = topo_.rbegin(); it != topo_.rend(); ++it) {
      const int32_t u = *it;
      int64_t tail = 0;
      for (const auto& [v, bytes] : out_[u]) {
        int64_t cost = 0;
        if (assigned_[v] != assigned_[u]) {
          cost = TransferTime(assigned_[u], assigned_[v],
                              MaxBytesInto(u, assigned_[v], [](int32_t) { return true; }));
        }
        tail = std::max(tail, cost + bottom_level_[v]);
      }
      bottom_level_[u] = time_[u] + tail;
    }
  }

  // ---------------------------------------------------------------------------------------------
  // The unrolled step, materialised.
  // ---------------------------------------------------------------------------------------------
  void BuildNodes() {
    node_of_.assign(n_, std::vector<int32_t>(m_, -1));
    for (int32_t u = 0; u < n_; ++u) {
      const int32_t copies = once_[u] ? 1 : m_;
      for (int32_t m = 0; m < copies; ++m) {
        Node node;
        node.op = u;
        node.microbatch = m;
        node.device = assigned_[u];
        node.duration = time_[u];
        node.klass = once_[u] ? (per_microbatch_ancestor_[u] ? m_ : -1) : m;
        node_of_[u][m] = static_cast<int32_t>(nodes_.size());
        nodes_.push_back(node);
      }
    }
  }

  bool IsGradientProducer(int32_t u) const {
    if (once_[u]) return false;
    for (const auto& [v, bytes] : out_[u]) {
      if (once_[v]) return true;
    }
    return false;
  }

  void AddTransfer(OracleTransfer::Kind kind, int32_t u, int32_t m, int32_t b, int64_t bytes) {
    Transfer t;
    t.kind = kind;
    t.producer = u;
    t.microbatch = m;
    t.from = assigned_[u];
    t.to = b;
    t.bytes = bytes;
    t.duration = TransferTime(assigned_[u], b, bytes);
    transfer_index_[{static_cast<int>(kind), u, m, b}] = static_cast<int32_t>(transfers_.size());
    transfers_.push_back(t);
  }

  int32_t FindTransfer(OracleTransfer::Kind kind, int32_t u, int32_t m, int32_t b) const {
    return transfer_index_.at({static_cast<int>(kind), u, m, b});
  }

  // Devices other than u's hosting a consumer of u accepted by `which`.
  template <typename Filter>
  std::set<int32_t> ConsumerDevices(int32_t u, Filter which) const {
    std::set<int32_t> devices;
    for (const auto& [v, bytes] : out_[u]) {
      if (assigned_[v] != assigned_[u] && which(v)) devices.insert(assigned_[v]);
    }
    return devices;
  }

  void BuildTransfers() {
    const auto per_microbatch = [this](int32_t v) { return !once_[v]; };
    const auto once = [this](int32_t v) { return static_cast<bool>(once_[v]); };
    const auto any = [](int32_t) { return true; };
    for (int32_t u = 0; u < n_; ++u) {
      if (once_[u]) {
        // A once producer: §2 transfers, the max over all its edges into the device.
        for (int32_t b : ConsumerDevices(u, any)) {
          AddTransfer(OracleTransfer::Kind::kOnce, u, -1, b, MaxBytesInto(u, b, any));
        }
        continue;
      }
      for (int32_t b : ConsumerDevices(u, per_microbatch)) {
        const int64_t bytes = MaxBytesInto(u, b, per_microbatch);
        for (int32_t m = 0; m < m_; ++m) AddTransfer(OracleTransfer::Kind::kPerCopy, u, m, b, bytes);
      }
      for (int32_t b : ConsumerDevices(u, once)) {
        AddTransfer(OracleTransfer::Kind::kAccumulated, u, -1, b, MaxBytesInto(u, b, once));
      }
    }
  }

  void BuildDependencies() {
    for (Node& node : nodes_) {
      const int32_t v = node.op;
      const int32_t m = node.microbatch;
      for (const auto& [u, bytes] : in_[v]) {
        const bool local = assigned_[u] == assigned_[v];
        if (once_[u]) {
          // Every copy of a per-microbatch consumer (or the once consumer) waits for the one run of u.
          node.waits_for.push_back(
              local ? Dependency{Dependency::Kind::kInstanceDone, node_of_[u][0]}
                    : Dependency{Dependency::Kind::kTransferArrived,
                                 FindTransfer(OracleTransfer::Kind::kOnce, u, -1, assigned_[v])});
        } else if (!once_[v]) {
          node.waits_for.push_back(
              local ? Dependency{Dependency::Kind::kInstanceDone, node_of_[u][m]}
                    : Dependency{Dependency::Kind::kTransferArrived,
                                 FindTransfer(OracleTransfer::Kind::kPerCopy, u, m, assigned_[v])});
        } else {
          // Per-microbatch u into once v: the accumulated (and, with D > 1, all-reduced) gradient.
          node.waits_for.push_back(
              local ? Dependency{Dependency::Kind::kGradientReady, u}
                    : Dependency{Dependency::Kind::kTransferArrived,
                                 FindTransfer(OracleTransfer::Kind::kAccumulated, u, -1, assigned_[v])});
        }
      }
      if (!once_[v] && m >= w_) {
        node.waits_for.push_back({Dependency::Kind::kMicrobatchDone, m - w_});
      }
    }
  }

  // The slowest link of the ring through group-0 device d (lowest bandwidth; tie: highest latency).
  LinkParams RingLink(int32_t d) const {
    LinkParams slowest;
    bool first = true;
    for (int32_t k = 0; k < d_; ++k) {
      const LinkParams& link = Link(d + k * g_, d + ((k + 1) % d_) * g_);
      if (first || link.bandwidth < slowest.bandwidth ||
          (link.bandwidth == slowest.bandwidth && link.latency > slowest.latency)) {
        slowest = link;
        first = false;
      }
    }
    return slowest;
  }

  void BuildAllReduces() {
    all_reduce_of_.assign(n_, -1);
    gradient_ready_.assign(n_, false);
    gradient_ready_time_.assign(n_, 0);
    copies_done_.assign(n_, 0);
    if (d_ == 1) return;
    for (int32_t u = 0; u < n_; ++u) {
      if (!IsGradientProducer(u)) continue;
      AllReduce ar;
      ar.producer = u;
      ar.ring = assigned_[u];
      ar.bytes = 0;
      for (const auto& [v, bytes] : out_[u]) {
        if (once_[v]) ar.bytes = std::max(ar.bytes, bytes);
      }
      const LinkParams link = RingLink(ar.ring);
      const int64_t steps = 2 * static_cast<int64_t>(d_ - 1);
      ar.duration = DivideRoundHalfUp(static_cast<__int128>(steps) * ar.bytes * 1000000000,
                                      static_cast<__int128>(d_) * link.bandwidth) +
                    steps * link.latency;
      all_reduce_of_[u] = static_cast<int32_t>(all_reduces_.size());
      all_reduces_.push_back(ar);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // The schedule: a time-ordered event list, events at t first, then pick rounds.
  // ---------------------------------------------------------------------------------------------
  bool Satisfied(const Dependency& dep) const {
    switch (dep.kind) {
      case Dependency::Kind::kInstanceDone:
        return nodes_[dep.index].done;
      case Dependency::Kind::kTransferArrived:
        return transfers_[dep.index].arrived;
      case Dependency::Kind::kGradientReady:
        return gradient_ready_[dep.index];
      case Dependency::Kind::kMicrobatchDone:
        for (const Node& node : nodes_) {
          if (!once_[node.op] && node.microbatch == dep.index && !node.done) return false;
        }
        return true;
    }
    return false;
  }

  bool Ready(const Node& node) const {
    if (node.started) return false;
    for (const Dependency& dep : node.waits_for) {
      if (!Satisfied(dep)) return false;
    }
    return true;
  }

  // True when a should run before b on their device: lower class, higher bottom level, smaller name.
  bool Before(const Node& a, const Node& b) const {
    if (a.klass != b.klass) return a.klass < b.klass;
    if (bottom_level_[a.op] != bottom_level_[b.op]) return bottom_level_[a.op] > bottom_level_[b.op];
    return name_[a.op] < name_[b.op];
  }

  void Send(int32_t x, int64_t now) {
    Transfer& t = transfers_[x];
    t.left = true;
    t.leave = now;
    t.arrival = now + t.duration;
    events_.push_back({t.arrival, Event::Kind::kTransferArrival, x});
  }

  void GradientReady(int32_t u, int64_t now) {
    gradient_ready_[u] = true;
    gradient_ready_time_[u] = now;
    for (int32_t x = 0; x < static_cast<int32_t>(transfers_.size()); ++x) {
      const Transfer& t = transfers_[x];
      if (t.kind == OracleTransfer::Kind::kAccumulated && t.producer == u) Send(x, now);
    }
  }

  void Apply(const Event& event, int64_t now) {
    switch (event.kind) {
      case Event::Kind::kInstanceFinish: {
        Node& node = nodes_[event.index];
        node.done = true;
        device_busy_[node.device] = false;
        const int32_t u = node.op;
        for (int32_t x = 0; x < static_cast<int32_t>(transfers_.size()); ++x) {
          const Transfer& t = transfers_[x];
          if (t.producer != u) continue;
          if (t.kind == OracleTransfer::Kind::kOnce ||
              (t.kind == OracleTransfer::Kind::kPerCopy && t.microbatch == node.microbatch)) {
            Send(x, now);
          }
        }
        if (IsGradientProducer(u) && ++copies_done_[u] == m_) {
          if (d_ == 1) {
            GradientReady(u, now);
          } else {
            AllReduce& ar = all_reduces_[all_reduce_of_[u]];
            ar.ready = true;
            ar.ready_time = now;
          }
        }
        break;
      }
      case Event::Kind::kTransferArrival:
        transfers_[event.index].arrived = true;
        break;
      case Event::Kind::kAllReduceEnd: {
        AllReduce& ar = all_reduces_[event.index];
        ar.ended = true;
        ring_busy_[ar.ring] = false;
        GradientReady(ar.producer, now);
        break;
      }
    }
  }

  // One device round at `now`: every free device starts its best ready instance. Returns whether
  // anything started.
  bool PickDevices(int64_t now) {
    bool started = false;
    for (int32_t d = 0; d < g_; ++d) {
      if (device_busy_[d]) continue;
      int32_t best = -1;
      for (int32_t i = 0; i < static_cast<int32_t>(nodes_.size()); ++i) {
        const Node& node = nodes_[i];
        if (node.device != d || !Ready(node)) continue;
        if (best < 0 || Before(node, nodes_[best])) best = i;
      }
      if (best < 0) continue;
      Node& node = nodes_[best];
      node.started = true;
      node.start = now;
      node.finish = now + node.duration;
      device_busy_[d] = true;
      events_.push_back({node.finish, Event::Kind::kInstanceFinish, best});
      started = true;
    }
    return started;
  }

  // One ring round at `now`: every free ring starts, among its ready all-reduces, the one ready first
  // (ties: the smaller producer name). Returns whether anything started.
  bool PickRings(int64_t now) {
    bool started = false;
    for (int32_t r = 0; r < g_ && d_ > 1; ++r) {
      if (ring_busy_[r]) continue;
      int32_t best = -1;
      for (int32_t i = 0; i < static_cast<int32_t>(all_reduces_.size()); ++i) {
        const AllReduce& ar = all_reduces_[i];
        if (ar.ring != r || !ar.ready || ar.started) continue;
        if (best < 0) {
          best = i;
          continue;
        }
        const AllReduce& b = all_reduces_[best];
        if (ar.ready_time < b.ready_time ||
            (ar.ready_time == b.ready_time && name_[ar.producer] < name_[b.producer])) {
          best = i;
        }
      }
      if (best < 0) continue;
      AllReduce& ar = all_reduces_[best];
      ar.started = true;
      ar.start = now;
      ar.end = now + ar.duration;
      ring_busy_[r] = true;
      events_.push_back({ar.end, Event::Kind::kAllReduceEnd, best});
      started = true;
    }
    return started;
  }

  std::string Simulate() {
    device_busy_.assign(g_, false);
    ring_busy_.assign(g_, false);
    int64_t now = 0;
    while (true) {
      // Every event at `now`, including those its application creates at `now` (zero durations).
      while (true) {
        auto it = std::find_if(events_.begin(), events_.end(),
                               [now](const Event& e) { return e.time == now; });
        if (it == events_.end()) break;
        const Event event = *it;
        events_.erase(it);
        Apply(event, now);
      }
      // Devices pick (zero-duration starts add events at `now`: apply them and pick again); rings pick
      // only once nothing else happens at `now`, so all-reduces that become ready at one time start in
      // name order however many rounds that time took.
      if (PickDevices(now)) continue;
      if (PickRings(now)) continue;  // a zero-length all-reduce ends at `now`
      if (events_.empty()) break;
      int64_t next = events_.front().time;
      for (const Event& e : events_) next = std::min(next, e.time);
      now = next;
    }
    for (const Node& node : nodes_) {
      if (!node.done) {
        return absl::StrCat("no progress: ", name_[node.op], "#", node.microbatch, " never ran");
      }
    }
    return "";
  }

  // ---------------------------------------------------------------------------------------------
  // Results: numbers, memory intervals, peaks, lower bound.
  // ---------------------------------------------------------------------------------------------
  void AddInterval(OracleResult* r, OracleInterval::Kind kind, int32_t device, int32_t op, int32_t m,
                   int64_t bytes, int64_t from, int64_t until) {
    OracleInterval i;
    i.kind = kind;
    i.device = device;
    i.op = op;
    i.microbatch = m;
    i.bytes = bytes;
    i.from_ns = from;
    i.until_ns = until;
    r->intervals.push_back(i);
  }

  void CollectIntervals(OracleResult* r) {
    using Kind = OracleInterval::Kind;
    for (int32_t u = 0; u < n_; ++u) {
      AddInterval(r, Kind::kPersistent, assigned_[u], u, -1, persistent_[u], 0, r->makespan_ns);
    }
    for (const Node& node : nodes_) {
      const int32_t u = node.op;
      const int32_t a = node.device;
      const int32_t m_tag = once_[u] ? -1 : node.microbatch;
      AddInterval(r, Kind::kTemp, a, u, m_tag, temp_[u], node.start, node.finish);
      // Output: until its local readers are done and its transfers have arrived.
      int64_t until = node.finish;
      for (const auto& [v, bytes] : out_[u]) {
        if (assigned_[v] != a) continue;
        if (once_[u]) {
          for (int32_t m = 0; m < (once_[v] ? 1 : m_); ++m) {
            until = std::max(until, nodes_[node_of_[v][m]].finish);
          }
        } else if (!once_[v]) {
          until = std::max(until, nodes_[node_of_[v][node.microbatch]].finish);
        }
      }
      for (const Transfer& t : transfers_) {
        if (t.producer != u) continue;
        if (t.kind == OracleTransfer::Kind::kOnce ||
            (t.kind == OracleTransfer::Kind::kPerCopy && t.microbatch == node.microbatch)) {
          until = std::max(until, t.arrival);
        }
      }
      AddInterval(r, Kind::kOutput, a, u, m_tag, output_[u], node.start, until);
    }
    // Received copies: until the last reader there is done.
    for (const Transfer& t : transfers_) {
      int64_t until = t.arrival;
      for (const auto& [v, bytes] : out_[t.producer]) {
        if (assigned_[v] != t.to) continue;
        if (t.kind == OracleTransfer::Kind::kOnce) {
          for (int32_t m = 0; m < (once_[v] ? 1 : m_); ++m) {
            until = std::max(until, nodes_[node_of_[v][m]].finish);
          }
        } else if (t.kind == OracleTransfer::Kind::kPerCopy && !once_[v]) {
          until = std::max(until, nodes_[node_of_[v][t.microbatch]].finish);
        } else if (t.kind == OracleTransfer::Kind::kAccumulated && once_[v]) {
          until = std::max(until, nodes_[node_of_[v][0]].finish);
        }
      }
      AddInterval(r,
                  t.kind == OracleTransfer::Kind::kAccumulated ? Kind::kReceivedAccumulated
                                                               : Kind::kReceived,
                  t.to, t.producer, t.microbatch, t.bytes, t.arrival, until);
    }
    // Accumulation buffers of gradient producers.
    for (int32_t u = 0; u < n_; ++u) {
      if (!IsGradientProducer(u)) continue;
      int64_t from = nodes_[node_of_[u][0]].start;
      for (int32_t m = 0; m < m_; ++m) from = std::min(from, nodes_[node_of_[u][m]].start);
      int64_t until = from;
      for (const auto& [v, bytes] : out_[u]) {
        if (once_[v] && assigned_[v] == assigned_[u]) {
          until = std::max(until, nodes_[node_of_[v][0]].finish);
        }
      }
      if (d_ > 1) until = std::max(until, all_reduces_[all_reduce_of_[u]].end);
      for (const Transfer& t : transfers_) {
        if (t.kind == OracleTransfer::Kind::kAccumulated && t.producer == u) {
          until = std::max(until, t.arrival);
        }
      }
      AddInterval(r, Kind::kAccumulation, assigned_[u], u, -1, output_[u], from, until);
    }
  }

  // Peak per device: the usage at every time an interval begins (half-open: what ends at t is gone).
  void SweepPeaks(OracleResult* r) {
    r->peak_memory_bytes.assign(g_, 0);
    r->peak_time_ns.assign(g_, 0);
    for (int32_t d = 0; d < g_; ++d) {
      bool any = false;
      for (const OracleInterval& probe : r->intervals) {
        if (probe.device != d || probe.bytes == 0 || probe.from_ns >= probe.until_ns) continue;
        const int64_t t = probe.from_ns;
        int64_t usage = 0;
        for (const OracleInterval& i : r->intervals) {
          if (i.device == d && i.from_ns <= t && t < i.until_ns) usage += i.bytes;
        }
        if (!any || usage > r->peak_memory_bytes[d] ||
            (usage == r->peak_memory_bytes[d] && t < r->peak_time_ns[d])) {
          r->peak_memory_bytes[d] = usage;
          r->peak_time_ns[d] = t;
          any = true;
        }
      }
    }
  }

  int64_t LowerBound() const {
    double fastest = speed_[0];
    double speed_sum = 0;
    for (int32_t d = 0; d < g_; ++d) {
      fastest = std::max(fastest, speed_[d]);
      speed_sum += speed_[d];
    }
    std::vector<int64_t> path(n_, 0);  // longest path ending at the op, free communication
    int64_t longest = 0;
    for (int32_t v : topo_) {
      int64_t before = 0;
      for (const auto& [u, bytes] : in_[v]) before = std::max(before, path[u]);
      path[v] = before + ScaledTime(compute_[v], fastest);
      longest = std::max(longest, path[v]);
    }
    int64_t work = 0;
    for (int32_t u = 0; u < n_; ++u) work += once_[u] ? compute_[u] : m_ * compute_[u];
    const int64_t average = std::llround(static_cast<double>(work) / speed_sum);
    return std::max(longest, average);
  }

  void Report(OracleResult* r) {
    for (const Node& node : nodes_) r->makespan_ns = std::max(r->makespan_ns, node.finish);
    r->lower_bound_ns = LowerBound();
    r->busy_ns.assign(g_, 0);
    r->op_count.assign(g_, 0);
    for (int32_t u = 0; u < n_; ++u) ++r->op_count[assigned_[u]];
    for (const Node& node : nodes_) {
      r->busy_ns[node.device] += node.duration;
      r->instances.push_back({node.op, node.microbatch, node.device, node.start, node.finish});
    }
    for (const Transfer& t : transfers_) {
      r->transfer_bytes += t.bytes;
      ++r->transfer_count;
      r->transfers.push_back({t.kind, t.producer, t.microbatch, t.from, t.to, t.bytes, t.leave,
                              t.arrival});
    }
    for (const AllReduce& ar : all_reduces_) {
      r->all_reduces.push_back({ar.producer, ar.ring, ar.bytes, ar.duration, ar.ready_time, ar.start,
                                ar.end});
    }
    r->bottom_level_ns = bottom_level_;
    r->gradient_ready_ns.assign(n_, -1);
    for (int32_t u = 0; u < n_; ++u) {
      if (IsGradientProducer(u)) r->gradient_ready_ns[u] = gradient_ready_time_[u];
    }
    r->microbatch_done_ns.assign(m_, 0);
    for (const Node& node : nodes_) {
      if (once_[node.op]) continue;
      int64_t& done = r->microbatch_done_ns[node.microbatch];
      done = std::max(done, node.finish);
    }
    CollectIntervals(r);
    SweepPeaks(r);
  }

  const v1::PlaceRequest& request_;
  const std::vector<int32_t>& assigned_;
  const int32_t m_, w_, d_;
  int32_t n_ = 0;
  int32_t num_cluster_devices_ = 0;
  int32_t g_ = 0;  // devices per group

  std::vector<std::string> name_;
  std::vector<int64_t> compute_, output_, persistent_, temp_, time_;
  std::vector<uint8_t> once_;
  std::vector<std::vector<std::pair<int32_t, int64_t>>> out_, in_;  // merged edges
  std::vector<int32_t> topo_;
  std::vector<double> speed_;
  std::vector<std::string> node_;
  std::vector<LinkParams> link_;
  std::vector<bool> per_microbatch_ancestor_;
  std::vector<int64_t> bottom_level_;

  std::vector<Node> nodes_;
  std::vector<std::vector<int32_t>> node_of_;  // [op][microbatch]
  std::vector<Transfer> transfers_;
  std::map<std::tuple<int, int32_t, int32_t, int32_t>, int32_t> transfer_index_;
  std::vector<AllReduce> all_reduces_;
  std::vector<int32_t> all_reduce_of_;
  std::vector<bool> gradient_ready_;
  std::vector<int64_t> gradient_ready_time_;
  std::vector<int32_t> copies_done_;

  std::vector<Event> events_;
  std::vector<bool> device_busy_;
  std::vector<bool> ring_busy_;
};

}  // namespace

const OracleInstance* OracleResult::Find(int32_t op, int32_t m) const {
  for (const OracleInstance& i : instances) {
    if (i.op == op && i.microbatch == m) return &i;
  }
  return nullptr;
}

OracleResult SimulatePlanOracle(const v1::PlaceRequest& request, const std::vector<int32_t>& device,
                                int32_t microbatches, int32_t max_in_flight, int32_t data_parallel) {
  return Oracle(request, device, microbatches, max_in_flight, data_parallel).Run();
}

}  // namespace placement::testutil
