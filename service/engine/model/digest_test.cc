// Tests for GraphDigestHex / RequestDigestHex: the exact hashed format (recomputed independently with
// OpenSSL's one-shot SHA256), independence from op / edge / link order, and sensitivity to everything
// that changes a result.
#include "service/engine/model/digest.h"

#include <openssl/sha.h>

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/engine/model/model_builder.h"
#include "tests/testutil/random_graph.h"

namespace placement::engine {
namespace {

const DigestOptions kOptions{"pardnn", "1.0", 7};

Model Build(const v1::PlaceRequest& request, const ModelLimits& limits = ModelLimits()) {
  std::vector<FieldViolation> violations;
  absl::StatusOr<Model> model = BuildModel(request, &violations, limits);
  EXPECT_TRUE(model.ok()) << FormatViolations(violations);
  return model.ok() ? *std::move(model) : Model();
}

std::string GraphDigestOf(const v1::PlaceRequest& request) { return GraphDigestHex(Build(request)); }
std::string RequestDigestOf(const v1::PlaceRequest& request,
                            const DigestOptions& options = kOptions) {
  return RequestDigestHex(Build(request), options);
}

// A constrained random request with parallel edges, link overrides, heterogeneous speeds and headroom.
v1::PlaceRequest RichRequest(uint64_t seed, int32_t num_ops = 300) {
  testutil::RandomGraphOptions options;
  options.num_ops = num_ops;
  options.avg_out_degree = 3;
  options.parallel_edge_fraction = 0.05;
  options.control_edge_fraction = 0.05;
  options.num_devices = 5;
  options.num_nodes = 2;
  options.device_kinds = {"gpu", "cpu"};
  options.heterogeneous_speeds = true;
  options.num_link_overrides = 2;
  options.colocation_fraction = 0.2;
  options.pinned_fraction = 0.1;
  options.kind_restricted_fraction = 0.2;
  options.memory_headroom = 0.05;
  options.seed = seed;
  return testutil::RandomLayeredRequest(options);
}

// ---- The exact format, rebuilt by hand. ----

class ByteWriter {
 public:
  void U32(uint32_t v) {
    for (int i = 0; i < 4; ++i) bytes_.push_back(static_cast<char>(v >> (8 * i)));
  }
  void U64(uint64_t v) {
    for (int i = 0; i < 8; ++i) bytes_.push_back(static_cast<char>(v >> (8 * i)));
  }
  void F64(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    U64(bits);
  }
  void Str(const std::string& s) {
    U64(s.size());
    bytes_ += s;
  }
  std::string Sha256Hex() const {
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const unsigned char*>(bytes_.data()), bytes_.size(), digest);
    std::string hex;
    for (unsigned char c : digest) {
      static constexpr char kHex[] = "0123456789abcdef";
      hex += kHex[c >> 4];
      hex += kHex[c & 15];
    }
    return hex;
  }

