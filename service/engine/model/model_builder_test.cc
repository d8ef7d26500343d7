// Tests for BuildModel: the catalogue of malformed requests (each with its exact field paths), and the
// contents of well-formed models (canonical order, CSR, merged edges, groups, kinds, links, capacity,
// topological order), including invariants on random layered DAGs.
#include "service/engine/model/model_builder.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/engine/model/model_test_util.h"
#include "tests/testutil/random_graph.h"

namespace placement::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

void AddOp(v1::Graph* graph, const std::string& name, int64_t compute_ns, int64_t output_bytes = 0) {
  v1::Op* op = graph->add_ops();
  op->set_name(name);
  op->set_type("MatMul");
  op->set_compute_ns(compute_ns);
  op->set_output_bytes(output_bytes);
}

void AddEdge(v1::Graph* graph, int32_t src, int32_t dst, int64_t bytes) {
  v1::Edge* edge = graph->add_edges();
  edge->set_src(src);
  edge->set_dst(dst);
  edge->set_bytes(bytes);
}

void AddDevice(v1::Cluster* cluster, const std::string& name, const std::string& kind,
               const std::string& node, int64_t memory_bytes) {
  v1::Device* device = cluster->add_devices();
  device->set_name(name);
  device->set_kind(kind);
  device->set_node(node);
  device->set_memory_bytes(memory_bytes);
}

// A small valid request whose op order differs from name order:
//   request order: 0 "c", 1 "a", 2 "d", 3 "b"   -> canonical a=0, b=1, c=2, d=3
//   edges: a->b 7, a->c 8, b->d 9, c->d 10, a->b 3 (parallel: merged into a->b 10)
//   devices: gpu0 (gpu, n0), gpu1 (gpu, n0, speed 2), cpu0 (cpu, n1, speed 0.5);
//   intra {100 B/s, 1 ns}, inter {10 B/s, 5 ns}, override gpu1-cpu0 {50 B/s, 2 ns}.
v1::PlaceRequest SmallRequest() {
  v1::PlaceRequest request;
  v1::Graph* graph = request.mutable_graph();
  AddOp(graph, "c", 100, 10);
  AddOp(graph, "a", 200, 20);
  AddOp(graph, "d", 300, 30);
  AddOp(graph, "b", 400, 40);
  graph->mutable_ops(0)->set_persistent_bytes(5);
  graph->mutable_ops(0)->set_temp_bytes(1);
  AddEdge(graph, 1, 3, 7);
  AddEdge(graph, 1, 0, 8);
  AddEdge(graph, 3, 2, 9);
  AddEdge(graph, 0, 2, 10);
  AddEdge(graph, 1, 3, 3);
  v1::Cluster* cluster = request.mutable_cluster();
  AddDevice(cluster, "gpu0", "gpu", "n0", 1000);
  AddDevice(cluster, "gpu1", "gpu", "n0", 1000);
  cluster->mutable_devices(1)->set_speed(2.0);
  AddDevice(cluster, "cpu0", "cpu", "n1", 5000);
  cluster->mutable_devices(2)->set_speed(0.5);
  cluster->mutable_intra_node()->set_bandwidth_bytes_per_second(100);
  cluster->mutable_intra_node()->set_latency_ns(1);
  cluster->mutable_inter_node()->set_bandwidth_bytes_per_second(10);
  cluster->mutable_inter_node()->set_latency_ns(5);
  v1::Link* link = cluster->add_links();
  link->set_a("gpu1");
  link->set_b("cpu0");
  link->mutable_spec()->set_bandwidth_bytes_per_second(50);
  link->mutable_spec()->set_latency_ns(2);
  return request;
}

std::vector<FieldViolation> ViolationsOf(const v1::PlaceRequest& request,
                                         const ModelLimits& limits = ModelLimits()) {
  std::vector<FieldViolation> violations;
  absl::StatusOr<Model> model = BuildModel(request, &violations, limits);
  EXPECT_FALSE(model.ok());
  if (!model.ok()) {
    EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(model.status().message(), FormatViolations(violations));
  }
  return violations;
}

std::vector<std::string> FieldsOf(const std::vector<FieldViolation>& violations) {
  std::vector<std::string> fields;
  for (const FieldViolation& v : violations) fields.push_back(v.field);
  return fields;
}

// ---------------------------------------------------------------------------------------------------
// The catalogue: one malformed request per entry, with exactly the field paths it must report and a
// fragment of the first description.

struct MalformedCase {
  std::string name;
  std::function<void(v1::PlaceRequest*, ModelLimits*)> mutate;
  std::vector<std::string> fields;
  std::string fragment;
};

