// Differential tests of the simulator's training plans (api.md §2.1) against an independent oracle
// (tests/testutil/plan_oracle.h), written from api.md and simulator.h's documented decisions only.
//
//  * Hand-computed cases: every expected number is derived in the comments, and both the product and
//    the oracle must produce it.
//  * Random cases: small random DAGs with once ops (parameter reads and update chains that respect the
//    §2.1 rule), random assignments, M in 1..6, W in 1..M, D in {1, 2, 3} with 1..4 devices per group,
//    speeds other than 1.0, links with latency and overrides, zero-duration ops and zero-byte edges.
//    Every number and every instance's start and finish must agree, and so must the recorded transfers,
//    all-reduces and memory intervals.
//
// Environment: PLAN_ORACLE_SEED (first seed, default 1) and PLAN_ORACLE_ITERATIONS (default 400) to run
// other or more random cases; PLAN_ORACLE_MAX_OPS (52, plus appended updates), PLAN_ORACLE_MAX_GROUP (4
// devices per group) and PLAN_ORACLE_MAX_MICROBATCHES (6) for larger ones. A disagreement prints the
// request as JSON with the plan and assignment.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "placement/v1/placement.pb.h"
#include "service/engine/model/model.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/model/replica_group.h"
#include "service/engine/sim/simulator.h"
#include "tests/testutil/plan_oracle.h"
#include "tests/testutil/random_graph.h"

namespace placement::engine {
namespace {

using testutil::OracleInterval;
using testutil::OracleResult;
using testutil::OracleTransfer;
using testutil::Rng;

// A request, the group-0 device of each op (request order) and the plan.
struct PlanCase {
  v1::PlaceRequest request;
  std::vector<int32_t> device;
  int32_t microbatches = 1;
  int32_t max_in_flight = 1;
  int32_t data_parallel = 1;
  // Leave the request's max_in_flight at 0 ("the solver chooses") and give W to the simulator through
  // SimOptions::max_in_flight instead, as the solvers do when they try windows.
  bool window_in_sim_options = false;
  // With W = M: leave the window open everywhere (request 0, SimOptions 0), which means no limit.
  bool window_left_open = false;
};

std::string Describe(const PlanCase& c) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(c.request, &json, options);
  return absl::StrCat("M=", c.microbatches, " W=", c.max_in_flight,
                      c.window_in_sim_options ? " (in SimOptions)" : "",
                      c.window_left_open ? " (left open)" : "", " D=", c.data_parallel,
                      " device=[", absl::StrJoin(c.device, ","), "]\nrequest: ", json);
}

// The product's answer for one case: the model as the service builds it, replica group 0, one run
// without recording (the schedule every algorithm sees) and one with every record.
struct ProductRun {
  Model group;
  SimResult plain;
  SimResult recorded;
  int64_t lower_bound_ns = 0;
  int64_t assigned_bound_ns = 0;
  // SimOptions::stop_at_ns: what went wrong, if anything (a run asked to stop at or below the step must
  // stop with a bound between the two; above it, it must be the full run).
  std::string stop_problem;
};

ProductRun RunProduct(const PlanCase& c, std::string* error) {
  ProductRun run;
  v1::PlaceRequest request = c.request;
  request.mutable_options()->set_microbatches(c.microbatches);
  const bool window_elsewhere = c.window_in_sim_options || c.window_left_open;
  request.mutable_options()->set_max_in_flight(window_elsewhere ? 0 : c.max_in_flight);
  request.mutable_options()->set_data_parallel(c.data_parallel);
  absl::StatusOr<Model> model = BuildModel(request);
  if (!model.ok()) {
    *error = std::string(model.status().message());
    return run;
  }
  run.group = ReplicaGroupModel(*model, c.data_parallel);
  Assignment assignment(run.group.num_ops());
  for (int32_t i = 0; i < run.group.num_ops(); ++i) {
    assignment[run.group.op_of_request_index[i]] = c.device[i];
  }
  Simulator sim(run.group);
  SimOptions plain;
  if (c.window_in_sim_options) plain.max_in_flight = c.max_in_flight;
  run.plain = sim.Run(assignment, plain);
  SimOptions record = plain;
  record.record_memory_intervals = true;
  record.record_transfers = true;
  run.recorded = sim.Run(assignment, record);
  run.lower_bound_ns = LowerBoundNs(run.group);
  run.assigned_bound_ns = AssignedLowerBoundNs(run.group, assignment);
  const int64_t step = run.plain.makespan_ns;
  for (const int64_t stop : {int64_t{1}, step / 2, step, step + 1}) {
    if (stop <= 0 || step <= 0) continue;
    SimOptions stopping = plain;
    stopping.stop_at_ns = stop;
    const SimResult& r = sim.Run(assignment, stopping);
    std::ostringstream problem;
    if (stop <= step && !(r.stopped_early && r.makespan_ns >= stop && r.makespan_ns <= step)) {
      problem << "stop at " << stop << " of " << step << ": stopped " << r.stopped_early << " at " << r.makespan_ns;
    } else if (stop > step && (r.stopped_early || r.makespan_ns != step || r.finish_ns != run.plain.finish_ns)) {
      problem << "stop at " << stop << " above the step " << step << " changed the run";
    }
    if (run.stop_problem.empty()) run.stop_problem = problem.str();
  }
  return run;
}

// Every disagreement between the product and the oracle, one line each (capped).
class Differences {
 public:
  template <typename T>
  void Check(const std::string& what, const T& product, const T& oracle) {
    if (product == oracle) return;
    std::ostringstream line;
    line << what << ": product " << product << ", oracle " << oracle;
    Add(line.str());
  }
  void Add(const std::string& line) {
    if (lines_.size() < 40) lines_.push_back(line);
    ++count_;
  }
  bool empty() const { return count_ == 0; }
  std::string Text() const {
    return absl::StrCat(count_, " difference(s):\n  ", absl::StrJoin(lines_, "\n  "));
  }