 private:
  std::string bytes_;
};

// Two ops in reverse name order, two parallel edges, one pin, one kind restriction, one group;
// two devices on different nodes with one speed set.
v1::PlaceRequest TinyRequest() {
  v1::PlaceRequest request;
  v1::Graph* graph = request.mutable_graph();
  v1::Op* y = graph->add_ops();
  y->set_name("y");
  y->set_type("Relu");
  y->set_compute_ns(5);
  y->set_output_bytes(6);
  y->set_persistent_bytes(7);
  y->set_temp_bytes(8);
  y->add_allowed_kinds("gpu");
  y->add_allowed_kinds("cpu");
  y->set_colocation_group("grp");
  v1::Op* x = graph->add_ops();
  x->set_name("x");
  x->set_compute_ns(1);
  x->set_pinned_device("dev1");
  for (int64_t bytes : {100, 23}) {
    v1::Edge* edge = graph->add_edges();
    edge->set_src(1);
    edge->set_dst(0);
    edge->set_bytes(bytes);
  }
  v1::Cluster* cluster = request.mutable_cluster();
  v1::Device* dev0 = cluster->add_devices();
  dev0->set_name("dev0");
  dev0->set_kind("gpu");
  dev0->set_node("h0");
  dev0->set_memory_bytes(1000);
  v1::Device* dev1 = cluster->add_devices();
  dev1->set_name("dev1");
  dev1->set_kind("cpu");
  dev1->set_node("h1");
  dev1->set_memory_bytes(2000);
  dev1->set_speed(1.5);
  cluster->mutable_inter_node()->set_bandwidth_bytes_per_second(400);
  cluster->mutable_inter_node()->set_latency_ns(3);
  request.mutable_options()->set_memory_headroom(0.25);
  return request;
}

// The graph digest of TinyRequest() with op "y"'s type replaced by `y_type`, written out by hand.
std::string ExpectedTinyGraphDigest(const std::string& y_type) {
  ByteWriter w;
  w.Str("placement.v1.graph_digest/1");
  w.U64(2);  // ops
  w.U64(1);  // merged edges
  // op 0 = "x"
  w.Str("x");
  w.Str("");
  for (int64_t v : {1, 0, 0, 0}) w.U64(static_cast<uint64_t>(v));
  w.Str("");  // no group
  w.U32(0);   // no kind restriction
  w.Str("dev1");
  // op 1 = "y"
  w.Str("y");
  w.Str(y_type);
  for (int64_t v : {5, 6, 7, 8}) w.U64(static_cast<uint64_t>(v));
  w.Str("grp");
  w.U32(2);
  w.Str("cpu");  // kinds in byte order
  w.Str("gpu");
  w.Str("");  // not pinned
  // x -> y, 100 + 23 bytes
  w.U32(0);
  w.U32(1);
  w.U64(123);
  return w.Sha256Hex();
}

TEST(DigestTest, GraphDigestFollowsTheDocumentedFormat) {
  EXPECT_EQ(GraphDigestOf(TinyRequest()), ExpectedTinyGraphDigest("Relu"));
}

TEST(DigestTest, StringsLargerThanTheBufferAreHashedInFull) {
  ModelLimits limits;
  limits.max_name_bytes = 1 << 20;
  std::string type(40000, 't');
  v1::PlaceRequest request = TinyRequest();
  request.mutable_graph()->mutable_ops(0)->set_type(type);
  const std::string digest = GraphDigestHex(Build(request, limits));
  EXPECT_EQ(digest, ExpectedTinyGraphDigest(type));
  type.back() = 'u';
  request.mutable_graph()->mutable_ops(0)->set_type(type);
  EXPECT_NE(GraphDigestHex(Build(request, limits)), digest);
}

// The request digest's bytes for TinyRequest() under kOptions, spelled out: the format tag, the graph
// digest, the two devices, their link (bandwidth, latency), the memory headroom and kOptions.
ByteWriter TinyRequestDigestBytes(const std::string& graph_digest) {
  ByteWriter w;
  w.Str("placement.v1.request_digest/1");
  w.Str(graph_digest);
  w.U32(2);
  w.Str("dev0");
  w.Str("gpu");
  w.Str("h0");
  w.U64(1000);
  w.F64(1.0);
  w.Str("dev1");
  w.Str("cpu");
  w.Str("h1");
  w.U64(2000);
  w.F64(1.5);
  w.U64(400);  // dev0 - dev1: inter_node
  w.U64(3);
  w.F64(0.25);
  w.Str("pardnn");
  w.Str("1.0");
  w.U64(7);
  return w;
}

TEST(DigestTest, RequestDigestFollowsTheDocumentedFormat) {
  const std::string graph_digest = GraphDigestOf(TinyRequest());
  ByteWriter w = TinyRequestDigestBytes(graph_digest);
  const Model model = Build(TinyRequest());
  EXPECT_EQ(RequestDigestHex(model, "pardnn", "1.0", 7), w.Sha256Hex());
  EXPECT_EQ(RequestDigestHex(model, "pardnn", "1.0", 7, graph_digest), w.Sha256Hex());
  EXPECT_EQ(RequestDigestHex(model, kOptions), w.Sha256Hex());
  EXPECT_EQ(RequestDigestHex(model, graph_digest, kOptions), w.Sha256Hex());
}

// A previous placement (re-placement) appends its section after everything else: x (op 0) was on dev1,
// y (op 1) on a device that left.
TEST(DigestTest, PreviousPlacementFollowsTheDocumentedFormat) {
  v1::PlaceRequest request = TinyRequest();
  (*request.mutable_options()->mutable_previous_placement())["x"] = "dev1";
  (*request.mutable_options()->mutable_previous_placement())["y"] = "gone";
  request.mutable_options()->set_move_weight_ns_per_byte(0.5);
  const std::string graph_digest = GraphDigestOf(request);
  ByteWriter w = TinyRequestDigestBytes(graph_digest);
  w.Str("previous_placement");
  w.U64(2);
  w.U32(0);  // x
  w.U64(1);  // dev1
  w.U32(1);  // y
  w.U64(static_cast<uint64_t>(int64_t{-2}));  // departed
  w.F64(0.5);
  EXPECT_EQ(RequestDigestHex(Build(request), kOptions), w.Sha256Hex());
  // options.departed_devices only checks names: the same digest with it.
  request.mutable_options()->add_departed_devices("gone");
  EXPECT_EQ(RequestDigestHex(Build(request), kOptions), w.Sha256Hex());
}

// Absent, or a move weight without a previous placement: the digest every request had before.
TEST(DigestTest, NoPreviousPlacementKeepsTheDigest) {
  const v1::PlaceRequest base = RichRequest(3, 100);
  v1::PlaceRequest weight_only = base;
  weight_only.mutable_options()->set_move_weight_ns_per_byte(2.0);
  EXPECT_EQ(RequestDigestOf(weight_only), RequestDigestOf(base));
  EXPECT_EQ(GraphDigestOf(weight_only), GraphDigestOf(base));
}

TEST(DigestTest, PreviousPlacementChangesTheRequestDigestNotItsOrder) {
  const v1::PlaceRequest base = RichRequest(3, 100);
  v1::PlaceRequest previous = base;
  auto& entries = *previous.mutable_options()->mutable_previous_placement();
  for (int i = 0; i < base.graph().ops_size(); i += 3) {
    entries[base.graph().ops(i).name()] = base.cluster().devices(i % base.cluster().devices_size()).name();
  }
  const std::string with_previous = RequestDigestOf(previous);
  EXPECT_NE(with_previous, RequestDigestOf(base));
  EXPECT_EQ(GraphDigestOf(previous), GraphDigestOf(base));
  // The same entries inserted in the opposite order, and the ops shuffled: the same digest.
  v1::PlaceRequest reversed = base;
  std::vector<std::pair<std::string, std::string>> pairs(entries.begin(), entries.end());
  std::sort(pairs.begin(), pairs.end());
  for (auto it = pairs.rbegin(); it != pairs.rend(); ++it) {
    (*reversed.mutable_options()->mutable_previous_placement())[it->first] = it->second;
  }
  EXPECT_EQ(RequestDigestOf(reversed), with_previous);
  EXPECT_EQ(RequestDigestOf(testutil::ShuffleRequest(reversed, 17)), with_previous);
  // Another device for one op, another weight, one entry fewer: each changes it.
  v1::PlaceRequest moved = previous;
  const std::string first_op = pairs.front().first;
  const std::string other_device =
      pairs.front().second == base.cluster().devices(0).name() ? base.cluster().devices(1).name()
                                                               : base.cluster().devices(0).name();
  (*moved.mutable_options()->mutable_previous_placement())[first_op] = other_device;
  EXPECT_NE(RequestDigestOf(moved), with_previous);
  v1::PlaceRequest weighted = previous;
  weighted.mutable_options()->set_move_weight_ns_per_byte(1e-3);
  EXPECT_NE(RequestDigestOf(weighted), with_previous);
  v1::PlaceRequest fewer = previous;
  fewer.mutable_options()->mutable_previous_placement()->erase(first_op);
  EXPECT_NE(RequestDigestOf(fewer), with_previous);
  // Which device left does not matter, only that it did.
  v1::PlaceRequest departed_a = previous, departed_b = previous;
  (*departed_a.mutable_options()->mutable_previous_placement())[first_op] = "left-a";
  (*departed_b.mutable_options()->mutable_previous_placement())[first_op] = "left-b";
  EXPECT_EQ(RequestDigestOf(departed_a), RequestDigestOf(departed_b));
  EXPECT_NE(RequestDigestOf(departed_a), with_previous);
}

TEST(DigestTest, DigestsAreLowerCaseHexSha256) {
  const std::string digest = GraphDigestOf(TinyRequest());
  EXPECT_THAT(digest, ::testing::MatchesRegex("[0-9a-f]{64}"));
  EXPECT_THAT(RequestDigestOf(TinyRequest()), ::testing::MatchesRegex("[0-9a-f]{64}"));
}

// ---- Order independence. ----

TEST(DigestTest, ShuffledOpsEdgesAndLinksGiveTheSameDigests) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    SCOPED_TRACE(seed);
    const v1::PlaceRequest request = RichRequest(seed);
    const std::string graph_digest = GraphDigestOf(request);
    const std::string request_digest = RequestDigestOf(request);
    for (uint64_t shuffle = 100; shuffle < 103; ++shuffle) {
      const v1::PlaceRequest shuffled = testutil::ShuffleRequest(request, shuffle);
      ASSERT_NE(shuffled.graph().ops(0).name(), request.graph().ops(0).name());
      EXPECT_EQ(GraphDigestOf(shuffled), graph_digest);
      EXPECT_EQ(RequestDigestOf(shuffled), request_digest);
    }
  }
}