std::vector<MalformedCase> Catalogue() {
  using R = v1::PlaceRequest;
  using L = ModelLimits;
  return {
      {"EmptyGraph", [](R* r, L*) { r->mutable_graph()->Clear(); }, {"graph.ops"}, "no ops"},
      {"EmptyOpName", [](R* r, L*) { r->mutable_graph()->mutable_ops(2)->set_name(""); },
       {"graph.ops[2].name"}, "must not be empty"},
      {"DuplicateOpName", [](R* r, L*) { r->mutable_graph()->mutable_ops(3)->set_name("c"); },
       {"graph.ops[3].name"}, "duplicate of graph.ops[0].name \"c\""},
      {"OpNameTooLong",
       [](R* r, L*) { r->mutable_graph()->mutable_ops(1)->set_name(std::string(1025, 'x')); },
       {"graph.ops[1].name"}, "is 1025 bytes long; the limit is 1024"},
      {"OpTypeTooLong",
       [](R* r, L* l) {
         l->max_name_bytes = 8;
         r->mutable_graph()->mutable_ops(1)->set_type("VeryLongTypeName");
       },
       {"graph.ops[1].type"}, "16 bytes long"},
      {"EdgeSrcOutOfRange", [](R* r, L*) { r->mutable_graph()->mutable_edges(2)->set_src(912); },
       {"graph.edges[2].src"}, "index 912 out of range (graph has 4 ops)"},
      {"EdgeDstNegative", [](R* r, L*) { r->mutable_graph()->mutable_edges(1)->set_dst(-1); },
       {"graph.edges[1].dst"}, "index -1 out of range (graph has 4 ops)"},
      {"SelfLoop", [](R* r, L*) { r->mutable_graph()->mutable_edges(0)->set_dst(1); },
       {"graph.edges[0].dst"}, "self-loop: src and dst are both graph.ops[1] (op \"a\")"},
      {"Cycle", [](R* r, L*) { AddEdge(r->mutable_graph(), 2, 1, 0); },  // d -> a
       {"graph.edges"}, "cycle through op \"a\" (graph.ops[1])"},
      {"CycleNotReportedBesideBrokenEdge",
       [](R* r, L*) {
         AddEdge(r->mutable_graph(), 2, 1, 0);
         r->mutable_graph()->mutable_edges(0)->set_src(77);
       },
       {"graph.edges[0].src"}, "index 77 out of range"},
      {"NegativeCompute", [](R* r, L*) { r->mutable_graph()->mutable_ops(0)->set_compute_ns(-1); },
       {"graph.ops[0].compute_ns"}, "must be >= 0 (got -1)"},
      {"AbsurdCompute",
       [](R* r, L*) { r->mutable_graph()->mutable_ops(0)->set_compute_ns(2'000'000'000'000'000); },
       {"graph.ops[0].compute_ns"}, "exceeds the limit of 1000000000000000 ns"},
      {"NegativeOutputBytes",
       [](R* r, L*) { r->mutable_graph()->mutable_ops(1)->set_output_bytes(-5); },
       {"graph.ops[1].output_bytes"}, "must be >= 0"},
      {"AbsurdPersistentBytes",
       [](R* r, L*) { r->mutable_graph()->mutable_ops(2)->set_persistent_bytes(int64_t{1} << 51); },
       {"graph.ops[2].persistent_bytes"}, "exceeds the limit"},
      {"NegativeTempBytes", [](R* r, L*) { r->mutable_graph()->mutable_ops(3)->set_temp_bytes(-1); },
       {"graph.ops[3].temp_bytes"}, "must be >= 0"},
      {"NegativeEdgeBytes", [](R* r, L*) { r->mutable_graph()->mutable_edges(3)->set_bytes(-2); },
       {"graph.edges[3].bytes"}, "must be >= 0 (got -2)"},
      {"NoDevices", [](R* r, L*) { r->mutable_cluster()->clear_devices(); }, {"cluster.devices"},
       "no devices"},
      {"EmptyDeviceName",
       [](R* r, L*) { r->mutable_cluster()->mutable_devices(0)->set_name(""); },
       {"cluster.devices[0].name"}, "must not be empty"},
      {"DuplicateDeviceName",
       [](R* r, L*) { r->mutable_cluster()->mutable_devices(2)->set_name("gpu0"); },
       // The link override now names a device that does not exist.
       {"cluster.devices[2].name", "cluster.links[0].b"}, "duplicate of cluster.devices[0].name"},
      {"ZeroMemory", [](R* r, L*) { r->mutable_cluster()->mutable_devices(1)->set_memory_bytes(0); },
       {"cluster.devices[1].memory_bytes"}, "must be > 0 (got 0)"},
      {"AbsurdMemory",
       [](R* r, L*) { r->mutable_cluster()->mutable_devices(1)->set_memory_bytes(int64_t{1} << 60); },
       {"cluster.devices[1].memory_bytes"}, "exceeds the limit"},
      {"ZeroSpeed", [](R* r, L*) { r->mutable_cluster()->mutable_devices(0)->set_speed(0.0); },
       {"cluster.devices[0].speed"}, "must be > 0"},
      {"NegativeSpeed", [](R* r, L*) { r->mutable_cluster()->mutable_devices(0)->set_speed(-1.0); },
       {"cluster.devices[0].speed"}, "must be > 0"},
      {"NanSpeed",
       [](R* r, L*) {
         r->mutable_cluster()->mutable_devices(1)->set_speed(std::numeric_limits<double>::quiet_NaN());
       },
       {"cluster.devices[1].speed"}, "must be finite"},
      {"InfiniteSpeed",
       [](R* r, L*) {
         r->mutable_cluster()->mutable_devices(2)->set_speed(std::numeric_limits<double>::infinity());
       },
       {"cluster.devices[2].speed"}, "must be finite"},
      {"SpeedOutOfRange", [](R* r, L*) { r->mutable_cluster()->mutable_devices(2)->set_speed(1e7); },
       {"cluster.devices[2].speed"}, "outside [1e-06, 1e+06]"},
      {"IntraNodeBandwidthUsed",
       [](R* r, L*) { r->mutable_cluster()->mutable_intra_node()->set_bandwidth_bytes_per_second(0); },
       {"cluster.intra_node.bandwidth_bytes_per_second"},
       "must be > 0 (got 0): devices \"gpu0\" and \"gpu1\" use it"},
      {"InterNodeBandwidthUsed",
       [](R* r, L*) { r->mutable_cluster()->mutable_inter_node()->set_bandwidth_bytes_per_second(-3); },
       {"cluster.inter_node.bandwidth_bytes_per_second"}, "devices \"gpu0\" and \"cpu0\" use it"},
      {"NegativeIntraNodeLatency",
       [](R* r, L*) { r->mutable_cluster()->mutable_intra_node()->set_latency_ns(-1); },
       {"cluster.intra_node.latency_ns"}, "must be >= 0"},
      {"LinkUnknownDevice", [](R* r, L*) { r->mutable_cluster()->mutable_links(0)->set_a("tpu9"); },
       {"cluster.links[0].a"}, "unknown device \"tpu9\""},
      {"LinkSameDevice", [](R* r, L*) { r->mutable_cluster()->mutable_links(0)->set_b("gpu1"); },
       {"cluster.links[0].b"}, "same device as a (\"gpu1\")"},
      {"LinkDuplicatePair",
       [](R* r, L*) {
         v1::Link* link = r->mutable_cluster()->add_links();
         link->set_a("cpu0");
         link->set_b("gpu1");
         link->mutable_spec()->set_bandwidth_bytes_per_second(1);
       },
       {"cluster.links[1]"}, "duplicate of cluster.links[0] (devices \"cpu0\" and \"gpu1\")"},
      {"LinkZeroBandwidth",
       [](R* r, L*) {
         r->mutable_cluster()->mutable_links(0)->mutable_spec()->set_bandwidth_bytes_per_second(0);
       },
       {"cluster.links[0].spec.bandwidth_bytes_per_second"}, "must be > 0 (got 0)"},
      {"LinkNegativeLatency",
       [](R* r, L*) { r->mutable_cluster()->mutable_links(0)->mutable_spec()->set_latency_ns(-7); },
       {"cluster.links[0].spec.latency_ns"}, "must be >= 0 (got -7)"},
      {"UnknownPinnedDevice",
       [](R* r, L*) { r->mutable_graph()->mutable_ops(3)->set_pinned_device("gpu7"); },
       {"graph.ops[3].pinned_device"}, "unknown device \"gpu7\""},
      {"AllowedKindsNoDeviceHas",
       [](R* r, L*) {
         r->mutable_graph()->mutable_ops(2)->add_allowed_kinds("tpu");
         r->mutable_graph()->mutable_ops(2)->add_allowed_kinds("npu");
       },
       {"graph.ops[2].allowed_kinds"}, "no device has any of the allowed kinds (\"tpu\", \"npu\")"},
      {"PinnedToDisallowedKind",
       [](R* r, L*) {
         r->mutable_graph()->mutable_ops(3)->set_pinned_device("gpu1");
         r->mutable_graph()->mutable_ops(3)->add_allowed_kinds("cpu");
       },
       {"graph.ops[3].pinned_device"}, "pinned to \"gpu1\" of kind \"gpu\", which is not among"},
      {"GroupPinnedToDifferentDevices",
       [](R* r, L*) {
         v1::Graph* g = r->mutable_graph();
         g->mutable_ops(1)->set_colocation_group("grp");  // a, pinned gpu0
         g->mutable_ops(1)->set_pinned_device("gpu0");
         g->mutable_ops(3)->set_colocation_group("grp");  // b, pinned gpu1
         g->mutable_ops(3)->set_pinned_device("gpu1");
       },
       {"graph.ops[3].pinned_device"},
       "colocation group \"grp\": op \"b\" is pinned to \"gpu1\" but op \"a\" (graph.ops[1]) is "
       "pinned to \"gpu0\""},
      {"GroupKindsDisjoint",
       [](R* r, L*) {
         v1::Graph* g = r->mutable_graph();
         g->mutable_ops(1)->set_colocation_group("grp");  // a
         g->mutable_ops(1)->add_allowed_kinds("gpu");
         g->mutable_ops(0)->set_colocation_group("grp");  // c
         g->mutable_ops(0)->add_allowed_kinds("cpu");
       },
       {"graph.ops[0].colocation_group"},
       "no device kind is allowed by both op \"c\" and op \"a\" (graph.ops[1])"},
      {"GroupPinExcludedByMemberKinds",
       [](R* r, L*) {
         v1::Graph* g = r->mutable_graph();
         g->mutable_ops(1)->set_colocation_group("grp");  // a, pinned gpu0
         g->mutable_ops(1)->set_pinned_device("gpu0");
         g->mutable_ops(2)->set_colocation_group("grp");  // d, cpu only
         g->mutable_ops(2)->add_allowed_kinds("cpu");
       },
       {"graph.ops[2].colocation_group"},
       "op \"a\" (graph.ops[1]) is pinned to \"gpu0\" of kind \"gpu\", which op \"d\" does not allow"},
      {"TooManyOps", [](R*, L* l) { l->max_ops = 3; }, {"graph.ops"}, "4 ops exceed the limit of 3"},
      {"TooManyEdges", [](R*, L* l) { l->max_edges = 4; }, {"graph.edges"},
       "5 edges exceed the limit of 4"},
      {"TooManyDevices", [](R*, L* l) { l->max_devices = 2; }, {"cluster.devices"},
       "3 devices exceed the limit of 2"},
      {"TooManyDeviceKinds", [](R*, L* l) { l->max_device_kinds = 1; }, {"cluster.devices"},
       "2 distinct device kinds exceed the limit of 1"},
      {"HeadroomOne", [](R* r, L*) { r->mutable_options()->set_memory_headroom(1.0); },
       {"options.memory_headroom"}, "must be in [0, 1) (got 1)"},
      {"HeadroomNegative", [](R* r, L*) { r->mutable_options()->set_memory_headroom(-0.25); },
       {"options.memory_headroom"}, "got -0.25"},
      {"HeadroomNan",
       [](R* r, L*) {
         r->mutable_options()->set_memory_headroom(std::numeric_limits<double>::quiet_NaN());
       },
       {"options.memory_headroom"}, "must be in [0, 1)"},
      {"NegativeTimeLimit",
       [](R* r, L*) { r->mutable_options()->mutable_time_limit()->set_seconds(-3); },
       {"options.time_limit"}, "must not be negative"},
      {"MalformedTimeLimit",
       [](R* r, L*) {
         r->mutable_options()->mutable_time_limit()->set_seconds(1);
         r->mutable_options()->mutable_time_limit()->set_nanos(-5);
       },
       {"options.time_limit"}, "not a valid Duration"},
      {"MicrobatchesNegative", [](R* r, L*) { r->mutable_options()->set_microbatches(-1); },
       {"options.microbatches"}, "must be >= 0 (got -1)"},
      {"MicrobatchesAboveLimit", [](R* r, L*) { r->mutable_options()->set_microbatches(1025); },
       {"options.microbatches"}, "1025 exceeds the limit of 1024 microbatches"},
      {"WindowAboveMicrobatches",
       [](R* r, L*) {
         r->mutable_options()->set_microbatches(8);
         r->mutable_options()->set_max_in_flight(9);
       },
       {"options.max_in_flight"}, "9 exceeds microbatches 8"},
      {"WindowNegative", [](R* r, L*) { r->mutable_options()->set_max_in_flight(-2); },
       {"options.max_in_flight"}, "must be >= 0 (got -2)"},
      {"DataParallelNotADivisor", [](R* r, L*) { r->mutable_options()->set_data_parallel(2); },
       {"options.data_parallel"}, "2 does not divide 3 devices"},
      {"DataParallelNegative", [](R* r, L*) { r->mutable_options()->set_data_parallel(-1); },
       {"options.data_parallel"}, "must be >= 0 (got -1)"},
      {"TooManyUnrolledOps",
       [](R* r, L* l) {
         r->mutable_options()->set_microbatches(3);
         l->max_unrolled_ops = 10;
       },
       {"options.microbatches"}, "3 microbatches x 4 ops = 12 unrolled ops exceed the limit of 10"},
      {"OnceOpInsideTheMicrobatchFlow",
       [](R* r, L*) { r->mutable_graph()->mutable_ops(3)->set_once_per_step(true); },  // a -> b -> d
       {"graph.ops[3].once_per_step"},
       "op \"b\" runs once per step after per-microbatch op \"a\" and before per-microbatch op \"d\""},
      {"PinnedOutsideReplicaGroupZero",
       [](R* r, L*) {
         r->mutable_options()->set_data_parallel(3);
         r->mutable_graph()->mutable_ops(2)->set_pinned_device("gpu1");
       },
       {"graph.ops[2].pinned_device"},
       "pinned to \"gpu1\", outside replica group 0 (the first 1 of 3 devices with "
       "options.data_parallel 3)"},
      {"KindOutsideReplicaGroupZero",
       [](R* r, L*) {
         r->mutable_options()->set_data_parallel(3);
         r->mutable_graph()->mutable_ops(2)->add_allowed_kinds("cpu");
       },
       {"graph.ops[2].allowed_kinds"}, "no device of replica group 0"},
      {"PreviousPlacementUnknownOp",
       [](R* r, L*) { (*r->mutable_options()->mutable_previous_placement())["x"] = "gpu0"; },
       {"options.previous_placement[\"x\"]"}, "no op named \"x\""},
      {"PreviousPlacementEmptyDevice",
       [](R* r, L*) { (*r->mutable_options()->mutable_previous_placement())["a"] = ""; },
       {"options.previous_placement[\"a\"]"}, "empty device name"},
      {"PreviousPlacementNoDeviceInTheCluster",
       [](R* r, L*) {
         (*r->mutable_options()->mutable_previous_placement())["a"] = "cuda:0";
         (*r->mutable_options()->mutable_previous_placement())["b"] = "cuda:1";
       },
       {"options.previous_placement"},
       "none of the devices it names is in cluster.devices (e.g. \"cuda:0\"): list the devices that left "
       "in options.departed_devices"},
      {"PreviousPlacementDeviceNeitherHereNorDeparted",
       [](R* r, L*) {
         (*r->mutable_options()->mutable_previous_placement())["a"] = "gpu0";
         (*r->mutable_options()->mutable_previous_placement())["b"] = "gpu7";
         r->mutable_options()->add_departed_devices("gpu9");
       },
       {"options.previous_placement[\"b\"]"},
       "device \"gpu7\" is neither in cluster.devices nor in options.departed_devices"},
      {"DepartedDeviceInTheCluster",
       [](R* r, L*) {
         (*r->mutable_options()->mutable_previous_placement())["a"] = "gpu0";
         r->mutable_options()->add_departed_devices("gpu1");
       },
       {"options.departed_devices[0]"},
       "device \"gpu1\" is in cluster.devices: a device that left is not in the cluster"},
      {"DepartedDeviceTwice",
       [](R* r, L*) {
         (*r->mutable_options()->mutable_previous_placement())["a"] = "gpu9";
         r->mutable_options()->add_departed_devices("gpu9");
         r->mutable_options()->add_departed_devices("gpu9");
       },
       {"options.departed_devices[1]"}, "device \"gpu9\" is listed twice"},
      {"DepartedDevicesWithoutPreviousPlacement",
       [](R* r, L*) { r->mutable_options()->add_departed_devices("gpu9"); },
       {"options.departed_devices"}, "given without options.previous_placement"},
      {"MoveWeightNegative", [](R* r, L*) { r->mutable_options()->set_move_weight_ns_per_byte(-1); },
       {"options.move_weight_ns_per_byte"}, "must be finite and >= 0 (got -1)"},
      {"MoveWeightNaN",
       [](R* r, L*) {
         r->mutable_options()->set_move_weight_ns_per_byte(std::numeric_limits<double>::quiet_NaN());
       },
       {"options.move_weight_ns_per_byte"}, "must be finite and >= 0 (got nan)"},
      {"MoveWeightInfinite",
       [](R* r, L*) {
         r->mutable_options()->set_move_weight_ns_per_byte(std::numeric_limits<double>::infinity());
       },
       {"options.move_weight_ns_per_byte"}, "must be finite and >= 0 (got inf)"},
      {"TotalWorkOverflows", [](R*, L* l) { l->max_total_time_ns = 1000; }, {"graph"},
       "the step's work"},
      {"TotalBytesOverflow", [](R*, L* l) { l->max_total_bytes = 100; }, {"graph"},
       "the step's bytes"},
  };
}

class MalformedRequestTest : public ::testing::TestWithParam<MalformedCase> {};

TEST_P(MalformedRequestTest, ReportsExactlyTheExpectedFields) {
  const MalformedCase& c = GetParam();
  v1::PlaceRequest request = SmallRequest();
  ModelLimits limits;
  c.mutate(&request, &limits);
  const std::vector<FieldViolation> violations = ViolationsOf(request, limits);
  EXPECT_EQ(FieldsOf(violations), c.fields) << FormatViolations(violations);
  ASSERT_FALSE(violations.empty());
  EXPECT_THAT(violations[0].description, HasSubstr(c.fragment));
}

INSTANTIATE_TEST_SUITE_P(Catalogue, MalformedRequestTest, ::testing::ValuesIn(Catalogue()),
                         [](const ::testing::TestParamInfo<MalformedCase>& info) {
                           return info.param.name;
                         });

TEST(ModelBuilderTest, CatalogueIsLargeAndEveryBaseRequestIsValid) {
  EXPECT_GE(Catalogue().size(), 25u);
  std::vector<FieldViolation> violations;
  EXPECT_TRUE(BuildModel(SmallRequest(), &violations).ok()) << FormatViolations(violations);
  EXPECT_TRUE(violations.empty());
}

TEST(ModelBuilderTest, ReportsEveryProblemAtOnce) {
  v1::PlaceRequest request = SmallRequest();
  request.mutable_graph()->mutable_ops(2)->set_name("");
  request.mutable_graph()->mutable_ops(0)->set_compute_ns(-1);
  request.mutable_graph()->mutable_edges(2)->set_dst(912);
  request.mutable_graph()->mutable_edges(4)->set_bytes(-1);
  request.mutable_cluster()->mutable_devices(1)->set_speed(0.0);
  request.mutable_cluster()->mutable_links(0)->set_b("nope");
  request.mutable_options()->set_memory_headroom(2.0);
  const std::vector<FieldViolation> violations = ViolationsOf(request);
  EXPECT_THAT(FieldsOf(violations),
              ElementsAre("graph.ops[0].compute_ns", "graph.ops[2].name", "graph.edges[2].dst",
                          "graph.edges[4].bytes", "cluster.devices[1].speed", "cluster.links[0].b",
                          "options.memory_headroom"));
  absl::StatusOr<Model> model = BuildModel(request);
  EXPECT_THAT(model.status().message(),
              HasSubstr("graph.edges[2].dst: index 912 out of range (graph has 4 ops)\n"));
}

TEST(ModelBuilderTest, TwoEmptyNamesAreNotDuplicatesOfEachOther) {
  v1::PlaceRequest request = SmallRequest();
  request.mutable_graph()->mutable_ops(0)->set_name("");
  request.mutable_graph()->mutable_ops(3)->set_name("");
  EXPECT_THAT(FieldsOf(ViolationsOf(request)), ElementsAre("graph.ops[0].name", "graph.ops[3].name"));
}

TEST(ModelBuilderTest, DuplicatesPointAtTheFirstOccurrence) {
  v1::PlaceRequest request = SmallRequest();
  request.mutable_graph()->mutable_ops(2)->set_name("a");  // "a" is graph.ops[1]
  request.mutable_graph()->mutable_ops(3)->set_name("a");
  const std::vector<FieldViolation> violations = ViolationsOf(request);
  ASSERT_THAT(violations, SizeIs(2));
  EXPECT_EQ(violations[0].field, "graph.ops[2].name");
  EXPECT_EQ(violations[0].description, "duplicate of graph.ops[1].name \"a\"");
  EXPECT_EQ(violations[1].field, "graph.ops[3].name");
  EXPECT_EQ(violations[1].description, "duplicate of graph.ops[1].name \"a\"");
}

TEST(ModelBuilderTest, CycleNamesItsOpsInEdgeDirection) {
  v1::PlaceRequest request;
  v1::Graph* graph = request.mutable_graph();
  for (const char* name : {"start", "x", "y", "z", "end"}) AddOp(graph, name, 1);
  AddEdge(graph, 0, 1, 0);  // start -> x
  AddEdge(graph, 1, 2, 0);  // x -> y
  AddEdge(graph, 2, 3, 0);  // y -> z
  AddEdge(graph, 3, 1, 0);  // z -> x
  AddEdge(graph, 3, 4, 0);  // z -> end
  AddDevice(request.mutable_cluster(), "gpu0", "gpu", "n0", 10);
  const std::vector<FieldViolation> violations = ViolationsOf(request);
  ASSERT_THAT(violations, SizeIs(1));
  EXPECT_EQ(violations[0].field, "graph.edges");
  EXPECT_EQ(violations[0].description,
            "cycle through op \"x\" (graph.ops[1]): \"x\" -> \"y\" -> \"z\" -> \"x\"");
}

TEST(ModelBuilderTest, StopsScanningAListAfterTheCap) {
  v1::PlaceRequest request = SmallRequest();
  for (int i = 0; i < 300; ++i) AddEdge(request.mutable_graph(), 1000 + i, 0, 0);
  for (int i = 0; i < 3; ++i) request.mutable_graph()->mutable_ops(i)->set_compute_ns(-1);
  const std::vector<FieldViolation> violations = ViolationsOf(request);
  // 3 op problems, then 100 edge problems and the note that says checking stopped.
  ASSERT_THAT(violations, SizeIs(3 + 100 + 1));
  EXPECT_EQ(violations[3].field, "graph.edges[5].src");
  EXPECT_EQ(violations[102].field, "graph.edges[104].src");
  EXPECT_EQ(violations.back().field, "graph.edges");
  EXPECT_EQ(violations.back().description, "more than 100 problems; stopped checking graph.edges");
}

// Unknown ops in a previous placement are reported in byte order of their names (the map has no order
// of its own), bounded like every list; a device that is not in the cluster is one that left.
TEST(ModelBuilderTest, PreviousPlacementEntries) {
  v1::PlaceRequest request = SmallRequest();
  auto& previous = *request.mutable_options()->mutable_previous_placement();
  previous["zz"] = "gpu0";
  previous["a"] = "gpu1";
  previous["b"] = "retired-gpu";
  previous["mm"] = "gpu0";
  EXPECT_THAT(FieldsOf(ViolationsOf(request)),
              ElementsAre("options.previous_placement[\"mm\"]", "options.previous_placement[\"zz\"]"));
  previous.erase("zz");
  previous.erase("mm");
  request.mutable_options()->set_move_weight_ns_per_byte(0.25);
  absl::StatusOr<Model> model = BuildModel(request);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE(model->has_previous_placement());
  EXPECT_EQ(model->move_weight_ns_per_byte, 0.25);
  EXPECT_EQ(model->previous_device[OpNamed(*model, "a")], DeviceNamed(*model, "gpu1"));
  EXPECT_EQ(model->previous_device[OpNamed(*model, "b")], kDepartedDevice);
  EXPECT_EQ(model->previous_device[OpNamed(*model, "c")], kNone);

  v1::PlaceRequest many = SmallRequest();
  for (int i = 0; i < 300; ++i) {
    (*many.mutable_options()->mutable_previous_placement())[absl::StrCat("missing", 1000 + i)] = "gpu0";
  }
  const std::vector<FieldViolation> violations = ViolationsOf(many);
  ASSERT_THAT(violations, SizeIs(100 + 1));
  EXPECT_EQ(violations.front().field, "options.previous_placement[\"missing1000\"]");
  EXPECT_EQ(violations.back().field, "options.previous_placement");
  // Every device of the previous placement gone: accepted when the caller lists them as departed.
  v1::PlaceRequest moved = SmallRequest();
  (*moved.mutable_options()->mutable_previous_placement())["a"] = "old0";
  (*moved.mutable_options()->mutable_previous_placement())["b"] = "old1";
  EXPECT_THAT(FieldsOf(ViolationsOf(moved)), ElementsAre("options.previous_placement"));
  moved.mutable_options()->add_departed_devices("old1");
  moved.mutable_options()->add_departed_devices("old0");
  absl::StatusOr<Model> all_departed = BuildModel(moved);
  ASSERT_TRUE(all_departed.ok()) << all_departed.status();
  EXPECT_EQ(all_departed->previous_device[OpNamed(*all_departed, "a")], kDepartedDevice);
  EXPECT_EQ(all_departed->previous_device[OpNamed(*all_departed, "b")], kDepartedDevice);
  // The list only checks names: the model (and so the digest) is the one without it.
  v1::PlaceRequest listed = request;
  listed.mutable_options()->add_departed_devices("retired-gpu");
  absl::StatusOr<Model> listed_model = BuildModel(listed);
  ASSERT_TRUE(listed_model.ok()) << listed_model.status();
  EXPECT_EQ(listed_model->previous_device, model->previous_device);
  // Without one, the model carries none.
  absl::StatusOr<Model> plain = BuildModel(SmallRequest());
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->has_previous_placement());
}

TEST(ModelBuilderTest, CapIsConfigurable) {
  v1::PlaceRequest request = SmallRequest();
  for (int i = 0; i < 4; ++i) request.mutable_graph()->mutable_ops(i)->set_temp_bytes(-1);
  ModelLimits limits;
  limits.max_violations_per_list = 2;
  EXPECT_THAT(FieldsOf(ViolationsOf(request, limits)),
              ElementsAre("graph.ops[0].temp_bytes", "graph.ops[1].temp_bytes", "graph.ops"));
}

TEST(ModelBuilderTest, HostileNamesAreEscapedAndShortenedInMessages) {
  v1::PlaceRequest request = SmallRequest();
  request.mutable_graph()->mutable_ops(3)->set_pinned_device(std::string("\n\"x") + std::string(500, 'y'));
  const std::vector<FieldViolation> violations = ViolationsOf(request);
  ASSERT_THAT(violations, SizeIs(1));
  EXPECT_THAT(violations[0].description, HasSubstr("unknown device \"\\n\\\"xyyy"));
  EXPECT_THAT(violations[0].description, HasSubstr("...\""));
  EXPECT_LT(violations[0].description.size(), 120u);
}

TEST(ModelBuilderTest, GraphAndClusterOverloadChecksHeadroom) {
  const v1::PlaceRequest request = SmallRequest();
  std::vector<FieldViolation> violations;
  EXPECT_FALSE(BuildModel(request.graph(), request.cluster(), 1.5, &violations).ok());
  EXPECT_THAT(FieldsOf(violations), ElementsAre("options.memory_headroom"));
  EXPECT_TRUE(BuildModel(request.graph(), request.cluster(), 0.5, &violations).ok());
  EXPECT_TRUE(violations.empty());
}

TEST(ModelBuilderTest, FormatViolationsOnePerLine) {
  EXPECT_EQ(FormatViolations({{"graph.ops", "the graph has no ops"}, {"options.time_limit", "bad"}}),
            "graph.ops: the graph has no ops\noptions.time_limit: bad");
  EXPECT_EQ(FormatViolations({}), "");
}

// ---------------------------------------------------------------------------------------------------
// Well-formed models.

// Training plans (api.md §2.1): the plan as requested, data_parallel unset = 1 and an explicit 0 kept
// (the solver chooses), once ops that open or close the step are fine.
TEST(ModelBuilderTest, PlanFieldsAndOnceOps) {
  v1::PlaceRequest request = SmallRequest();
  absl::StatusOr<Model> model = BuildModel(request);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_TRUE(model->plan == TrainingPlan());
  EXPECT_TRUE(model->IsPlainStep());
  EXPECT_FALSE(model->has_once_ops);
  EXPECT_EQ(model->cluster_devices, 3);

  request.mutable_options()->set_microbatches(0);  // 0 = one
  model = BuildModel(request);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->plan.microbatches, 1);

  request.mutable_options()->set_microbatches(16);
  request.mutable_options()->set_max_in_flight(4);
  request.mutable_options()->set_data_parallel(0);
  request.mutable_graph()->mutable_ops(1)->set_once_per_step(true);  // a: a source, before the microbatches
  request.mutable_graph()->mutable_ops(2)->set_once_per_step(true);  // d: the sink, after them
  model = BuildModel(request);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->plan.microbatches, 16);
  EXPECT_EQ(model->plan.max_in_flight, 4);
  EXPECT_EQ(model->plan.data_parallel, 0);
  EXPECT_TRUE(model->has_once_ops);
  EXPECT_TRUE(model->is_once(0));   // a
  EXPECT_FALSE(model->is_once(1));  // b
  EXPECT_TRUE(model->is_once(3));   // d
  EXPECT_FALSE(model->IsPlainStep());
}

