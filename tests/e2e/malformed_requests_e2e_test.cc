// End-to-end catalogue of malformed requests: each is sent over real gRPC to a real placement_server
// process and must come back with the documented status code (INVALID_ARGUMENT with the offending
// field path in the BadRequest detail, for anything the service itself rejects). Afterwards the server
// must still be SERVING, answer a valid request, and its resident memory must not have grown beyond a
// stated bound while the whole catalogue was sent again.
//
// The unit-level catalogue in service/engine/model/model_builder_test.cc checks every validation rule
// on BuildModel alone; this one checks what only the whole path can break: decoding of hostile bytes
// by gRPC and protobuf, message size limits, the status mapping and its details, huge and deep inputs
// through the server's threads, and memory left behind by rejected calls.
//
// Codes that are not the service's own choice (documented in tests/README.md):
//   - (bytes that do not parse as the request message were UNIMPLEMENTED with an empty message from
//     gRPC's own decoding; the service now registers raw methods and decodes them itself, so they are
//     INVALID_ARGUMENT "... does not parse as a placement.v1.PlaceRequest message", issue 14);
//   - a message above --max_message_bytes: gRPC answers RESOURCE_EXHAUSTED.
// The requests have no enum fields; the closest things, an unknown algorithm name and unknown field
// numbers, are covered (the first is INVALID_ARGUMENT, the second is ignored as protobuf specifies).
#include <signal.h>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/generic/generic_stub.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "client/placement_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/server_process.h"

namespace placement::e2e {
namespace {

using client::ClientOptions;
using client::PlacementClient;
using ::testing::HasSubstr;

// Sanitizer builds (gcc defines __SANITIZE_*, clang answers __has_feature): RSS means little there
// (shadow memory, quarantine of freed blocks), and giant requests are sent fewer times.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PLACEMENT_E2E_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define PLACEMENT_E2E_SANITIZED 1
#endif
#endif
#ifdef PLACEMENT_E2E_SANITIZED
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

// The server under test accepts messages up to this size; one case sends a bigger one.
constexpr int kMaxMessageBytes = 64 << 20;
constexpr char kPlaceMethod[] = "/placement.v1.PlacementService/Place";

// A small valid request: a diamond of five ops, two GPUs on one node and a CPU on another.
v1::PlaceRequest BaseRequest() {
  v1::PlaceRequest request;
  v1::Graph* graph = request.mutable_graph();
  for (const char* name : {"input", "left", "right", "join", "loss"}) {
    v1::Op* op = graph->add_ops();
    op->set_name(name);
    op->set_type("MatMul");
    op->set_compute_ns(1000);
    op->set_output_bytes(4096);
    op->set_persistent_bytes(1024);
  }
  for (auto [src, dst] : std::vector<std::pair<int, int>>{{0, 1}, {0, 2}, {1, 3}, {2, 3}, {3, 4}}) {
    v1::Edge* edge = graph->add_edges();
    edge->set_src(src);
    edge->set_dst(dst);
    edge->set_bytes(4096);
  }
  v1::Cluster* cluster = request.mutable_cluster();
  for (auto [name, kind, node] : std::vector<std::tuple<const char*, const char*, const char*>>{
           {"gpu0", "gpu", "host0"}, {"gpu1", "gpu", "host0"}, {"cpu0", "cpu", "host1"}}) {
    v1::Device* device = cluster->add_devices();
    device->set_name(name);
    device->set_kind(kind);
    device->set_node(node);
    device->set_memory_bytes(int64_t{1} << 30);
  }
  cluster->mutable_intra_node()->set_bandwidth_bytes_per_second(int64_t{10} << 30);
  cluster->mutable_intra_node()->set_latency_ns(1000);
  cluster->mutable_inter_node()->set_bandwidth_bytes_per_second(int64_t{1} << 30);
  cluster->mutable_inter_node()->set_latency_ns(10000);
  request.mutable_options()->set_algorithm("round_robin");
  return request;
}

// A chain of `n` ops (op i feeds op i+1): valid, but as deep as a graph of n ops can be.
v1::PlaceRequest ChainRequest(int n) {
  v1::PlaceRequest request = BaseRequest();
  v1::Graph* graph = request.mutable_graph();
  graph->Clear();
  graph->mutable_ops()->Reserve(n);
  graph->mutable_edges()->Reserve(n - 1);
  for (int i = 0; i < n; ++i) {
    v1::Op* op = graph->add_ops();
    op->set_name(absl::StrCat("o", i));
    op->set_compute_ns(10 + i % 7);
    op->set_output_bytes(64);
    if (i > 0) {
      v1::Edge* edge = graph->add_edges();
      edge->set_src(i - 1);
      edge->set_dst(i);
      edge->set_bytes(64);
    }
  }
  return request;
}

// ---- Protobuf wire format, written by hand so that the bytes can be anything ----

std::string Varint(uint64_t value) {
  std::string out;
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
  return out;
}
std::string LengthDelimited(int field, const std::string& payload) {
  return Varint((static_cast<uint64_t>(field) << 3) | 2) + Varint(payload.size()) + payload;
}
std::string VarintField(int field, uint64_t value) {
  return Varint(static_cast<uint64_t>(field) << 3) + Varint(value);
}

// The talking side: the typed client, and a generic stub for raw bytes.
struct Caller {
  PlacementClient* client;
  std::shared_ptr<grpc::Channel> channel;