TEST(DigestTest, ParallelEdgesHashLikeTheirMergedEdge) {
  v1::PlaceRequest split = TinyRequest();
  v1::PlaceRequest merged = TinyRequest();
  merged.mutable_graph()->mutable_edges()->RemoveLast();
  merged.mutable_graph()->mutable_edges(0)->set_bytes(123);
  EXPECT_EQ(GraphDigestOf(split), GraphDigestOf(merged));
}

TEST(DigestTest, SameEffectiveLinksHashAlike) {
  // An override equal to the default it replaces does not change the link matrix.
  v1::PlaceRequest plain = TinyRequest();
  v1::PlaceRequest spelled_out = TinyRequest();
  v1::Link* link = spelled_out.mutable_cluster()->add_links();
  link->set_a("dev1");
  link->set_b("dev0");
  link->mutable_spec()->set_bandwidth_bytes_per_second(400);
  link->mutable_spec()->set_latency_ns(3);
  EXPECT_EQ(RequestDigestOf(plain), RequestDigestOf(spelled_out));
}

TEST(DigestTest, NegativeZeroHeadroomHashesLikeZero) {
  v1::PlaceRequest a = TinyRequest();
  v1::PlaceRequest b = TinyRequest();
  a.mutable_options()->set_memory_headroom(0.0);
  b.mutable_options()->set_memory_headroom(-0.0);
  EXPECT_EQ(RequestDigestOf(a), RequestDigestOf(b));
}