TEST(ModelBuilderTest, CanonicalOrderAndAttributes) {
  absl::StatusOr<Model> model = BuildModel(SmallRequest());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_THAT(model->op_name, ElementsAre("a", "b", "c", "d"));
  EXPECT_THAT(model->request_index, ElementsAre(1, 3, 0, 2));
  EXPECT_THAT(model->op_of_request_index, ElementsAre(2, 0, 3, 1));
  EXPECT_THAT(model->compute_ns, ElementsAre(200, 400, 100, 300));
  EXPECT_THAT(model->output_bytes, ElementsAre(20, 40, 10, 30));
  EXPECT_THAT(model->persistent_bytes, ElementsAre(0, 0, 5, 0));
  EXPECT_THAT(model->temp_bytes, ElementsAre(0, 0, 1, 0));
  EXPECT_THAT(model->op_type, ElementsAre("MatMul", "MatMul", "MatMul", "MatMul"));
  EXPECT_THAT(model->colocation_group, ElementsAre(kNone, kNone, kNone, kNone));
  EXPECT_THAT(model->pinned_device, ElementsAre(kNone, kNone, kNone, kNone));
  EXPECT_THAT(model->allowed_kind_mask, ElementsAre(0, 0, 0, 0));
  EXPECT_EQ(model->num_groups(), 0);
  EXPECT_THAT(model->group_offset, ElementsAre(0));
}