  absl::Status Place(const v1::PlaceRequest& request) { return client->Place(request).status(); }

  absl::Status PlaceRaw(const std::string& bytes) {
    grpc::GenericStub stub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    grpc::Slice slice(bytes);
    grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer response;
    grpc::Status status;
    absl::Notification done;
    stub.UnaryCall(&context, kPlaceMethod, grpc::StubOptions(), &request, &response,
                   [&](grpc::Status s) {
                     status = std::move(s);
                     done.Notify();
                   });
    done.WaitForNotification();
    return client::FromGrpcStatus(status);
  }
};

struct MalformedCase {
  std::string name;
  std::function<absl::Status(Caller&)> send;
  absl::StatusCode code;
  // INVALID_ARGUMENT from the service: a field path that must be among the BadRequest violations.
  std::string field;
  // Must appear in the status message ("" = not checked).
  std::string fragment;
  // Hundreds of MB for the server to decode: sent in the first round only, and checked for memory on
  // their own (see GiantRequestsDoNotAccumulateMemory).
  bool giant = false;
};

using Mutation = std::function<void(v1::PlaceRequest*)>;

// A Place call with a mutated copy of the base request.
std::function<absl::Status(Caller&)> PlaceWith(Mutation mutate) {
  return [mutate](Caller& caller) {
    v1::PlaceRequest request = BaseRequest();
    mutate(&request);
    return caller.Place(request);
  };
}

MalformedCase Invalid(std::string name, Mutation mutate, std::string field,
                      std::string fragment = "") {
  return {std::move(name), PlaceWith(std::move(mutate)), absl::StatusCode::kInvalidArgument,
          std::move(field), std::move(fragment)};
}

std::vector<MalformedCase> Catalogue() {
  using R = v1::PlaceRequest;
  constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  std::vector<MalformedCase> cases = {
      // ---- Shape and references ----
      Invalid("EmptyRequest", [](R* r) { r->Clear(); }, "graph.ops", "no ops"),
      Invalid("NoDevices", [](R* r) { r->mutable_cluster()->clear_devices(); }, "cluster.devices"),
      Invalid("EdgeSrcHuge", [](R* r) { r->mutable_graph()->mutable_edges(1)->set_src(2147483647); },
              "graph.edges[1].src", "out of range"),
      Invalid("EdgeDstNegative", [](R* r) { r->mutable_graph()->mutable_edges(4)->set_dst(-2147483647 - 1); },
              "graph.edges[4].dst", "out of range"),
      Invalid("SelfLoop", [](R* r) { r->mutable_graph()->mutable_edges(2)->set_dst(1); },
              "graph.edges[2].dst", "self-loop"),
      Invalid("TwoOpCycle",
              [](R* r) {
                v1::Edge* back = r->mutable_graph()->add_edges();
                back->set_src(4);
                back->set_dst(3);
              },
              "graph.edges", "cycle"),
      Invalid("LongCycle",
              [](R* r) {
                // A ring of 100000 ops: cycle detection must not recurse per op.
                r->mutable_graph()->Clear();
                constexpr int kRing = 100000;
                for (int i = 0; i < kRing; ++i) {
                  r->mutable_graph()->add_ops()->set_name(absl::StrCat("ring", i));
                  v1::Edge* edge = r->mutable_graph()->add_edges();
                  edge->set_src(i);
                  edge->set_dst((i + 1) % kRing);
                }
              },
              "graph.edges", "cycle"),
      Invalid("DuplicateOpNames", [](R* r) { r->mutable_graph()->mutable_ops(4)->set_name("left"); },
              "graph.ops[4].name", "duplicate"),
      Invalid("EmptyOpName", [](R* r) { r->mutable_graph()->mutable_ops(0)->set_name(""); },
              "graph.ops[0].name"),
      Invalid("HugeOpName",
              [](R* r) { r->mutable_graph()->mutable_ops(2)->set_name(std::string(1 << 20, 'n')); },
              "graph.ops[2].name", "limit"),
      Invalid("DuplicateDeviceNames",
              [](R* r) { r->mutable_cluster()->mutable_devices(2)->set_name("gpu0"); },
              "cluster.devices[2].name", "duplicate"),
      Invalid("PinnedToUnknownDevice",
              [](R* r) { r->mutable_graph()->mutable_ops(1)->set_pinned_device("tpu7"); },
              "graph.ops[1].pinned_device", "unknown device"),
      Invalid("LinkToUnknownDevice",
              [](R* r) {
                v1::Link* link = r->mutable_cluster()->add_links();
                link->set_a("gpu0");
                link->set_b("nowhere");
                link->mutable_spec()->set_bandwidth_bytes_per_second(1000);
              },
              "cluster.links[0].b", "unknown device"),
      Invalid("AllowedKindNobodyHas",
              [](R* r) { r->mutable_graph()->mutable_ops(3)->add_allowed_kinds("quantum"); },
              "graph.ops[3].allowed_kinds"),
      Invalid("ColocationGroupPinnedApart",
              [](R* r) {
                r->mutable_graph()->mutable_ops(1)->set_colocation_group("g");
                r->mutable_graph()->mutable_ops(1)->set_pinned_device("gpu0");
                r->mutable_graph()->mutable_ops(2)->set_colocation_group("g");
                r->mutable_graph()->mutable_ops(2)->set_pinned_device("gpu1");
              },
              "graph.ops[2].pinned_device", "colocation group"),
      // ---- Numbers ----
      Invalid("NegativeCompute", [](R* r) { r->mutable_graph()->mutable_ops(1)->set_compute_ns(kMin); },
              "graph.ops[1].compute_ns", ">= 0"),
      Invalid("HugeCompute", [](R* r) { r->mutable_graph()->mutable_ops(1)->set_compute_ns(kMax); },
              "graph.ops[1].compute_ns", "limit"),
      Invalid("NegativeOutputBytes",
              [](R* r) { r->mutable_graph()->mutable_ops(0)->set_output_bytes(-1); },
              "graph.ops[0].output_bytes"),
      Invalid("HugePersistentBytes",
              [](R* r) { r->mutable_graph()->mutable_ops(3)->set_persistent_bytes(kMax); },
              "graph.ops[3].persistent_bytes"),
      Invalid("NegativeEdgeBytes", [](R* r) { r->mutable_graph()->mutable_edges(0)->set_bytes(kMin); },
              "graph.edges[0].bytes"),
      Invalid("TotalWorkOverflows",
              [](R* r) {
                // Each op is below the per-op limit (1e15 ns); together they pass 1e18 ns.
                for (int i = 0; i < 1100; ++i) {
                  v1::Op* op = r->mutable_graph()->add_ops();
                  op->set_name(absl::StrCat("heavy", i));
                  op->set_compute_ns(1'000'000'000'000'000);
                }
              },
              "graph", "work"),
      Invalid("ZeroMemory", [](R* r) { r->mutable_cluster()->mutable_devices(0)->set_memory_bytes(0); },
              "cluster.devices[0].memory_bytes"),
      Invalid("HugeMemory",
              [](R* r) { r->mutable_cluster()->mutable_devices(1)->set_memory_bytes(kMax); },
              "cluster.devices[1].memory_bytes", "limit"),
      Invalid("NanSpeed", [](R* r) { r->mutable_cluster()->mutable_devices(0)->set_speed(kNan); },
              "cluster.devices[0].speed", "finite"),
      Invalid("InfiniteSpeed",
              [](R* r) {
                r->mutable_cluster()->mutable_devices(1)->set_speed(
                    -std::numeric_limits<double>::infinity());
              },
              "cluster.devices[1].speed"),
      Invalid("ZeroSpeed", [](R* r) { r->mutable_cluster()->mutable_devices(2)->set_speed(0.0); },
              "cluster.devices[2].speed"),
      Invalid("DenormalSpeed",
              [](R* r) {
                r->mutable_cluster()->mutable_devices(2)->set_speed(
                    std::numeric_limits<double>::denorm_min());
              },
              "cluster.devices[2].speed"),
      Invalid("ZeroBandwidthInUse",
              [](R* r) { r->mutable_cluster()->mutable_inter_node()->set_bandwidth_bytes_per_second(0); },
              "cluster.inter_node.bandwidth_bytes_per_second"),
      Invalid("NegativeLatency",
              [](R* r) { r->mutable_cluster()->mutable_intra_node()->set_latency_ns(kMin); },
              "cluster.intra_node.latency_ns"),
      Invalid("NanHeadroom", [](R* r) { r->mutable_options()->set_memory_headroom(kNan); },
              "options.memory_headroom"),
      Invalid("HeadroomAboveOne", [](R* r) { r->mutable_options()->set_memory_headroom(1e300); },
              "options.memory_headroom"),
      Invalid("NegativeTimeLimit",
              [](R* r) { r->mutable_options()->mutable_time_limit()->set_seconds(kMin / 2); },
              "options.time_limit"),
      Invalid("MalformedTimeLimit",
              [](R* r) {
                r->mutable_options()->mutable_time_limit()->set_seconds(5);
                r->mutable_options()->mutable_time_limit()->set_nanos(-1'000'000'000);
              },
              "options.time_limit"),
      // ---- Names the service does not know ----
      Invalid("UnknownAlgorithm", [](R* r) { r->mutable_options()->set_algorithm("\x01nope"); },
              "options.algorithm", "unknown algorithm"),
      Invalid("UnknownAlgorithmBesideBrokenGraph",
              [](R* r) {
                r->mutable_options()->set_algorithm("simulated_annealing");
                r->mutable_graph()->mutable_edges(0)->set_src(-5);
              },
              "graph.edges[0].src"),
      Invalid("HugeOpCount",
              [](R* r) {
                // One op more than the engine's limit (ModelLimits::max_ops = 2M), names kept short.
                r->mutable_graph()->Clear();
                r->mutable_graph()->mutable_ops()->Reserve(2'000'001);
                for (int i = 0; i < 2'000'001; ++i) {
                  r->mutable_graph()->add_ops()->set_name(absl::StrCat(i));
                }
              },
              "graph.ops", "exceed the limit"),
  };

  for (MalformedCase& c : cases) c.giant |= c.name == "HugeOpCount";

  // ---- Evaluate ----
  cases.push_back({"EvaluateWrongDeviceCount",
                   [](Caller& caller) {
                     const v1::PlaceRequest base = BaseRequest();
                     v1::EvaluateRequest evaluate;
                     *evaluate.mutable_graph() = base.graph();
                     *evaluate.mutable_cluster() = base.cluster();
                     evaluate.add_device(0);
                     return caller.client->Evaluate(evaluate).status();
                   },
                   absl::StatusCode::kInvalidArgument, "device", ""});
  cases.push_back({"EvaluateDeviceOutOfRange",
                   [](Caller& caller) {
                     const v1::PlaceRequest base = BaseRequest();
                     v1::EvaluateRequest evaluate;
                     *evaluate.mutable_graph() = base.graph();
                     *evaluate.mutable_cluster() = base.cluster();
                     for (int i = 0; i < base.graph().ops_size(); ++i) evaluate.add_device(i == 2 ? -7 : 0);
                     return caller.client->Evaluate(evaluate).status();
                   },
                   absl::StatusCode::kInvalidArgument, "device[2]", ""});

  // ---- Bytes that are not a PlaceRequest (the service decodes them itself: INVALID_ARGUMENT with a message) ----
  cases.push_back({"TruncatedMessage",
                   [](Caller& caller) {
                     const std::string bytes = BaseRequest().SerializeAsString();
                     return caller.PlaceRaw(bytes.substr(0, bytes.size() - 7));
                   },
                   absl::StatusCode::kInvalidArgument, "", "does not parse as a placement.v1.PlaceRequest"});
  cases.push_back({"GarbageBytes",
                   [](Caller& caller) { return caller.PlaceRaw(std::string(4096, '\xff')); },
                   absl::StatusCode::kInvalidArgument, "", "does not parse as a placement.v1.PlaceRequest"});
  cases.push_back({"LengthPastTheEnd",
                   [](Caller& caller) {
                     // graph: a length of 2^40 with nothing behind it.
                     return caller.PlaceRaw(Varint((1 << 3) | 2) + Varint(uint64_t{1} << 40));
                   },
                   absl::StatusCode::kInvalidArgument, "", "does not parse as a placement.v1.PlaceRequest"});
  cases.push_back({"InvalidUtf8Name",
                   [](Caller& caller) {
                     // proto3 strings must be UTF-8: graph { ops { name: "\xc3\x28" } }.
                     const std::string op = LengthDelimited(1, std::string("\xc3\x28", 2));
                     return caller.PlaceRaw(LengthDelimited(1, LengthDelimited(1, op)));
                   },
                   absl::StatusCode::kInvalidArgument, "", "does not parse as a placement.v1.PlaceRequest"});
  cases.push_back({"DeeplyNestedGroups",
                   [](Caller& caller) {
                     // 100000 nested start-group tags of an unknown field: past protobuf's recursion
                     // limit, which must stop it (not the stack).
                     std::string bytes;
                     for (int i = 0; i < 100000; ++i) bytes += Varint((15 << 3) | 3);
                     return caller.PlaceRaw(bytes);
                   },
                   absl::StatusCode::kInvalidArgument, "", "does not parse as a placement.v1.PlaceRequest"});
  cases.push_back({"WrongWireTypeIsAnUnknownField",
                   [](Caller& caller) {
                     // graph (field 1) sent as a varint: protobuf keeps it as an unknown field, so the
                     // request has no graph.
                     return caller.PlaceRaw(VarintField(1, 12345));
                   },
                   absl::StatusCode::kInvalidArgument, "graph.ops", ""});
  cases.push_back({"EmptyBodyIsAnEmptyRequest",
                   [](Caller& caller) { return caller.PlaceRaw(""); },
                   absl::StatusCode::kInvalidArgument, "graph.ops", ""});
  cases.push_back({"UnknownFieldsAreIgnored",
                   [](Caller& caller) {
                     // A valid request plus unknown fields 99 (varint) and 100 (bytes): accepted.
                     std::string bytes = BaseRequest().SerializeAsString();
                     bytes += VarintField(99, 7) + LengthDelimited(100, "future");
                     return caller.PlaceRaw(bytes);
                   },
                   absl::StatusCode::kOk, "", ""});
  cases.push_back({"OversizedMessage",
                   [](Caller& caller) {
                     // One unknown bytes field just above the server's --max_message_bytes.
                     return caller.PlaceRaw(LengthDelimited(100, std::string(kMaxMessageBytes + 1, 'x')));
                   },
                   absl::StatusCode::kResourceExhausted, "", "", /*giant=*/true});
  return cases;
}

int64_t ResidentBytesOrDie(const ServerProcess& server) {
  absl::StatusOr<int64_t> rss = ResidentBytes(server.pid());
  EXPECT_TRUE(rss.ok()) << rss.status();
  return rss.value_or(0);
}

// What the server may keep after the catalogue was sent once already: allocator caches and gRPC's
// per-connection buffers, not memory per rejected call. Sanitizers keep freed memory in quarantine.
int64_t RssGrowthBound() { return kSanitized ? int64_t{768} << 20 : int64_t{64} << 20; }

class MalformedRequestsE2ETest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = StartSuiteServer({"--workers=2", absl::StrCat("--max_message_bytes=", kMaxMessageBytes),
                                "--cache_bytes=33554432", "--log_requests=false"});
  }
  static void TearDownTestSuite() { StopSuiteServer(server_); }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    ClientOptions options;
    options.target = server_->address();
    options.default_timeout = absl::Minutes(5);
    options.max_message_bytes = 2 * kMaxMessageBytes;  // so that the client can send the oversized one
    options.retry.max_attempts = 1;
    channel_ = client::MakeChannel(options);
    client_ = std::make_unique<PlacementClient>(options, channel_);
  }