TEST(DigestTest, SpeedOneSetOrUnsetHashesAlike) {
  v1::PlaceRequest a = TinyRequest();
  v1::PlaceRequest b = TinyRequest();
  b.mutable_cluster()->mutable_devices(0)->set_speed(1.0);
  EXPECT_EQ(RequestDigestOf(a), RequestDigestOf(b));
}

// ---- Sensitivity: every change that can change a result changes the digest. ----

struct Mutation {
  std::string name;
  std::function<void(v1::PlaceRequest*)> apply;
  bool changes_graph;  // false: only the request digest changes
};

std::vector<Mutation> Mutations() {
  using R = v1::PlaceRequest;
  auto op = [](R* r, int i) { return r->mutable_graph()->mutable_ops(i); };
  auto device = [](R* r, int i) { return r->mutable_cluster()->mutable_devices(i); };
  return {
      {"OpName", [=](R* r) { op(r, 0)->set_name("y2"); }, true},
      {"OpType", [=](R* r) { op(r, 0)->set_type("Gelu"); }, true},
      {"Compute", [=](R* r) { op(r, 0)->set_compute_ns(6); }, true},
      {"OutputBytes", [=](R* r) { op(r, 0)->set_output_bytes(60); }, true},
      {"PersistentBytes", [=](R* r) { op(r, 0)->set_persistent_bytes(70); }, true},
      {"TempBytes", [=](R* r) { op(r, 0)->set_temp_bytes(80); }, true},
      {"GroupName", [=](R* r) { op(r, 0)->set_colocation_group("grp2"); }, true},
      {"GroupAdded", [=](R* r) { op(r, 1)->set_colocation_group("grp"); }, true},
      {"KindRemoved", [=](R* r) { op(r, 0)->mutable_allowed_kinds()->RemoveLast(); }, true},
      {"KindAdded", [=](R* r) { op(r, 1)->add_allowed_kinds("cpu"); }, true},
      {"PinRemoved", [=](R* r) { op(r, 1)->clear_pinned_device(); }, true},
      {"PinAdded", [=](R* r) { op(r, 0)->set_pinned_device("dev0"); }, true},
      {"PinChanged",
       [=](R* r) {
         op(r, 1)->set_pinned_device("dev0");
       },
       true},
      {"EdgeBytes", [](R* r) { r->mutable_graph()->mutable_edges(1)->set_bytes(24); }, true},
      {"EdgeReversed",
       [](R* r) {
         for (v1::Edge& e : *r->mutable_graph()->mutable_edges()) {
           e.set_src(0);
           e.set_dst(1);
         }
       },
       true},
      {"EdgeRemoved", [](R* r) { r->mutable_graph()->clear_edges(); }, true},
      {"OpAdded",
       [](R* r) {
         v1::Op* z = r->mutable_graph()->add_ops();
         z->set_name("z");
       },
       true},
      {"DeviceName",
       [=](R* r) {
         device(r, 0)->set_name("dev9");
       },
       false},
      {"DeviceKind",
       [=](R* r) {
         device(r, 0)->set_kind("cpu");
         r->mutable_graph()->mutable_ops(0)->mutable_allowed_kinds()->RemoveLast();  // keep it valid
         r->mutable_graph()->mutable_ops(0)->set_allowed_kinds(0, "cpu");
       },
       true},
      {"DeviceNode",
       [=](R* r) {
         // Same link as before (intra_node = inter_node): only the node name differs.
         device(r, 1)->set_node("h0");
         *r->mutable_cluster()->mutable_intra_node() = r->cluster().inter_node();
       },
       false},
      {"DeviceMemory", [=](R* r) { device(r, 1)->set_memory_bytes(2001); }, false},
      {"DeviceSpeed", [=](R* r) { device(r, 1)->set_speed(1.25); }, false},
      {"DeviceAdded",
       [](R* r) {
         v1::Device* d = r->mutable_cluster()->add_devices();
         d->set_name("dev2");
         d->set_kind("gpu");
         d->set_node("h2");
         d->set_memory_bytes(5);
       },
       false},
      {"DevicesSwapped",
       [](R* r) {
         r->mutable_cluster()->mutable_devices()->SwapElements(0, 1);
       },
       false},
      {"InterBandwidth",
       [](R* r) { r->mutable_cluster()->mutable_inter_node()->set_bandwidth_bytes_per_second(401); },
       false},
      {"InterLatency", [](R* r) { r->mutable_cluster()->mutable_inter_node()->set_latency_ns(4); },
       false},
      {"LinkOverride",
       [](R* r) {
         v1::Link* link = r->mutable_cluster()->add_links();
         link->set_a("dev0");
         link->set_b("dev1");
         link->mutable_spec()->set_bandwidth_bytes_per_second(900);
       },
       false},
      {"Headroom", [](R* r) { r->mutable_options()->set_memory_headroom(0.3); }, false},
      {"OncePerStep", [](R* r) { r->mutable_graph()->mutable_ops(0)->set_once_per_step(true); }, true},
      {"Microbatches", [](R* r) { r->mutable_options()->set_microbatches(4); }, false},
      {"MaxInFlight",
       [](R* r) {
         r->mutable_options()->set_microbatches(4);
         r->mutable_options()->set_max_in_flight(2);
       },
       false},
      {"DataParallelChosen", [](R* r) { r->mutable_options()->set_data_parallel(0); }, false},
  };
}