TEST(ModelBuilderTest, CsrMergesParallelEdgesAndSortsNeighbours) {
  absl::StatusOr<Model> model = BuildModel(SmallRequest());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->request_edge_count, 5);
  EXPECT_EQ(model->num_edges(), 4);
  // a -> {b: 7 + 3, c: 8}, b -> {d: 9}, c -> {d: 10}.
  EXPECT_THAT(model->out_offset, ElementsAre(0, 2, 3, 4, 4));
  EXPECT_THAT(model->out_dst, ElementsAre(1, 2, 3, 3));
  EXPECT_THAT(model->out_bytes, ElementsAre(10, 8, 9, 10));
  EXPECT_THAT(model->in_offset, ElementsAre(0, 0, 1, 2, 4));
  EXPECT_THAT(model->in_src, ElementsAre(0, 0, 1, 2));
  EXPECT_THAT(model->in_bytes, ElementsAre(10, 8, 9, 10));
  EXPECT_THAT(model->topo_order, ElementsAre(0, 1, 2, 3));
}

TEST(ModelBuilderTest, TopologicalOrderBreaksTiesBySmallerId) {
  v1::PlaceRequest request = SmallRequest();
  v1::Graph* graph = request.mutable_graph();
  graph->Clear();
  for (const char* name : {"e", "d", "c", "b", "a"}) AddOp(graph, name, 1);
  AddEdge(graph, 2, 4, 0);  // c -> a
  AddEdge(graph, 0, 3, 0);  // e -> b
  absl::StatusOr<Model> model = BuildModel(request);
  ASSERT_TRUE(model.ok()) << model.status();
  // Ready at first: c, d, e. c releases a, which is smaller than d.
  EXPECT_THAT(model->topo_order, ElementsAre(2, 0, 3, 4, 1));
}