 private:
  std::vector<std::string> lines_;
  int64_t count_ = 0;
};

using TransferKey = std::tuple<int32_t, int32_t, int32_t, int32_t, int64_t, int64_t, int64_t>;
using AllReduceKey = std::tuple<int32_t, int32_t, int64_t, int64_t, int64_t, int64_t>;
using IntervalKey = std::tuple<int32_t, int32_t, int, int32_t, int64_t, int64_t, int64_t>;

template <typename Key>
void CompareMultisets(const std::string& what, std::vector<Key> product, std::vector<Key> oracle,
                      const std::function<std::string(const Key&)>& show, Differences* diff) {
  std::sort(product.begin(), product.end());
  std::sort(oracle.begin(), oracle.end());
  std::vector<Key> only_product, only_oracle;
  std::set_difference(product.begin(), product.end(), oracle.begin(), oracle.end(),
                      std::back_inserter(only_product));
  std::set_difference(oracle.begin(), oracle.end(), product.begin(), product.end(),
                      std::back_inserter(only_oracle));
  for (const Key& k : only_product) diff->Add(absl::StrCat(what, " only in product: ", show(k)));
  for (const Key& k : only_oracle) diff->Add(absl::StrCat(what, " only in oracle: ", show(k)));
}

int KindCode(MemoryInterval::Kind kind) { return static_cast<int>(kind); }

int KindCode(OracleInterval::Kind kind) {
  switch (kind) {
    case OracleInterval::Kind::kPersistent:
      return KindCode(MemoryInterval::Kind::kPersistent);
    case OracleInterval::Kind::kTemp:
      return KindCode(MemoryInterval::Kind::kTemp);
    case OracleInterval::Kind::kOutput:
      return KindCode(MemoryInterval::Kind::kOutput);
    case OracleInterval::Kind::kReceived:
    case OracleInterval::Kind::kReceivedAccumulated:
      return KindCode(MemoryInterval::Kind::kReceived);
    case OracleInterval::Kind::kAccumulation:
      return KindCode(MemoryInterval::Kind::kAccumulation);
  }
  return -1;
}

std::string CompareWithOracle(const PlanCase& c, const OracleResult& o, const ProductRun& p) {
  Differences diff;
  const Model& model = p.group;
  const int32_t n = model.num_ops();
  const SimResult& r = p.plain;
  const auto name = [&](int32_t request_index) {
    return c.request.graph().ops(request_index).name();
  };
  diff.Check("makespan_ns", r.makespan_ns, o.makespan_ns);
  diff.Check("lower_bound_ns", p.lower_bound_ns, o.lower_bound_ns);
  // The assignment's own bound (AssignedLowerBoundNs) never exceeds the oracle's step.
  if (p.assigned_bound_ns > o.makespan_ns) {
    diff.Add(absl::StrCat("assigned bound ", p.assigned_bound_ns, " exceeds the oracle's step ", o.makespan_ns));
  }
  diff.Check("transfer_bytes", r.transfer_bytes, o.transfer_bytes);
  diff.Check("transfer_count", r.transfer_count, o.transfer_count);
  diff.Check("microbatches", r.microbatches, c.microbatches);
  diff.Check("max_in_flight", r.max_in_flight, c.max_in_flight);
  diff.Check("devices", static_cast<size_t>(model.num_devices()), o.busy_ns.size());
  for (DeviceId d = 0; d < model.num_devices() && d < static_cast<int32_t>(o.busy_ns.size()); ++d) {
    const std::string dev = absl::StrCat("device ", d, " ");
    diff.Check(dev + "peak_memory_bytes", r.peak_memory_bytes[d], o.peak_memory_bytes[d]);
    diff.Check(dev + "peak_time_ns", r.peak_time_ns[d], o.peak_time_ns[d]);
    diff.Check(dev + "busy_ns", r.busy_ns[d], o.busy_ns[d]);
    diff.Check(dev + "op_count", r.op_count[d], o.op_count[d]);
  }
  for (int32_t i = 0; i < n; ++i) {
    const OpId v = model.op_of_request_index[i];
    diff.Check(absl::StrCat("bottom level of ", name(i)), r.bottom_level_ns[v], o.bottom_level_ns[i]);
    if (!r.gradient_ready_ns.empty()) {
      diff.Check(absl::StrCat("gradient_ready_ns of ", name(i)), r.gradient_ready_ns[v],
                 o.gradient_ready_ns[i]);
    }
  }
  for (const testutil::OracleInstance& inst : o.instances) {
    const OpId v = model.op_of_request_index[inst.op];
    const std::string what = absl::StrCat(name(inst.op), "#", inst.microbatch);
    diff.Check(what + " start", r.StartNs(v, inst.microbatch, n), inst.start_ns);
    diff.Check(what + " finish", r.FinishNs(v, inst.microbatch, n), inst.finish_ns);
  }
  bool any_per_microbatch = false;
  for (const v1::Op& op : c.request.graph().ops()) any_per_microbatch |= !op.once_per_step();
  if (any_per_microbatch && r.microbatch_done_ns.size() == o.microbatch_done_ns.size()) {
    for (size_t m = 0; m < o.microbatch_done_ns.size(); ++m) {
      diff.Check(absl::StrCat("microbatch_done_ns[", m, "]"), r.microbatch_done_ns[m],
                 o.microbatch_done_ns[m]);
    }
  }

  // The recorded run must schedule exactly like the plain one.
  const SimResult& rec = p.recorded;
  diff.Check("recorded makespan_ns", rec.makespan_ns, r.makespan_ns);
  diff.Check("recorded start_ns equal", rec.start_ns == r.start_ns, true);
  for (DeviceId d = 0; d < model.num_devices(); ++d) {
    diff.Check(absl::StrCat("recorded peak of device ", d), rec.peak_memory_bytes[d],
               r.peak_memory_bytes[d]);
  }
  std::vector<TransferKey> product_transfers, oracle_transfers;
  for (const TransferRecord& t : rec.transfers) {
    product_transfers.emplace_back(model.request_index[t.producer], t.microbatch, t.from, t.to,
                                   t.bytes, t.start_ns, t.arrival_ns);
  }
  for (const OracleTransfer& t : o.transfers) {
    oracle_transfers.emplace_back(t.producer, t.microbatch, t.from, t.to, t.bytes, t.leave_ns,
                                  t.arrival_ns);
  }
  CompareMultisets<TransferKey>(
      "transfer (producer, microbatch, from, to, bytes, leave, arrival)", product_transfers,
      oracle_transfers,
      [&](const TransferKey& k) {
        return absl::StrCat(name(std::get<0>(k)), ", ", std::get<1>(k), ", ", std::get<2>(k), "->",
                            std::get<3>(k), ", ", std::get<4>(k), " B, [", std::get<5>(k), ", ",
                            std::get<6>(k), ")");
      },
      &diff);
  std::vector<AllReduceKey> product_all_reduces, oracle_all_reduces;
  for (const AllReduceRecord& a : rec.all_reduces) {
    product_all_reduces.emplace_back(model.request_index[a.producer], a.device, a.bytes, a.ready_ns,
                                     a.start_ns, a.end_ns);
  }
  for (const testutil::OracleAllReduce& a : o.all_reduces) {
    oracle_all_reduces.emplace_back(a.producer, a.device, a.bytes, a.ready_ns, a.start_ns, a.end_ns);
  }
  CompareMultisets<AllReduceKey>(
      "all-reduce (producer, ring, bytes, ready, start, end)", product_all_reduces,
      oracle_all_reduces,
      [&](const AllReduceKey& k) {
        return absl::StrCat(name(std::get<0>(k)), ", ring ", std::get<1>(k), ", ", std::get<2>(k),
                            " B, ready ", std::get<3>(k), ", [", std::get<4>(k), ", ",
                            std::get<5>(k), ")");
      },
      &diff);
  std::vector<IntervalKey> product_intervals, oracle_intervals;
  for (const MemoryInterval& i : rec.memory_intervals) {
    product_intervals.emplace_back(i.device, model.request_index[i.op], KindCode(i.kind),
                                   i.microbatch, i.bytes, i.from_ns, i.until_ns);
  }
  for (const OracleInterval& i : o.intervals) {
    if (i.bytes == 0 || i.from_ns >= i.until_ns) continue;  // the product records neither
    oracle_intervals.emplace_back(i.device, i.op, KindCode(i.kind), i.microbatch, i.bytes, i.from_ns,
                                  i.until_ns);
  }
  CompareMultisets<IntervalKey>(
      "memory interval (device, op, kind, microbatch, bytes, from, until)", product_intervals,
      oracle_intervals,
      [&](const IntervalKey& k) {
        return absl::StrCat("device ", std::get<0>(k), ", ", name(std::get<1>(k)), ", kind ",
                            std::get<2>(k), ", #", std::get<3>(k), ", ", std::get<4>(k), " B, [",
                            std::get<5>(k), ", ", std::get<6>(k), ")");
      },
      &diff);
  return diff.empty() ? "" : diff.Text();
}

// Runs both and returns their disagreements ("" when they agree); a failure of either to run counts.
std::string Disagreements(const PlanCase& c, OracleResult* oracle_out = nullptr,
                          ProductRun* product_out = nullptr) {
  std::string error;
  ProductRun product = RunProduct(c, &error);
  if (!error.empty()) return "product rejected the request: " + error;
  OracleResult oracle = testutil::SimulatePlanOracle(c.request, c.device, c.microbatches,
                                                     c.max_in_flight, c.data_parallel);
  if (!oracle.error.empty()) return "oracle failed: " + oracle.error;
  std::string text = CompareWithOracle(c, oracle, product);
  if (!product.stop_problem.empty()) text += (text.empty() ? "" : "\n") + product.stop_problem;
  if (oracle_out != nullptr) *oracle_out = oracle;
  if (product_out != nullptr) *product_out = product;
  return text;
}

// ---------------------------------------------------------------------------------------------------
// Hand-computed cases. Links move 1 byte per ns (bandwidth 1e9 bytes/s) unless said otherwise.
// ---------------------------------------------------------------------------------------------------
class CaseBuilder {
 public:
  CaseBuilder& Op(const std::string& name, int64_t compute_ns, int32_t device, bool once = false,
                  int64_t output_bytes = 0, int64_t persistent_bytes = 0, int64_t temp_bytes = 0) {
    v1::Op* op = c_.request.mutable_graph()->add_ops();
    op->set_name(name);
    op->set_compute_ns(compute_ns);
    op->set_output_bytes(output_bytes);
    op->set_persistent_bytes(persistent_bytes);
    op->set_temp_bytes(temp_bytes);
    op->set_once_per_step(once);
    index_[name] = static_cast<int32_t>(c_.device.size());
    c_.device.push_back(device);
    return *this;
  }
  CaseBuilder& Edge(const std::string& src, const std::string& dst, int64_t bytes) {
    v1::Edge* edge = c_.request.mutable_graph()->add_edges();
    edge->set_src(index_.at(src));
    edge->set_dst(index_.at(dst));
    edge->set_bytes(bytes);
    return *this;
  }
  CaseBuilder& Devices(int32_t count, int64_t bandwidth, int64_t latency_ns,
                       const std::vector<double>& speeds = {}) {
    v1::Cluster* cluster = c_.request.mutable_cluster();
    for (int32_t d = 0; d < count; ++d) {
      v1::Device* device = cluster->add_devices();
      device->set_name(absl::StrCat("gpu", d));
      device->set_kind("gpu");
      device->set_node("host");
      device->set_memory_bytes(int64_t{1} << 40);
      if (d < static_cast<int32_t>(speeds.size())) device->set_speed(speeds[d]);
    }
    cluster->mutable_intra_node()->set_bandwidth_bytes_per_second(bandwidth);
    cluster->mutable_intra_node()->set_latency_ns(latency_ns);
    return *this;
  }
  CaseBuilder& Plan(int32_t microbatches, int32_t max_in_flight, int32_t data_parallel) {
    c_.microbatches = microbatches;
    c_.max_in_flight = max_in_flight;
    c_.data_parallel = data_parallel;
    return *this;
  }
  int32_t Index(const std::string& name) const { return index_.at(name); }
  const PlanCase& Get() const { return c_; }