  // Sends every case (the giant ones only if asked) and checks its answer.
  void SendCatalogue(bool giants) {
    Caller caller{client_.get(), channel_};
    for (const MalformedCase& c : Catalogue()) {
      if (c.giant && !giants) continue;
      SCOPED_TRACE(c.name);
      const absl::Status status = c.send(caller);
      EXPECT_EQ(status.code(), c.code) << status;
      if (status.code() != c.code) continue;
      if (!c.field.empty()) {
        std::vector<std::string> fields;
        for (const auto& [field, description] : client::FieldViolationsOf(status)) {
          fields.push_back(field);
        }
        EXPECT_THAT(fields, ::testing::Contains(c.field)) << status;
        EXPECT_THAT(std::string(status.message()), HasSubstr(c.field));
      }
      if (!c.fragment.empty()) {
        EXPECT_THAT(std::string(status.message()), HasSubstr(c.fragment));
      }
    }
  }

  void ExpectStillServing() {
    EXPECT_EQ(client_->CheckHealth("").value_or(client::ServingStatus::kUnknown),
              client::ServingStatus::kServing);
    absl::StatusOr<v1::PlaceResponse> placed = client_->Place(BaseRequest());
    ASSERT_TRUE(placed.ok()) << placed.status();
    EXPECT_EQ(placed->placement().device_size(), 5);
  }