TEST(ModelBuilderTest, DevicesKindsNodesAndSpeeds) {
  absl::StatusOr<Model> model = BuildModel(SmallRequest());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_THAT(model->device_name, ElementsAre("gpu0", "gpu1", "cpu0"));
  EXPECT_THAT(model->kind_name, ElementsAre("gpu", "cpu"));
  EXPECT_THAT(model->device_kind, ElementsAre(0, 0, 1));
  EXPECT_THAT(model->node_name, ElementsAre("n0", "n1"));
  EXPECT_THAT(model->device_node, ElementsAre(0, 0, 1));
  EXPECT_THAT(model->speed, ElementsAre(1.0, 2.0, 0.5));
  EXPECT_THAT(model->memory_bytes, ElementsAre(1000, 1000, 5000));
  EXPECT_THAT(model->capacity_bytes, ElementsAre(1000, 1000, 5000));
}

TEST(ModelBuilderTest, LinkMatrixUsesNodesAndSymmetricOverrides) {
  absl::StatusOr<Model> model = BuildModel(SmallRequest());
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ(model->link.size(), 9u);
  auto link = [&](DeviceId a, DeviceId b) {
    const LinkCost& l = model->Link(a, b);
    return std::make_pair(l.bandwidth_bytes_per_second, l.latency_ns);
  };
  EXPECT_EQ(link(0, 1), std::make_pair(int64_t{100}, int64_t{1}));  // same node
  EXPECT_EQ(link(1, 0), std::make_pair(int64_t{100}, int64_t{1}));
  EXPECT_EQ(link(0, 2), std::make_pair(int64_t{10}, int64_t{5}));  // different nodes
  EXPECT_EQ(link(2, 0), std::make_pair(int64_t{10}, int64_t{5}));
  EXPECT_EQ(link(1, 2), std::make_pair(int64_t{50}, int64_t{2}));  // override gpu1-cpu0
  EXPECT_EQ(link(2, 1), std::make_pair(int64_t{50}, int64_t{2}));
  // 25 bytes from gpu1 to cpu0: 2 ns + round(25 * 1e9 / 50) ns.
  EXPECT_EQ(model->TransferNs(1, 2, 25), 2 + 500'000'000);
  EXPECT_EQ(model->TransferNs(1, 1, 25), 0);
}