 private:
  PlanCase c_;
  std::map<std::string, int32_t> index_;
};

constexpr int64_t kBytesPerNs = 1'000'000'000;

// Checks one instance's start and finish in both answers.
void ExpectInstance(const CaseBuilder& b, const OracleResult& o, const ProductRun& p,
                    const std::string& op, int32_t m, int64_t start, int64_t finish) {
  const int32_t i = b.Index(op);
  const OpId v = p.group.op_of_request_index[i];
  EXPECT_EQ(p.plain.StartNs(v, m, p.group.num_ops()), start) << "product " << op << "#" << m;
  EXPECT_EQ(p.plain.FinishNs(v, m, p.group.num_ops()), finish) << "product " << op << "#" << m;
  const testutil::OracleInstance* inst = o.Find(i, m);
  ASSERT_NE(inst, nullptr) << op << "#" << m;
  EXPECT_EQ(inst->start_ns, start) << "oracle " << op << "#" << m;
  EXPECT_EQ(inst->finish_ns, finish) << "oracle " << op << "#" << m;
}

void ExpectDevice(const OracleResult& o, const ProductRun& p, DeviceId d, int64_t peak,
                  int64_t peak_time, int64_t busy, int32_t op_count) {
  EXPECT_EQ(p.plain.peak_memory_bytes[d], peak) << "product device " << d;
  EXPECT_EQ(o.peak_memory_bytes[d], peak) << "oracle device " << d;
  EXPECT_EQ(p.plain.peak_time_ns[d], peak_time) << "product device " << d;
  EXPECT_EQ(o.peak_time_ns[d], peak_time) << "oracle device " << d;
  EXPECT_EQ(p.plain.busy_ns[d], busy) << "product device " << d;
  EXPECT_EQ(o.busy_ns[d], busy) << "oracle device " << d;
  EXPECT_EQ(p.plain.op_count[d], op_count) << "product device " << d;
  EXPECT_EQ(o.op_count[d], op_count) << "oracle device " << d;
}

void ExpectTotals(const OracleResult& o, const ProductRun& p, int64_t makespan, int64_t lower_bound,
                  int64_t transfer_bytes, int64_t transfer_count) {
  EXPECT_EQ(p.plain.makespan_ns, makespan);
  EXPECT_EQ(o.makespan_ns, makespan);
  EXPECT_EQ(p.lower_bound_ns, lower_bound);
  EXPECT_EQ(o.lower_bound_ns, lower_bound);
  EXPECT_EQ(p.plain.transfer_bytes, transfer_bytes);
  EXPECT_EQ(o.transfer_bytes, transfer_bytes);
  EXPECT_EQ(p.plain.transfer_count, transfer_count);
  EXPECT_EQ(o.transfer_count, transfer_count);
}

// A two-op chain over two devices, M = 3, W = 1: each microbatch waits for the previous one to leave
// the pipeline entirely.
//   a: 300 ns on gpu0 (speed 1), output 1000 B, persistent 5000, temp 10.
//   b: 1001 ns of work on gpu1 (speed 2.0): round(500.5) = 501 ns (halves away from zero);
//      output 200, persistent 7000, temp 20.
//   a -> b: 1000 B over 1e9 B/s with latency 100: 100 + 1000 = 1100 ns.
// Schedule: a#0 [0, 300), arrives 1400, b#0 [1400, 1901). Microbatch 1 waits for 1901:
//   a#1 [1901, 2201), arrives 3301, b#1 [3301, 3802); a#2 [3802, 4102), arrives 5202, b#2 [5202, 5703).
// Makespan 5703. Transfers: 3 × 1000 B.
// Lower bound: P = round(300 / 2) + round(1001 / 2) = 150 + 501 = 651 (fastest speed 2.0);
//   W = round(3 × 1301 / 3.0) = 1301 → 1301.
// gpu0: persistent 5000 + a#0's output 1000 [0, 1400) + temp 10 [0, 300) → peak 6010 at 0.
// gpu1: persistent 7000 + received 1000 [1400, 1901) + b#0's output 200 [1400, 1901) (no consumer)
//   + temp 20 → peak 8220 at 1400. Busy: 900 and 1503.
TEST(SimulatorPlanOracleTest, ChainOverTwoDevicesThreeMicrobatchesWindowOne) {
  CaseBuilder b;
  b.Devices(2, kBytesPerNs, 100, {1.0, 2.0})
      .Op("a", 300, 0, false, 1000, 5000, 10)
      .Op("b", 1001, 1, false, 200, 7000, 20)
      .Edge("a", "b", 1000)
      .Plan(3, 1, 1);
  OracleResult o;
  ProductRun p;
  EXPECT_EQ(Disagreements(b.Get(), &o, &p), "");
  ASSERT_TRUE(o.error.empty()) << o.error;
  ExpectInstance(b, o, p, "a", 0, 0, 300);
  ExpectInstance(b, o, p, "b", 0, 1400, 1901);
  ExpectInstance(b, o, p, "a", 1, 1901, 2201);
  ExpectInstance(b, o, p, "b", 1, 3301, 3802);
  ExpectInstance(b, o, p, "a", 2, 3802, 4102);
  ExpectInstance(b, o, p, "b", 2, 5202, 5703);
  ExpectTotals(o, p, 5703, 1301, 3000, 3);
  ExpectDevice(o, p, 0, 6010, 0, 900, 1);
  ExpectDevice(o, p, 1, 8220, 1400, 1503, 1);
}

// A parameter read, two per-microbatch ops and a once update on the other device; M = 2, no window.
//   p: once, 100 ns on gpu1, output 400 (no per-microbatch ancestor: class -1).
//   f: 200 ns on gpu0, output 500, persistent 1000.   g: 300 ns on gpu0, output 2000.
//   u: once, 400 ns on gpu1, output 100, persistent 3000 (class M: g is an ancestor).
//   p -> f 400 B, f -> g 500 B (same device), g -> u 2000 B (g is the gradient producer).
//   Links: 1e9 B/s, latency 50.
// Bottom levels: u 400; g 300 + (50 + 2000) + 400 = 2750; f 200 + 2750 = 2950; p 100 + 450 + 2950.
// Schedule: p [0, 100) on gpu1, its copy reaches gpu0 at 100 + 50 + 400 = 550.
//   gpu0: f#0 [550, 750); at 750 g#0 (microbatch 0) goes before f#1 (microbatch 1): g#0 [750, 1050),
//   f#1 [1050, 1250), g#1 [1250, 1550). The gradient is complete at 1550 and leaves for gpu1:
//   2000 B arrive at 1550 + 2050 = 3600; u [3600, 4000). Makespan 4000.
// Transfers: p's copy (400 B) and the accumulated gradient (2000 B): 2400 B, 2 transfers.
// Lower bound: P = 100 + 200 + 300 + 400 = 1000; W = round((2 × 500 + 500) / 2) = 750 → 1000.
// gpu0: persistent 1000; p's copy 400 [550, 1250) (until f#1, the last reader there, finished);
//   f#0 500 [550, 1050), f#1 500 [1050, 1550); g#0 2000 [750, 1050), g#1 2000 [1250, 1550) (no
//   per-microbatch reader: [start, finish)); accumulation buffer 2000 [750, 3600) (until the
//   accumulated transfer arrived).
//   [750, 1050): 1000 + 400 + 500 + 2000 + 2000 = 5900 = peak at 750;
//   [1250, 1550): 1000 + 500 + 2000 + 2000 = 5500. Busy 2 × 200 + 2 × 300 = 1000.
// gpu1: persistent 3000; p's output 400 [0, 550) (until its transfer arrived); received gradient 2000
//   [3600, 4000); u's output 100 [3600, 4000) → peak 5100 at 3600. Busy 500.
TEST(SimulatorPlanOracleTest, GradientProducerWithOnceUpdateOnAnotherDevice) {
  CaseBuilder b;
  b.Devices(2, kBytesPerNs, 50)
      .Op("p", 100, 1, true, 400)
      .Op("f", 200, 0, false, 500, 1000)
      .Op("g", 300, 0, false, 2000)
      .Op("u", 400, 1, true, 100, 3000)
      .Edge("p", "f", 400)
      .Edge("f", "g", 500)
      .Edge("g", "u", 2000)
      .Plan(2, 2, 1);
  OracleResult o;
  ProductRun p;
  EXPECT_EQ(Disagreements(b.Get(), &o, &p), "");
  ASSERT_TRUE(o.error.empty()) << o.error;
  ExpectInstance(b, o, p, "p", 0, 0, 100);
  ExpectInstance(b, o, p, "f", 0, 550, 750);
  ExpectInstance(b, o, p, "g", 0, 750, 1050);
  ExpectInstance(b, o, p, "f", 1, 1050, 1250);
  ExpectInstance(b, o, p, "g", 1, 1250, 1550);
  ExpectInstance(b, o, p, "u", 0, 3600, 4000);
  ExpectTotals(o, p, 4000, 1000, 2400, 2);
  ExpectDevice(o, p, 0, 5900, 750, 1000, 2);
  ExpectDevice(o, p, 1, 5100, 3600, 500, 2);
}

// D = 2 over four devices (group 0 = gpu0, gpu1; ring of gpu0 = gpu0 -> gpu2 -> gpu0), M = 1.
// Two gradient producers of zero duration finish at the same time on gpu0, the device running p2 before
// p1 (p2's bottom level is higher); their all-reduces are both ready at that time, and the ring, which
// picks only once nothing else happens at that time, starts the smaller name first: p1, then p2.
//   w: 100 ns on gpu0, output 1000; p1, p2: 0 ns on gpu0, output 500 each; z: 10 ns on gpu1;
//   u: once, 50 ns on gpu0; v: once, 1000 ns on gpu1.
//   w -> p1 0 B, w -> p2 0 B, p1 -> u 500 B, p2 -> z 100 B, p2 -> v 500 B.
//   Links 1e9 B/s, latency 10. All-reduce of 500 B: round(2 × 1 × 500 / 2) + 2 × 1 × 10 = 520.
// Bottom levels: u 50, z 10, v 1000; p2 = 0 + (10 + 500) + 1000 = 1510 (the transfer into gpu1 costs
//   its largest edge there, 500 B, for every consumer there); p1 = 0 + 50; w = 100 + 1510 = 1610.
// t = 0: w [0, 100). t = 100: p2 (bl 1510) before p1 (bl 50): p2 [100, 100), then p1 [100, 100).
//   p2's copy for z (100 B) leaves at 100 and arrives at 210: z [210, 220).
//   Then the ring: p1 [100, 620), p2 [620, 1140). u has p1's gradient at 620: u [620, 670).
//   p2's accumulated gradient leaves at 1140, 500 B arrive at 1650: v [1650, 2650). Makespan 2650
//   (the device's order, p2 first, would give 2130).
// Transfers: p2's copy 100 B and p2's gradient 500 B: 600 B, 2 (all-reduces are not transfers).
// Lower bound: P = w + p2 + v = 1100; W = round(1160 / 2) = 580 → 1100.
// gpu0: w's output 1000 [0, 100) (its readers p1, p2 finish at 100); p2's output 500 [100, 210) (until
//   its copy arrived); p2's buffer 500 [100, 1650) (until its gradient arrived on gpu1); p1's output is
//   empty ([100, 100)); p1's buffer 500 [100, 670) (u finished). Peak at 100: 3 × 500 = 1500. Busy 150.
// gpu1: received copy 100 [210, 220); received gradient 500 [1650, 2650) → peak 500 at 1650. Busy 1010.
TEST(SimulatorPlanOracleTest, AllReducesReadyTogetherOnOneRingGoBySmallerName) {
  CaseBuilder b;
  b.Devices(4, kBytesPerNs, 10)
      .Op("w", 100, 0, false, 1000)
      .Op("p2", 0, 0, false, 500)
      .Op("p1", 0, 0, false, 500)
      .Op("z", 10, 1)
      .Op("u", 50, 0, true)
      .Op("v", 1000, 1, true)
      .Edge("w", "p1", 0)
      .Edge("w", "p2", 0)
      .Edge("p1", "u", 500)
      .Edge("p2", "z", 100)
      .Edge("p2", "v", 500)
      .Plan(1, 1, 2);
  OracleResult o;
  ProductRun p;
  EXPECT_EQ(Disagreements(b.Get(), &o, &p), "");
  ASSERT_TRUE(o.error.empty()) << o.error;
  ExpectInstance(b, o, p, "w", 0, 0, 100);
  ExpectInstance(b, o, p, "p2", 0, 100, 100);
  ExpectInstance(b, o, p, "p1", 0, 100, 100);
  ExpectInstance(b, o, p, "z", 0, 210, 220);
  ExpectInstance(b, o, p, "u", 0, 620, 670);
  ExpectInstance(b, o, p, "v", 0, 1650, 2650);
  ExpectTotals(o, p, 2650, 1100, 600, 2);
  ExpectDevice(o, p, 0, 1500, 100, 150, 4);
  ExpectDevice(o, p, 1, 500, 1650, 1010, 2);
  // The all-reduces, in the order they started: p1, p2.
  const std::vector<std::tuple<std::string, int64_t, int64_t, int64_t>> expected = {
      {"p1", 100, 100, 620}, {"p2", 100, 620, 1140}};
  ASSERT_EQ(o.all_reduces.size(), expected.size());
  for (const auto& [op, ready, start, end] : expected) {
    bool found = false;
    for (const testutil::OracleAllReduce& a : o.all_reduces) {
      if (a.producer != b.Index(op)) continue;
      found = true;
      EXPECT_EQ(a.ready_ns, ready) << "oracle " << op;
      EXPECT_EQ(a.start_ns, start) << "oracle " << op;
      EXPECT_EQ(a.end_ns, end) << "oracle " << op;
    }
    EXPECT_TRUE(found) << op;
  }
  ASSERT_EQ(p.recorded.all_reduces.size(), expected.size());
  for (size_t k = 0; k < expected.size(); ++k) {
    const AllReduceRecord& a = p.recorded.all_reduces[k];
    EXPECT_EQ(p.group.op_name[a.producer], std::get<0>(expected[k]));
    EXPECT_EQ(a.ready_ns, std::get<1>(expected[k]));
    EXPECT_EQ(a.start_ns, std::get<2>(expected[k]));
    EXPECT_EQ(a.end_ns, std::get<3>(expected[k]));
  }
}

// Halves are rounded up in exact integer arithmetic, also where a double would not hold the operands.
// Three devices, D = 3 (one device per group; the ring of gpu0 is gpu0 -> gpu1 -> gpu2 -> gpu0), links
// of 8e9 B/s and no latency, M = 1.
//   g: 10 ns on gpu0; u: once, 5 ns on gpu0; g -> u carries a = 2^50 - 1 B (the largest allowed),
//   = 3 × 375299968947541.
// All-reduce: 2(D-1) × a × 1e9 / (D × bandwidth) = 4 × 3 × 375299968947541 × 1e9 / (3 × 8e9)
//   = 375299968947541 / 2 = 187649984473770.5 → 187649984473771 (+ 2(D-1) × 0 latency).
// It is ready at 10 and ends at 187649984473781; u [187649984473781, 187649984473786).
TEST(SimulatorPlanOracleTest, AllReduceDurationRoundsHalfUpExactly) {
  constexpr int64_t kMaxBytes = (int64_t{1} << 50) - 1;
  CaseBuilder b;
  b.Devices(3, 8'000'000'000, 0)
      .Op("g", 10, 0)
      .Op("u", 5, 0, true)
      .Edge("g", "u", kMaxBytes)
      .Plan(1, 1, 3);
  OracleResult o;
  ProductRun p;
  EXPECT_EQ(Disagreements(b.Get(), &o, &p), "");
  ASSERT_TRUE(o.error.empty()) << o.error;
  ExpectInstance(b, o, p, "g", 0, 0, 10);
  ExpectInstance(b, o, p, "u", 0, 187649984473781, 187649984473786);
}

// The same for a transfer: 2^50 - 1 B over 2e9 B/s take 562949953421311.5 → 562949953421312 ns.
//   a: 7 ns on gpu0, b: 3 ns on gpu1, a -> b 2^50 - 1 B, latency 0; M = 2, W = 2: both copies of a run
//   back to back ([0, 7), [7, 14)), their copies arrive at 562949953421319 and 562949953421326.
TEST(SimulatorPlanOracleTest, TransferDurationRoundsHalfUpExactly) {
  constexpr int64_t kMaxBytes = (int64_t{1} << 50) - 1;
  CaseBuilder b;
  b.Devices(2, 2'000'000'000, 0).Op("a", 7, 0).Op("b", 3, 1).Edge("a", "b", kMaxBytes).Plan(2, 2, 1);
  OracleResult o;
  ProductRun p;
  EXPECT_EQ(Disagreements(b.Get(), &o, &p), "");
  ASSERT_TRUE(o.error.empty()) << o.error;
  ExpectInstance(b, o, p, "b", 0, 562949953421319, 562949953421322);
  ExpectInstance(b, o, p, "b", 1, 562949953421326, 562949953421329);
}

// ---------------------------------------------------------------------------------------------------
// Random cases.
// ---------------------------------------------------------------------------------------------------
int64_t EnvInt(const char* name, int64_t fallback) {
  const char* value = std::getenv(name);
  return value == nullptr || *value == '\0' ? fallback : std::strtoll(value, nullptr, 10);
}

// A random DAG in generation order 0..n-1 (a topological order), its once ops and a cluster; then the
// ops are shuffled into the request, so canonical (name) order, request order and generation order
// all differ.
// The sizes drawn: at most `max_ops` ops before the appended updates (up to 6 more), `max_group` devices
// per group, `max_microbatches` microbatches.
struct RandomSizes {
  int32_t max_ops = 52;
  int32_t max_group = 4;
  int32_t max_microbatches = 6;
};

PlanCase RandomPlanCase(uint64_t seed, const RandomSizes& sizes) {
  Rng rng(seed);
  // Now and then times and sizes near the contract's limits, where rounding in floating point would
  // differ from the exact integer rounding the contract asks for.
  const int64_t scale = rng.Bernoulli(0.1) ? rng.Uniform(100'000, 200'000'000) : 1;
  const auto bytes_upto = [&rng, scale](int64_t hi) { return rng.Uniform(1, hi * scale); };
  int32_t n = static_cast<int32_t>(rng.Bernoulli(0.5) ? rng.Uniform(1, 12)
                                                     : rng.Uniform(1, sizes.max_ops));
  // Edges (src < dst in generation order), with parallel duplicates.
  struct GenEdge {
    int32_t src, dst;
    int64_t bytes;
  };
  std::vector<GenEdge> edges;
  const int64_t max_fan_in = rng.Uniform(1, 3);
  for (int32_t j = 1; j < n; ++j) {
    const int64_t fan_in = rng.Uniform(0, std::min<int64_t>(max_fan_in, j));
    std::set<int32_t> sources;
    for (int64_t k = 0; k < fan_in; ++k) {
      sources.insert(static_cast<int32_t>(rng.Bernoulli(0.6) ? j - rng.Uniform(1, std::min(j, 4))
                                                             : rng.Uniform(0, j - 1)));
    }
    for (int32_t i : sources) {
      const int64_t bytes = rng.Bernoulli(0.2) ? 0 : bytes_upto(4000);
      edges.push_back({i, j, bytes});
      if (rng.Bernoulli(0.1)) edges.push_back({i, j, rng.Bernoulli(0.3) ? 0 : bytes_upto(2000)});
    }
  }
  // Optimizer updates: once ops after everything, reading many ops' gradients (many all-reduces that
  // queue on their rings), each followed by a short chain of once ops.
  std::vector<bool> appended_update;
  if (rng.Bernoulli(0.4)) {
    const int32_t base = n;
    const int64_t updates = rng.Uniform(1, 2);
    for (int64_t k = 0; k < updates; ++k) {
      const int32_t update = n++;
      for (int32_t u = 0; u < base; ++u) {
        if (!rng.Bernoulli(0.4)) continue;
        edges.push_back({u, update, rng.Bernoulli(0.1) ? 0 : bytes_upto(4000)});
      }
      const int64_t chain = rng.Uniform(0, 2);
      for (int64_t j = 0; j < chain; ++j, ++n) edges.push_back({n - 1, n, bytes_upto(1000) - 1});
    }
    appended_update.assign(n, false);
    for (int32_t u = base; u < n; ++u) appended_update[u] = true;
  }
  std::vector<std::vector<int32_t>> succ(n), pred(n);
  for (const GenEdge& e : edges) {
    succ[e.src].push_back(e.dst);
    pred[e.dst].push_back(e.src);
  }
  // Once ops: update chains (seeds late in the order and everything after them: no per-microbatch
  // descendant) and parameter reads (seeds and everything before them: no per-microbatch ancestor).
  std::vector<bool> once(n, false);
  for (int32_t u = 0; u < static_cast<int32_t>(appended_update.size()); ++u) {
    once[u] = appended_update[u];
  }
  if (!rng.Bernoulli(0.25)) {
    const int64_t updates = rng.Uniform(0, 3);
    for (int64_t k = 0; k < updates; ++k) {
      std::vector<int32_t> stack = {static_cast<int32_t>(rng.Uniform(n - 1 - (n - 1) / 3, n - 1))};
      while (!stack.empty()) {
        const int32_t u = stack.back();
        stack.pop_back();
        if (once[u]) continue;
        once[u] = true;
        for (int32_t v : succ[u]) stack.push_back(v);
      }
    }
    const int64_t reads = rng.Uniform(0, 2);
    for (int64_t k = 0; k < reads; ++k) {
      std::vector<bool> closure(n, false);
      std::vector<int32_t> stack = {static_cast<int32_t>(rng.Uniform(0, n - 1))};
      int32_t size = 0;
      while (!stack.empty()) {
        const int32_t u = stack.back();
        stack.pop_back();
        if (closure[u]) continue;
        closure[u] = true;
        ++size;
        for (int32_t v : pred[u]) stack.push_back(v);
      }
      if (size > std::max(1, n / 3)) continue;
      for (int32_t u = 0; u < n; ++u) once[u] = once[u] || closure[u];
    }
  }
  // The cluster: D groups of G devices, on one to three hosts, with mixed speeds and link overrides.
  PlanCase c;
  const int64_t d_pick = rng.Uniform(0, 2);
  c.data_parallel = static_cast<int32_t>(d_pick + 1);
  const int32_t g = static_cast<int32_t>(rng.Uniform(1, sizes.max_group));
  const int32_t num_devices = c.data_parallel * g;
  const int64_t hosts = rng.Uniform(1, 3);
  static const double kSpeeds[] = {0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 0.3, 3.0, 0.7};
  v1::Cluster* cluster = c.request.mutable_cluster();
  for (int32_t d = 0; d < num_devices; ++d) {
    v1::Device* device = cluster->add_devices();
    device->set_name(absl::StrCat("dev", d));
    device->set_kind("gpu");
    device->set_node(absl::StrCat("host", rng.Uniform(0, hosts - 1)));
    device->set_memory_bytes(int64_t{1} << 40);
    if (!rng.Bernoulli(0.3)) device->set_speed(kSpeeds[rng.Uniform(0, 8)]);
  }
  const auto random_link = [&rng, scale](v1::LinkSpec* spec) {
    spec->set_bandwidth_bytes_per_second(rng.Bernoulli(0.1) ? 2'000'000'000
                                                            : rng.Uniform(300'000'000, 6'000'000'000));
    spec->set_latency_ns(rng.Bernoulli(0.2) ? 0 : rng.Uniform(1, 800 * scale));
  };
  random_link(cluster->mutable_intra_node());
  random_link(cluster->mutable_inter_node());
  std::set<std::pair<int32_t, int32_t>> overridden;
  const int64_t overrides = num_devices > 1 ? rng.Uniform(0, 3) : 0;
  for (int64_t k = 0; k < overrides; ++k) {
    int32_t a = static_cast<int32_t>(rng.Uniform(0, num_devices - 1));
    int32_t b = static_cast<int32_t>(rng.Uniform(0, num_devices - 1));
    if (a == b || !overridden.insert({std::min(a, b), std::max(a, b)}).second) continue;
    v1::Link* link = cluster->add_links();
    link->set_a(absl::StrCat("dev", a));
    link->set_b(absl::StrCat("dev", b));
    random_link(link->mutable_spec());
  }
  // Assignment in generation order: uniform, all on one device, or contiguous stages.
  std::vector<int32_t> gen_device(n);
  const int64_t style = rng.Uniform(0, 4);
  for (int32_t u = 0; u < n; ++u) {
    if (style == 0) {
      gen_device[u] = 0;
    } else if (style == 1) {
      gen_device[u] = static_cast<int32_t>(static_cast<int64_t>(u) * g / n);
    } else {
      gen_device[u] = static_cast<int32_t>(rng.Uniform(0, g - 1));
    }
  }
  // Request order: a random permutation of generation order; names unrelated to either.
  std::vector<int32_t> position(n), name_number(n);
  for (int32_t i = 0; i < n; ++i) position[i] = name_number[i] = i;
  for (int32_t i = n - 1; i > 0; --i) {
    std::swap(position[i], position[rng.Uniform(0, i)]);
    std::swap(name_number[i], name_number[rng.Uniform(0, i)]);
  }
  std::vector<int32_t> gen_at(n);  // request index -> generation index
  for (int32_t u = 0; u < n; ++u) gen_at[position[u]] = u;
  c.device.resize(n);
  const double zero_fraction = std::vector<double>{0.05, 0.15, 0.5}[rng.Uniform(0, 2)];
  for (int32_t i = 0; i < n; ++i) {
    const int32_t u = gen_at[i];
    v1::Op* op = c.request.mutable_graph()->add_ops();
    op->set_name(absl::StrCat("n", name_number[u]));  // "n10" sorts before "n2"
    op->set_compute_ns(rng.Bernoulli(zero_fraction) ? 0 : rng.Uniform(1, 3000 * scale));
    op->set_output_bytes(rng.Bernoulli(0.2) ? 0 : bytes_upto(5000));
    if (rng.Bernoulli(0.3)) op->set_persistent_bytes(bytes_upto(10000));
    if (rng.Bernoulli(0.3)) op->set_temp_bytes(bytes_upto(3000));
    op->set_once_per_step(once[u]);
    c.device[i] = gen_device[u];
  }
  for (int32_t k = static_cast<int32_t>(edges.size()) - 1; k > 0; --k) {
    std::swap(edges[k], edges[rng.Uniform(0, k)]);
  }
  for (const GenEdge& e : edges) {
    v1::Edge* edge = c.request.mutable_graph()->add_edges();
    edge->set_src(position[e.src]);
    edge->set_dst(position[e.dst]);
    edge->set_bytes(e.bytes);
  }
  c.microbatches = static_cast<int32_t>(rng.Uniform(1, sizes.max_microbatches));
  c.max_in_flight = rng.Bernoulli(0.3) ? c.microbatches
                                       : static_cast<int32_t>(rng.Uniform(1, c.microbatches));
  c.window_in_sim_options = rng.Bernoulli(0.2);
  c.window_left_open = c.max_in_flight == c.microbatches && !c.window_in_sim_options &&
                       rng.Bernoulli(0.3);
  return c;
}

// How many random cases exercised each feature, so that a generator that stops producing them (and a
// comparison that could no longer fail on them) shows up.
struct Coverage {
  int64_t cases = 0;
  int64_t once_ops = 0;             // some once op
  int64_t early_once_feeds_copies = 0;  // a class -1 once op feeding a per-microbatch op elsewhere
  int64_t accumulated_transfers = 0;    // a gradient crossing devices
  int64_t all_reduces = 0;
  int64_t all_reduce_waited = 0;    // an all-reduce started after it was ready (ring busy)
  int64_t ring_tie_by_name = 0;     // two waiting all-reduces, same ready time, one ring
  int64_t window_gated = 0;         // an instance started exactly when microbatch m - W completed
  int64_t zero_duration = 0;        // an instance of zero duration
  int64_t two_plus_devices = 0;     // transfers at all

  void Add(const PlanCase& c, const OracleResult& o) {
    ++cases;
    bool once = false, early = false, accumulated = false, waited = false, tie = false, gated = false;
    bool zero = false;
    for (const v1::Op& op : c.request.graph().ops()) once |= op.once_per_step();
    for (const OracleTransfer& t : o.transfers) {
      accumulated |= t.kind == OracleTransfer::Kind::kAccumulated;
      if (t.kind == OracleTransfer::Kind::kOnce) {
        for (const v1::Edge& e : c.request.graph().edges()) {
          early |= e.src() == t.producer && !c.request.graph().ops(e.dst()).once_per_step() &&
                   c.device[e.dst()] == t.to;
        }
      }
    }
    for (const testutil::OracleAllReduce& a : o.all_reduces) {
      waited |= a.start_ns > a.ready_ns;
      for (const testutil::OracleAllReduce& b : o.all_reduces) {
        tie |= &a != &b && a.device == b.device && a.ready_ns == b.ready_ns &&
               a.start_ns > a.ready_ns && a.start_ns < b.start_ns;
      }
    }
    for (const testutil::OracleInstance& i : o.instances) {
      zero |= i.start_ns == i.finish_ns;
      if (!c.request.graph().ops(i.op).once_per_step() && i.microbatch >= c.max_in_flight &&
          i.start_ns > 0 && i.start_ns == o.microbatch_done_ns[i.microbatch - c.max_in_flight]) {
        gated = true;
      }
    }
    once_ops += once;
    early_once_feeds_copies += early;
    accumulated_transfers += accumulated;
    all_reduces += !o.all_reduces.empty();
    all_reduce_waited += waited;
    ring_tie_by_name += tie;
    window_gated += gated;
    zero_duration += zero;
    two_plus_devices += o.transfer_count > 0;
  }
  std::string Text() const {
    return absl::StrCat(cases, " cases: once ops ", once_ops, ", early once op feeding copies elsewhere ",
                        early_once_feeds_copies, ", accumulated transfers ", accumulated_transfers,
                        ", all-reduces ", all_reduces, " (waited ", all_reduce_waited,
                        ", ring tie decided by name ", ring_tie_by_name, "), window gated ",
                        window_gated, ", zero durations ", zero_duration, ", transfers ",
                        two_plus_devices);
  }
};

TEST(SimulatorPlanOracleTest, RandomPlansAgreeWithTheOracle) {
  const int64_t first_seed = EnvInt("PLAN_ORACLE_SEED", 1);
  const int64_t iterations = EnvInt("PLAN_ORACLE_ITERATIONS", 400);
  RandomSizes sizes;
  sizes.max_ops = static_cast<int32_t>(EnvInt("PLAN_ORACLE_MAX_OPS", sizes.max_ops));
  sizes.max_group = static_cast<int32_t>(EnvInt("PLAN_ORACLE_MAX_GROUP", sizes.max_group));
  sizes.max_microbatches =
      static_cast<int32_t>(EnvInt("PLAN_ORACLE_MAX_MICROBATCHES", sizes.max_microbatches));
  int64_t failures = 0;
  Coverage coverage;
  for (int64_t k = 0; k < iterations; ++k) {
    const uint64_t seed = static_cast<uint64_t>(first_seed + k);
    const PlanCase c = RandomPlanCase(seed, sizes);
    OracleResult oracle;
    const std::string diff = Disagreements(c, &oracle);
    if (oracle.error.empty()) coverage.Add(c, oracle);
    if (diff.empty()) continue;
    ++failures;
    if (failures <= 3) ADD_FAILURE() << "seed " << seed << ": " << diff << "\n" << Describe(c);
  }
  EXPECT_EQ(failures, 0) << "of " << iterations << " random cases";
  std::cout << "coverage: " << coverage.Text() << "\n";
  // Each feature in a fair share of the cases (the default 400 cases give several times these).
  const int64_t share = iterations / 40;
  EXPECT_GE(coverage.once_ops, share) << coverage.Text();
  EXPECT_GE(coverage.early_once_feeds_copies, share) << coverage.Text();
  EXPECT_GE(coverage.accumulated_transfers, share) << coverage.Text();
  EXPECT_GE(coverage.all_reduces, share) << coverage.Text();
  EXPECT_GE(coverage.all_reduce_waited, share) << coverage.Text();
  EXPECT_GE(coverage.ring_tie_by_name, share) << coverage.Text();
  EXPECT_GE(coverage.window_gated, share) << coverage.Text();
  EXPECT_GE(coverage.zero_duration, share) << coverage.Text();
  EXPECT_GE(coverage.two_plus_devices, share) << coverage.Text();
}

}  // namespace
}  // namespace placement::engine