  static ServerProcess* server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<PlacementClient> client_;
};

ServerProcess* MalformedRequestsE2ETest::server_ = nullptr;

TEST_F(MalformedRequestsE2ETest, CatalogueIsLargeEnough) { EXPECT_GE(Catalogue().size(), 30u); }

TEST_F(MalformedRequestsE2ETest, EveryCaseGetsItsCodeAndTheServerLivesOnWithBoundedMemory) {
  SendCatalogue(/*giants=*/true);
  ExpectStillServing();
  // One more round settles allocator arenas and connection buffers; then the memory of rejected
  // calls must not accumulate.
  SendCatalogue(/*giants=*/false);
  const int64_t before = ResidentBytesOrDie(*server_);
  for (int round = 0; round < 3; ++round) SendCatalogue(/*giants=*/false);
  ExpectStillServing();
  const int64_t after = ResidentBytesOrDie(*server_);
  std::printf("[ malformed ] server RSS %.1f MiB -> %.1f MiB over three rounds of the catalogue\n",
              before / 1048576.0, after / 1048576.0);
  EXPECT_LE(after - before, RssGrowthBound());

  absl::StatusOr<std::string> metrics = ScrapeMetrics(server_->metrics_port());
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_GE(MetricValue(*metrics,
                        "placement_requests_total{code=\"INVALID_ARGUMENT\",method=\"Place\"}"),
            5 * 30);
}

TEST_F(MalformedRequestsE2ETest, GiantRequestsDoNotAccumulateMemory) {
  // Decoding 2M ops costs the server a few hundred MB (protobuf objects), which the allocator keeps
  // for reuse: the first rounds grow RSS (a new arena per server thread that met one), later ones
  // must reuse it.
  Caller caller{client_.get(), channel_};
  std::vector<MalformedCase> giants;
  for (MalformedCase& c : Catalogue()) {
    if (c.giant) giants.push_back(std::move(c));
  }
  ASSERT_EQ(giants.size(), 2u);
  auto send_all = [&] {
    for (const MalformedCase& c : giants) EXPECT_EQ(c.send(caller).code(), c.code) << c.name;
  };
  if (kSanitized) {  // each round costs the instrumented server gigabytes and minutes; no RSS check
    send_all();
    ExpectStillServing();
    return;
  }
  // Which gRPC thread (and so which malloc arena) takes a call varies, so RSS may step up for a few
  // rounds before every arena has met a giant request; a leak never settles (each round would add the
  // hundreds of MB one giant request costs). Pass once three rounds in a row add less than the bound.
  std::vector<int64_t> rss = {ResidentBytesOrDie(*server_)};
  bool settled = false;
  for (int round = 0; round < 15 && !settled; ++round) {
    send_all();
    rss.push_back(ResidentBytesOrDie(*server_));
    settled = rss.size() >= 4 && rss.back() - rss[rss.size() - 4] <= 2 * RssGrowthBound();
  }
  std::string series;
  for (int64_t bytes : rss) absl::StrAppend(&series, series.empty() ? "" : " ", bytes >> 20);
  std::printf("[ malformed ] giant requests: server RSS per round (MiB): %s\n", series.c_str());
  EXPECT_TRUE(settled) << "RSS kept growing by more than " << (2 * RssGrowthBound() >> 20)
                       << " MiB per three rounds: " << series;
  ExpectStillServing();
}

TEST_F(MalformedRequestsE2ETest, AChainOfAMillionOpsIsPlacedWithoutOverflowingAStack) {
  // Valid but as deep as possible: validation, topological order, digests, the algorithm and the
  // simulator must all be iterative. The default algorithm gets a bounded time limit and returns its
  // best answer so far if it needs more.
  v1::PlaceRequest request = ChainRequest(1'000'000);
  request.mutable_options()->set_algorithm("");
  request.mutable_options()->mutable_time_limit()->set_seconds(20);
  ASSERT_LT(request.ByteSizeLong(), static_cast<size_t>(kMaxMessageBytes));
  absl::StatusOr<v1::PlaceResponse> placed = client_->Place(request);
  ASSERT_TRUE(placed.ok()) << placed.status();
  ASSERT_EQ(placed->placement().device_size(), 1'000'000);
  EXPECT_GT(placed->placement().metrics().makespan_ns(), 0);
  EXPECT_GE(placed->placement().metrics().makespan_ns(),
            placed->placement().metrics().lower_bound_ns());
  ExpectStillServing();
}

}  // namespace
}  // namespace placement::e2e