TEST(ModelBuilderTest, UnusedDefaultLinksNeedNoBandwidth) {
  // One device: no link at all.
  v1::PlaceRequest single = SmallRequest();
  single.mutable_cluster()->Clear();
  AddDevice(single.mutable_cluster(), "gpu0", "gpu", "n0", 100);
  EXPECT_TRUE(BuildModel(single).ok());

  // All devices on one node: inter_node is never used.
  v1::PlaceRequest one_node = SmallRequest();
  one_node.mutable_cluster()->mutable_devices(2)->set_node("n0");
  one_node.mutable_cluster()->clear_inter_node();
  std::vector<FieldViolation> violations;
  EXPECT_TRUE(BuildModel(one_node, &violations).ok()) << FormatViolations(violations);

  // Every cross-node pair overridden: inter_node is not used either.
  v1::PlaceRequest overridden = SmallRequest();
  overridden.mutable_cluster()->clear_inter_node();
  v1::Link* link = overridden.mutable_cluster()->add_links();
  link->set_a("cpu0");
  link->set_b("gpu0");
  link->mutable_spec()->set_bandwidth_bytes_per_second(7);
  EXPECT_TRUE(BuildModel(overridden, &violations).ok()) << FormatViolations(violations);
}

TEST(ModelBuilderTest, CapacityHonoursHeadroomExactly) {
  v1::PlaceRequest request = SmallRequest();
  v1::Cluster* cluster = request.mutable_cluster();
  cluster->mutable_devices(0)->set_memory_bytes(1000);
  cluster->mutable_devices(1)->set_memory_bytes(999);
  cluster->mutable_devices(2)->set_memory_bytes(int64_t{1} << 50);
  request.mutable_options()->set_memory_headroom(0.1);
  absl::StatusOr<Model> model = BuildModel(request);
  ASSERT_TRUE(model.ok()) << model.status();
  // 1000 * 0.9 is 900 (not 899 from the binary 0.1); 999 * 0.9 = 899.1 -> 899.
  EXPECT_THAT(model->capacity_bytes,
              ElementsAre(900, 899, static_cast<int64_t>((int64_t{1} << 50) * 0.9L)));
  EXPECT_EQ(model->memory_headroom, 0.1);

  request.mutable_options()->set_memory_headroom(0.5);
  cluster->mutable_devices(1)->set_memory_bytes(999);
  model = BuildModel(request);
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(model->capacity_bytes[1], 499);  // floor(499.5)
  EXPECT_EQ(model->capacity_bytes[2], int64_t{1} << 49);

  request.mutable_options()->set_memory_headroom(0.0);
  cluster->mutable_devices(1)->set_memory_bytes(std::numeric_limits<int64_t>::max() >> 14);
  model = BuildModel(request);
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(model->capacity_bytes[1], std::numeric_limits<int64_t>::max() >> 14);

  request.mutable_options()->set_memory_headroom(0.999999);
  model = BuildModel(request);
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(model->capacity_bytes[0], 0);  // 1000 * 1e-6 = 0.001
}