TEST(DigestTest, EveryRelevantChangeChangesTheDigests) {
  const v1::PlaceRequest base = TinyRequest();
  const std::string base_graph = GraphDigestOf(base);
  const std::string base_request = RequestDigestOf(base);
  std::set<std::string> seen_requests = {base_request};
  for (const Mutation& mutation : Mutations()) {
    SCOPED_TRACE(mutation.name);
    v1::PlaceRequest changed = base;
    mutation.apply(&changed);
    const std::string graph = GraphDigestOf(changed);
    const std::string request = RequestDigestOf(changed);
    if (mutation.changes_graph) {
      EXPECT_NE(graph, base_graph);
    } else {
      EXPECT_EQ(graph, base_graph);
    }
    EXPECT_NE(request, base_request);
    // No two mutations collide either.
    EXPECT_TRUE(seen_requests.insert(request).second);
  }
}

TEST(DigestTest, OptionsThatChangeTheResultChangeTheRequestDigestOnly) {
  const Model model = Build(TinyRequest());
  const std::string graph = GraphDigestHex(model);
  const std::string base = RequestDigestHex(model, kOptions);
  EXPECT_NE(RequestDigestHex(model, {"heft", "1.0", 7}), base);
  EXPECT_NE(RequestDigestHex(model, {"pardnn", "1.1", 7}), base);
  EXPECT_NE(RequestDigestHex(model, {"pardnn", "1.0", 8}), base);
  // Length prefixes keep ("pardnn1", ".0") apart from ("pardnn", "1.0").
  EXPECT_NE(RequestDigestHex(model, {"pardnn1", ".0", 7}), base);
  EXPECT_EQ(GraphDigestHex(model), graph);
}