TEST(ModelBuilderTest, NegativeZeroHeadroomIsStoredAsZero) {
  v1::PlaceRequest request = SmallRequest();
  request.mutable_options()->set_memory_headroom(-0.0);
  absl::StatusOr<Model> model = BuildModel(request);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_FALSE(std::signbit(model->memory_headroom));
}

TEST(ModelBuilderTest, GroupsPinsAndKinds) {
  v1::PlaceRequest request = SmallRequest();
  v1::Graph* graph = request.mutable_graph();
  graph->mutable_ops(0)->set_colocation_group("zeta");   // c
  graph->mutable_ops(1)->set_colocation_group("zeta");   // a
  graph->mutable_ops(3)->set_colocation_group("alpha");  // b
  graph->mutable_ops(3)->set_pinned_device("gpu1");
  graph->mutable_ops(2)->add_allowed_kinds("cpu");  // d
  graph->mutable_ops(2)->add_allowed_kinds("tpu");  // no such device: ignored
  graph->mutable_ops(0)->add_allowed_kinds("gpu");
  graph->mutable_ops(0)->add_allowed_kinds("cpu");
  absl::StatusOr<Model> model = BuildModel(request);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_THAT(model->group_name, ElementsAre("alpha", "zeta"));
  EXPECT_THAT(model->group_offset, ElementsAre(0, 1, 3));
  EXPECT_THAT(model->group_member, ElementsAre(1, 0, 2));
  EXPECT_THAT(model->colocation_group, ElementsAre(1, 0, 1, kNone));
  EXPECT_THAT(model->pinned_device, ElementsAre(kNone, 1, kNone, kNone));
  EXPECT_THAT(model->allowed_kind_mask, ElementsAre(0, 0, 0b11, 0b10));
  EXPECT_TRUE(model->Allowed(3, 2));
  EXPECT_FALSE(model->Allowed(3, 0));
  EXPECT_TRUE(model->Allowed(1, 1));
  EXPECT_FALSE(model->Allowed(1, 0));
}

TEST(ModelBuilderTest, ConsistentGroupConstraintsAreAccepted) {
  v1::PlaceRequest request = SmallRequest();
  v1::Graph* graph = request.mutable_graph();
  for (int i = 0; i < 4; ++i) graph->mutable_ops(i)->set_colocation_group("all");
  graph->mutable_ops(0)->set_pinned_device("gpu1");
  graph->mutable_ops(2)->set_pinned_device("gpu1");
  graph->mutable_ops(1)->add_allowed_kinds("gpu");
  graph->mutable_ops(3)->add_allowed_kinds("cpu");
  graph->mutable_ops(3)->add_allowed_kinds("gpu");
  std::vector<FieldViolation> violations;
  EXPECT_TRUE(BuildModel(request, &violations).ok()) << FormatViolations(violations);
}

TEST(ModelBuilderTest, NameOrderIsByteOrder) {
  v1::PlaceRequest request = SmallRequest();
  v1::Graph* graph = request.mutable_graph();
  graph->clear_edges();
  // Bytes >= 0x80 sort after ASCII; a prefix sorts before its extensions; NUL bytes count.
  graph->mutable_ops(0)->set_name("abcdefgh\xc3\xa9");
  graph->mutable_ops(1)->set_name("abcdefgh");
  graph->mutable_ops(2)->set_name(std::string("abcdefgh\0", 9));
  graph->mutable_ops(3)->set_name("Zebra");
  absl::StatusOr<Model> model = BuildModel(request);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_THAT(model->request_index, ElementsAre(3, 1, 2, 0));
}

// ---------------------------------------------------------------------------------------------------
// Invariants on random layered DAGs (with constraints, overrides and parallel edges).

// The topological order with ties by smaller id, computed the slow, obvious way.
std::vector<OpId> ReferenceTopoOrder(const Model& model) {
  const int32_t n = model.num_ops();
  std::vector<int32_t> pending(n);
  for (OpId v = 0; v < n; ++v) pending[v] = static_cast<int32_t>(model.in_end(v) - model.in_begin(v));
  std::set<OpId> ready;
  for (OpId v = 0; v < n; ++v) {
    if (pending[v] == 0) ready.insert(v);
  }
  std::vector<OpId> order;
  while (!ready.empty()) {
    const OpId v = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(v);
    for (EdgeId e = model.out_begin(v); e < model.out_end(v); ++e) {
      if (--pending[model.out_dst[e]] == 0) ready.insert(model.out_dst[e]);
    }
  }
  return order;
}

// Names that defeat the 8-byte prefix: long shared prefixes (groups larger than the small-group cutoff
// go block by block), embedded and trailing NUL bytes, names ending exactly at a block boundary.
std::vector<std::string> HardNames() {
  std::vector<std::string> names;
  const std::string stem = "transformer/encoder/layer_";
  for (int i = 0; i < 300; ++i) {
    std::string name = stem + std::to_string(i % 60) + "/attention/";
    name += std::string(1 + i % 5, static_cast<char>('a' + (i * 7) % 26));
    if (i % 11 == 0) name.push_back('\0');
    if (i % 13 == 0) name += std::string(2, '\0');
    names.push_back(name);
  }
  for (int i = 0; i < 40; ++i) names.push_back(std::string(8 + i % 3, 'k') + std::string(i / 3, '\0'));
  // More than 64 shared bytes: finished by plain comparison.
  const std::string long_stem(80, 'q');
  for (int i = 0; i < 50; ++i) {
    names.push_back(long_stem + std::to_string(i * 37 % 50) + std::string(i % 3, '\0'));
  }
  names.push_back("");
  names.push_back(std::string(16, 'z'));
  names.push_back(std::string(17, 'z'));
  names.push_back(std::string(15, 'z'));
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  names.erase(names.begin());  // the empty one
  return names;
}

TEST(ModelBuilderTest, HardNamesSortInByteOrder) {
  std::vector<std::string> names = HardNames();
  ASSERT_GT(names.size(), 200u);
  // Shuffle deterministically into request order.
  testutil::Rng rng(3);
  for (size_t i = names.size() - 1; i > 0; --i) std::swap(names[i], names[rng.Uniform(0, i)]);
  v1::PlaceRequest request = SmallRequest();
  request.mutable_graph()->Clear();
  for (const std::string& name : names) AddOp(request.mutable_graph(), name, 1);
  std::vector<FieldViolation> violations;
  absl::StatusOr<Model> model = BuildModel(request, &violations);
  ASSERT_TRUE(model.ok()) << FormatViolations(violations);
  std::vector<std::string> sorted = names;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(model->op_name, sorted);
  for (OpId v = 0; v < model->num_ops(); ++v) EXPECT_EQ(names[model->request_index[v]], sorted[v]);
}

TEST(ModelBuilderTest, DuplicatesAmongHardNamesAreAllFound) {
  const std::vector<std::string> names = HardNames();
  v1::PlaceRequest request = SmallRequest();
  request.mutable_graph()->Clear();
  for (const std::string& name : names) AddOp(request.mutable_graph(), name, 1);
  // Repeat every 10th name (ops keep their indices; the copies go at the end, in reverse order).
  std::vector<std::string> expected;
  int32_t next = static_cast<int32_t>(names.size());
  for (int32_t i = static_cast<int32_t>(names.size()) - 1; i >= 0; i -= 10) {
    AddOp(request.mutable_graph(), names[i], 1);
    expected.push_back(absl::StrCat("graph.ops[", next, "].name: duplicate of graph.ops[", i, "].name"));
    ++next;
  }
  const std::vector<FieldViolation> violations = ViolationsOf(request);
  ASSERT_EQ(violations.size(), expected.size());
  for (size_t k = 0; k < expected.size(); ++k) {
    EXPECT_EQ(absl::StrCat(violations[k].field, ": ", violations[k].description)
                  .substr(0, expected[k].size()),
              expected[k]);
  }
}

TEST(ModelBuilderTest, TopologicalOrderOfALargeGraphMatchesTheReference) {
  testutil::RandomGraphOptions options;
  options.num_ops = 20000;  // three levels of the ready-set bit tree
  options.avg_out_degree = 2.5;
  options.max_layer_skip = 5;
  options.seed = 11;
  absl::StatusOr<Model> model = BuildModel(testutil::RandomLayeredRequest(options));
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->topo_order, ReferenceTopoOrder(*model));
}

TEST(ModelBuilderTest, RandomLayeredGraphsSatisfyModelInvariants) {
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    SCOPED_TRACE(seed);
    testutil::RandomGraphOptions options;
    options.num_ops = 50 + static_cast<int32_t>(seed) * 37;
    options.avg_out_degree = 1.0 + static_cast<double>(seed % 4);
    options.parallel_edge_fraction = 0.1;
    options.control_edge_fraction = 0.1;
    options.num_devices = 6;
    options.num_nodes = 2;
    options.device_kinds = {"gpu", "gpu", "cpu"};
    options.heterogeneous_speeds = true;
    options.num_link_overrides = 3;
    options.colocation_fraction = 0.3;
    options.pinned_fraction = 0.2;
    options.kind_restricted_fraction = 0.3;
    options.memory_headroom = 0.1;
    options.seed = seed;
    const v1::PlaceRequest request = testutil::RandomLayeredRequest(options);
    std::vector<FieldViolation> violations;
    absl::StatusOr<Model> model = BuildModel(request, &violations);
    ASSERT_TRUE(model.ok()) << FormatViolations(violations);
    const v1::Graph& graph = request.graph();
    const int32_t n = model->num_ops();
    ASSERT_EQ(n, graph.ops_size());

    // Canonical ids: strictly increasing names, inverse index maps.
    for (OpId v = 0; v < n; ++v) {
      EXPECT_EQ(model->op_name[v], graph.ops(model->request_index[v]).name());
      EXPECT_EQ(model->op_of_request_index[model->request_index[v]], v);
      if (v > 0) {
        EXPECT_LT(model->op_name[v - 1], model->op_name[v]);
      }
    }
    // Merged edges: one entry per (src, dst) with the summed bytes of the request's edges.
    std::map<std::pair<OpId, OpId>, int64_t> expected;
    for (const v1::Edge& e : graph.edges()) {
      expected[{model->op_of_request_index[e.src()], model->op_of_request_index[e.dst()]}] += e.bytes();
    }
    std::map<std::pair<OpId, OpId>, int64_t> forward;
    std::map<std::pair<OpId, OpId>, int64_t> reverse;
    for (OpId v = 0; v < n; ++v) {
      for (EdgeId e = model->out_begin(v); e < model->out_end(v); ++e) {
        if (e > model->out_begin(v)) {
          EXPECT_LT(model->out_dst[e - 1], model->out_dst[e]);
        }
        forward[{v, model->out_dst[e]}] = model->out_bytes[e];
      }
      for (EdgeId e = model->in_begin(v); e < model->in_end(v); ++e) {
        if (e > model->in_begin(v)) {
          EXPECT_LT(model->in_src[e - 1], model->in_src[e]);
        }
        reverse[{model->in_src[e], v}] = model->in_bytes[e];
      }
    }
    EXPECT_EQ(forward, expected);
    EXPECT_EQ(reverse, expected);
    EXPECT_EQ(model->request_edge_count, graph.edges_size());
    EXPECT_LT(model->num_edges(), graph.edges_size());  // some parallel edges were merged
    EXPECT_EQ(model->topo_order, ReferenceTopoOrder(*model));
    EXPECT_EQ(static_cast<int32_t>(model->topo_order.size()), n);

    // Groups, pins, kinds agree with the request.
    for (OpId v = 0; v < n; ++v) {
      const v1::Op& op = graph.ops(model->request_index[v]);
      const int32_t g = model->colocation_group[v];
      EXPECT_EQ(g == kNone ? std::string() : model->group_name[g], op.colocation_group());
      const DeviceId pin = model->pinned_device[v];
      EXPECT_EQ(pin == kNone ? std::string() : model->device_name[pin], op.pinned_device());
      std::set<std::string> allowed(op.allowed_kinds().begin(), op.allowed_kinds().end());
      std::set<std::string> from_mask;
      for (size_t k = 0; k < model->kind_name.size(); ++k) {
        if ((model->allowed_kind_mask[v] >> k) & 1) from_mask.insert(model->kind_name[k]);
      }
      EXPECT_EQ(from_mask, allowed);
    }
    for (int32_t g = 0; g < model->num_groups(); ++g) {
      if (g > 0) {
        EXPECT_LT(model->group_name[g - 1], model->group_name[g]);
      }
      for (int32_t k = model->group_offset[g]; k < model->group_offset[g + 1]; ++k) {
        EXPECT_EQ(model->colocation_group[model->group_member[k]], g);
        if (k > model->group_offset[g]) {
          EXPECT_LT(model->group_member[k - 1], model->group_member[k]);
        }
      }
    }
    EXPECT_GT(model->num_groups(), 0);
    EXPECT_EQ(model->group_offset.back(), static_cast<int32_t>(model->group_member.size()));
  }
}

TEST(ModelBuilderTest, ShuffledRequestGivesTheSameCanonicalModel) {
  testutil::RandomGraphOptions options;
  options.num_ops = 500;
  options.avg_out_degree = 3;
  options.colocation_fraction = 0.2;
  options.pinned_fraction = 0.1;
  options.num_link_overrides = 2;
  const v1::PlaceRequest request = testutil::RandomLayeredRequest(options);
  const v1::PlaceRequest shuffled = testutil::ShuffleRequest(request, 99);
  absl::StatusOr<Model> a = BuildModel(request);
  absl::StatusOr<Model> b = BuildModel(shuffled);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->op_name, b->op_name);
  EXPECT_EQ(a->compute_ns, b->compute_ns);
  EXPECT_EQ(a->out_offset, b->out_offset);
  EXPECT_EQ(a->out_dst, b->out_dst);
  EXPECT_EQ(a->out_bytes, b->out_bytes);
  EXPECT_EQ(a->in_src, b->in_src);
  EXPECT_EQ(a->topo_order, b->topo_order);
  EXPECT_EQ(a->group_member, b->group_member);
  EXPECT_EQ(a->pinned_device, b->pinned_device);
  EXPECT_NE(a->request_index, b->request_index);
  for (OpId v = 0; v < a->num_ops(); ++v) {
    EXPECT_EQ(shuffled.graph().ops(b->request_index[v]).name(), a->op_name[v]);
  }
}

}  // namespace
}  // namespace placement::engine