// The plan's defaults spelled out hash like the plan left out: old requests keep their digests.
TEST(DigestTest, DefaultPlanSpelledOutHashesLikeNoPlan) {
  const v1::PlaceRequest base = TinyRequest();
  v1::PlaceRequest spelled = base;
  spelled.mutable_options()->set_microbatches(1);
  spelled.mutable_options()->set_data_parallel(1);
  spelled.mutable_options()->set_max_in_flight(0);
  EXPECT_EQ(RequestDigestOf(spelled), RequestDigestOf(base));
  v1::PlaceRequest zero_microbatches = base;
  zero_microbatches.mutable_options()->set_microbatches(0);
  EXPECT_EQ(RequestDigestOf(zero_microbatches), RequestDigestOf(base));
}

TEST(DigestTest, RequestIdSkipCacheAndTimeLimitDoNotChangeTheDigests) {
  const v1::PlaceRequest base = RichRequest(3, 100);
  v1::PlaceRequest other = base;
  other.set_request_id("6d1c3c1e-request");
  other.mutable_options()->set_skip_cache(true);
  other.mutable_options()->mutable_time_limit()->set_seconds(30);
  EXPECT_EQ(GraphDigestOf(other), GraphDigestOf(base));
  EXPECT_EQ(RequestDigestOf(other), RequestDigestOf(base));
}

TEST(DigestTest, RandomGraphsHaveDistinctDigests) {
  std::set<std::string> digests;
  for (uint64_t seed = 1; seed <= 10; ++seed) digests.insert(GraphDigestOf(RichRequest(seed, 50)));
  EXPECT_EQ(digests.size(), 10u);
}

TEST(DigestTest, LargeGraphDigestIsStableAcrossShuffles) {
  testutil::RandomGraphOptions options;
  options.num_ops = 20000;
  options.avg_out_degree = 3;
  options.num_devices = 8;
  const v1::PlaceRequest request = testutil::RandomLayeredRequest(options);
  const Model model = Build(request);
  const Model shuffled = Build(testutil::ShuffleRequest(request, 5));
  EXPECT_EQ(GraphDigestHex(model), GraphDigestHex(shuffled));
  EXPECT_EQ(RequestDigestHex(model, kOptions), RequestDigestHex(shuffled, kOptions));
}

}  // namespace
}  // namespace placement::engine
