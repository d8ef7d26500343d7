#include "service/engine/solve/solve.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/solve/algorithm_registry.h"

namespace placement::engine {
namespace {

using ::testing::HasSubstr;

// Ops listed out of name order ("zeta" before "alpha") so that request order != canonical order.
// zeta -> alpha (1000 bytes); zeta holds 600 persistent bytes, alpha 500.
v1::PlaceRequest TwoOpRequest() {
  v1::PlaceRequest request;
  v1::Op* zeta = request.mutable_graph()->add_ops();
  zeta->set_name("zeta");
  zeta->set_compute_ns(100);
  zeta->set_persistent_bytes(600);
  v1::Op* alpha = request.mutable_graph()->add_ops();
  alpha->set_name("alpha");
  alpha->set_compute_ns(50);
  alpha->set_persistent_bytes(500);
  v1::Edge* edge = request.mutable_graph()->add_edges();
  edge->set_src(0);
  edge->set_dst(1);
  edge->set_bytes(1000);
  for (const char* name : {"d0", "d1"}) {
    v1::Device* device = request.mutable_cluster()->add_devices();
    device->set_name(name);
    device->set_kind("gpu");
    device->set_memory_bytes(2000);
  }
  request.mutable_cluster()->mutable_intra_node()->set_bandwidth_bytes_per_second(1000000000);
  request.mutable_cluster()->mutable_intra_node()->set_latency_ns(5);
  return request;
}

TEST(SolveTest, FillsProvenanceAndMapsDevicesToRequestOrder) {
  const v1::PlaceRequest request = TwoOpRequest();
  absl::StatusOr<Model> model = BuildModel(request);
  ASSERT_TRUE(model.ok()) << model.status();
  v1::PlacementOptions options;
  options.set_algorithm("round_robin");
  absl::StatusOr<v1::Placement> placement = Solve(*model, options, SolveContext());
  ASSERT_TRUE(placement.ok()) << placement.status();
  // Topological order is zeta, alpha: zeta -> d0, alpha -> d1, reported in request order.
  ASSERT_EQ(placement->device_size(), 2);
  EXPECT_EQ(placement->device(0), 0);
  EXPECT_EQ(placement->device(1), 1);
  EXPECT_EQ(placement->outcome(), v1::FEASIBLE);
  // zeta [0,100) on d0; transfer 5 + 1000 ns; alpha [1105, 1155) on d1.
  EXPECT_EQ(placement->metrics().makespan_ns(), 1155);
  EXPECT_EQ(placement->metrics().transfer_bytes(), 1000);
  EXPECT_EQ(placement->metrics().devices_size(), 2);
  const v1::Provenance& provenance = placement->provenance();
  EXPECT_EQ(provenance.algorithm(), "round_robin");
  EXPECT_EQ(provenance.requested_algorithm(), "round_robin");
  EXPECT_EQ(provenance.graph_digest().size(), 64u);
  EXPECT_EQ(provenance.request_digest().size(), 64u);
  EXPECT_NE(provenance.graph_digest(), provenance.request_digest());
  EXPECT_EQ(provenance.cache(), v1::MISS);
  const Partitioner* algorithm = AlgorithmRegistry::Default().Find("round_robin").value();
  EXPECT_EQ(RequestDigestFor(*model, *algorithm, options), provenance.request_digest());
}

// solve_ns comes from the context's clock, never the wall clock: a fake clock that moves 7 ms per reading
// (round_robin reads none) gives exactly 7 ms.
TEST(SolveTest, SolveTimeIsReadFromTheContextsClock) {
  absl::StatusOr<Model> model = BuildModel(TwoOpRequest());
  ASSERT_TRUE(model.ok()) << model.status();
  v1::PlacementOptions options;
  options.set_algorithm("round_robin");
  int64_t readings = 0;
  SolveContext context;
  context.now = [&readings] { return absl::UnixEpoch() + absl::Milliseconds(7 * ++readings); };
  absl::StatusOr<v1::Placement> placement = Solve(*model, options, context);
  ASSERT_TRUE(placement.ok()) << placement.status();
  EXPECT_EQ(placement->provenance().solve_ns(), 7'000'000);
  EXPECT_EQ(readings, 2);
}

TEST(SolveTest, EveryAlgorithmGivesAFeasiblePlacementOfASmallGraph) {
  const v1::PlaceRequest request = TwoOpRequest();
  absl::StatusOr<Model> model = BuildModel(request);
  ASSERT_TRUE(model.ok()) << model.status();
  for (const Partitioner* algorithm : AlgorithmRegistry::Default().All()) {
    v1::PlacementOptions options;
    options.set_algorithm(std::string(algorithm->name()));
    absl::StatusOr<v1::Placement> placement = Solve(*model, options, SolveContext());
    ASSERT_TRUE(placement.ok()) << algorithm->name() << ": " << placement.status();
    EXPECT_EQ(placement->outcome(), v1::FEASIBLE) << algorithm->name();
    // Both ops on one device is optimal here: 150 ns, no transfer.
    EXPECT_LE(placement->metrics().makespan_ns(), 1155) << algorithm->name();
  }
}

TEST(SolveTest, UnknownAlgorithmIsInvalidArgument) {
  absl::StatusOr<Model> model = BuildModel(TwoOpRequest());
  ASSERT_TRUE(model.ok()) << model.status();
  v1::PlacementOptions options;
  options.set_algorithm("simulated_annealing");
  absl::StatusOr<v1::Placement> placement = Solve(*model, options, SolveContext());
  ASSERT_FALSE(placement.ok());
  EXPECT_EQ(placement.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(placement.status().message()), HasSubstr("options.algorithm"));
  EXPECT_THAT(std::string(placement.status().message()), HasSubstr("round_robin"));
  // The violation travels as data too.
  const std::vector<FieldViolation> violations = ViolationsOf(placement.status());
  ASSERT_EQ(violations.size(), 1u);
  EXPECT_EQ(violations[0].field, "options.algorithm");
  EXPECT_THAT(violations[0].description, HasSubstr("unknown algorithm \"simulated_annealing\""));
}

TEST(SolveTest, InfeasibleReasonNamesDeviceAndBytesShort) {
  v1::PlaceRequest request = TwoOpRequest();
  request.mutable_cluster()->mutable_devices(1)->set_memory_bytes(1000);
  absl::StatusOr<Model> model = BuildModel(request);
  ASSERT_TRUE(model.ok()) << model.status();
  // Both on d1: persistent 1100 bytes > 1000.
  const v1::Placement placement = ScoreAssignment(*model, Assignment{1, 1});
  EXPECT_EQ(placement.outcome(), v1::INFEASIBLE);
  EXPECT_THAT(placement.reason(), HasSubstr("\"d1\""));
  EXPECT_THAT(placement.reason(), HasSubstr("100 bytes short"));
}

TEST(EvaluateTest, ScoresTheCallersAssignment) {
  const v1::PlaceRequest request = TwoOpRequest();
  v1::EvaluateRequest evaluate;
  *evaluate.mutable_graph() = request.graph();
  *evaluate.mutable_cluster() = request.cluster();
  evaluate.add_device(1);  // zeta
  evaluate.add_device(0);  // alpha
  absl::StatusOr<v1::EvaluateResponse> response = Evaluate(evaluate);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->placement().outcome(), v1::FEASIBLE);
  EXPECT_EQ(response->placement().device(0), 1);
  EXPECT_EQ(response->placement().metrics().makespan_ns(), 1155);
  // d1 holds zeta's weights; d0 holds alpha's weights plus the received 1000-byte copy.
  EXPECT_EQ(response->placement().metrics().devices(1).peak_memory_bytes(), 600);
  EXPECT_EQ(response->placement().metrics().devices(0).peak_memory_bytes(), 500 + 1000);
  EXPECT_TRUE(response->violations().empty());
}

TEST(EvaluateTest, RejectsOutOfRangeDevicesWithFieldPaths) {
  const v1::PlaceRequest request = TwoOpRequest();
  v1::EvaluateRequest evaluate;
  *evaluate.mutable_graph() = request.graph();
  *evaluate.mutable_cluster() = request.cluster();
  evaluate.add_device(0);
  evaluate.add_device(7);
  absl::StatusOr<v1::EvaluateResponse> response = Evaluate(evaluate);
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(response.status().message()), HasSubstr("device[1]"));
  EXPECT_THAT(std::string(response.status().message()), HasSubstr("7 out of range"));
}

TEST(EvaluateTest, RejectsWrongLength) {
  const v1::PlaceRequest request = TwoOpRequest();
  v1::EvaluateRequest evaluate;
  *evaluate.mutable_graph() = request.graph();
  *evaluate.mutable_cluster() = request.cluster();
  evaluate.add_device(0);
  absl::StatusOr<v1::EvaluateResponse> response = Evaluate(evaluate);
  ASSERT_FALSE(response.ok());
  EXPECT_THAT(std::string(response.status().message()), HasSubstr("device: has 1 entries"));
}

TEST(EvaluateTest, ReportsConstraintViolationsByRequestIndex) {
  v1::PlaceRequest request = TwoOpRequest();
  request.mutable_graph()->mutable_ops(1)->set_pinned_device("d0");  // alpha pinned to d0
  v1::EvaluateRequest evaluate;
  *evaluate.mutable_graph() = request.graph();
  *evaluate.mutable_cluster() = request.cluster();
  evaluate.add_device(0);
  evaluate.add_device(1);
  absl::StatusOr<v1::EvaluateResponse> response = Evaluate(evaluate);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->placement().outcome(), v1::INFEASIBLE);
  ASSERT_EQ(response->violations_size(), 1);
  EXPECT_EQ(response->violations(0).field(), "device[1]");
}

TEST(RegistryTest, OffersEveryApiAlgorithmWithAutoAsDefault) {
  const AlgorithmRegistry& registry = AlgorithmRegistry::Default();
  for (const char* name : {"pardnn", "m_etf", "m_topo", "heft", "metis", "pipeline", "stages", "round_robin",
                           "single_device", "auto"}) {
    absl::StatusOr<const Partitioner*> found = registry.Find(name);
    ASSERT_TRUE(found.ok()) << name;
    EXPECT_EQ((*found)->name(), name);
  }
  EXPECT_EQ(registry.Find("").value(), registry.Find("auto").value());
  EXPECT_EQ(registry.All().front()->name(), "pardnn");
  EXPECT_EQ(registry.All().back()->name(), "auto");
  // auto's re-placement asks every member, pardnn without refinement and re-timing, stages without
  // its exact search (neither listed).
  EXPECT_THAT(std::string(registry.Find("auto").value()->version()),
              ::testing::EndsWith(";replace@4:pardnn@11-quick,m_etf@1,m_topo@1,heft@1,metis@1,pipeline@2,stages@1-chains,"
                                  "round_robin@1,single_device@1"));
  EXPECT_FALSE(registry.Find("testing_wait").ok());  // only when asked for
  const absl::Status unknown = registry.Find("no_such_algorithm", "--algorithms").status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unknown.message()), HasSubstr("--algorithms: unknown algorithm"));
  const auto& all = registry.All();
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_FALSE(all[i]->version().empty());
    EXPECT_FALSE(all[i]->description().empty());
    for (size_t j = i + 1; j < all.size(); ++j) EXPECT_NE(all[i]->name(), all[j]->name());
  }
}

TEST(RegistryTest, TestingAlgorithmsComeThroughOptionsAfterTheEnginesOwn) {
  AlgorithmRegistry registry({.include_testing_algorithms = true});
  const size_t own = AlgorithmRegistry::Default().All().size();
  ASSERT_EQ(registry.All().size(), own + 3);
  EXPECT_EQ(registry.All()[own - 1]->name(), "auto");
  absl::StatusOr<Model> model = BuildModel(TwoOpRequest());
  ASSERT_TRUE(model.ok()) << model.status();
  v1::PlacementOptions options;

  // testing_wait: until its deadline, then v mod D, scored like any answer and cut short.
  options.set_algorithm("testing_wait");
  SolveContext context;
  context.deadline = absl::Now() + absl::Milliseconds(20);
  absl::StatusOr<v1::Placement> waited = Solve(*model, options, context, registry);
  ASSERT_TRUE(waited.ok()) << waited.status();
  EXPECT_TRUE(waited->provenance().time_limited());
  EXPECT_EQ(waited->provenance().algorithm(), "testing_wait");
  EXPECT_EQ(waited->provenance().request_digest(),
            RequestDigestFor(*model, *registry.Find("testing_wait").value(), options));

  options.set_algorithm("testing_throw");
  EXPECT_THROW((void)Solve(*model, options, SolveContext(), registry), std::runtime_error);

  options.set_algorithm("testing_overrun");
  std::atomic<bool> cancelled{true};
  SolveContext cancelled_context;
  cancelled_context.cancelled = &cancelled;
  EXPECT_EQ(Solve(*model, options, cancelled_context, registry).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

// ---- Training plans (api.md §2.1) ----

// A 4-stage chain a -> b -> c -> d (100 ns each, 64-byte edges) on four devices of one host, with
// `microbatches` microbatches.
v1::PlaceRequest ChainRequest(int32_t microbatches) {
  v1::PlaceRequest request;
  const char* names[] = {"a", "b", "c", "d"};
  for (const char* name : names) {
    v1::Op* op = request.mutable_graph()->add_ops();
    op->set_name(name);
    op->set_compute_ns(100);
    op->set_output_bytes(64);
  }
  for (int i = 0; i + 1 < 4; ++i) {
    v1::Edge* edge = request.mutable_graph()->add_edges();
    edge->set_src(i);
    edge->set_dst(i + 1);
    edge->set_bytes(64);
  }
  for (const char* name : {"g0", "g1", "g2", "g3"}) {
    v1::Device* device = request.mutable_cluster()->add_devices();
    device->set_name(name);
    device->set_kind("gpu");
    device->set_node("h0");
    device->set_memory_bytes(1 << 20);
  }
  request.mutable_cluster()->mutable_intra_node()->set_bandwidth_bytes_per_second(1'000'000'000);
  request.mutable_options()->set_microbatches(microbatches);
  return request;
}

// Solves `request` with `algorithm` (its own plan options kept).
absl::StatusOr<v1::Placement> SolveWith(const v1::PlaceRequest& request, const std::string& algorithm) {
  absl::StatusOr<Model> model = BuildModel(request);
  if (!model.ok()) return model.status();
  v1::PlacementOptions options = request.options();
  options.set_algorithm(algorithm);
  return Solve(*model, options, SolveContext());
}

// An EvaluateRequest of `request`'s graph, cluster and options for `device`.
v1::EvaluateRequest EvaluateRequestFor(const v1::PlaceRequest& request,
                                       const google::protobuf::RepeatedField<int32_t>& device) {
  v1::EvaluateRequest evaluate;
  *evaluate.mutable_graph() = request.graph();
  *evaluate.mutable_cluster() = request.cluster();
  *evaluate.mutable_options() = request.options();
  *evaluate.mutable_device() = device;
  return evaluate;
}

TEST(SolvePlanTest, ThePlanUsedIsReportedWithItsThroughput) {
  v1::PlaceRequest request = ChainRequest(8);
  request.mutable_options()->set_max_in_flight(3);
  absl::StatusOr<v1::Placement> placement = SolveWith(request, "round_robin");
  ASSERT_TRUE(placement.ok()) << placement.status();
  EXPECT_EQ(placement->plan().microbatches(), 8);
  EXPECT_EQ(placement->plan().max_in_flight(), 3);
  EXPECT_EQ(placement->plan().data_parallel(), 1);
  ASSERT_GT(placement->metrics().makespan_ns(), 0);
  EXPECT_DOUBLE_EQ(placement->metrics().microbatches_per_second(),
                   8 * 1e9 / static_cast<double>(placement->metrics().makespan_ns()));
  // Lower bound: the work of 8 microbatches over 4 devices, 8 × 400 / 4.
  EXPECT_EQ(placement->metrics().lower_bound_ns(), 800);
}

// W left to the solver: the answer's window is the fastest of every window for its assignment.
TEST(SolvePlanTest, AnOpenWindowIsTheFastestThatFits) {
  const v1::PlaceRequest request = ChainRequest(6);
  absl::StatusOr<v1::Placement> placement = SolveWith(request, "round_robin");
  ASSERT_TRUE(placement.ok()) << placement.status();
  int64_t fastest = INT64_MAX;
  for (int32_t w = 1; w <= 6; ++w) {
    v1::EvaluateRequest evaluate = EvaluateRequestFor(request, placement->device());
    evaluate.mutable_options()->set_max_in_flight(w);
    absl::StatusOr<v1::EvaluateResponse> scored = Evaluate(evaluate);
    ASSERT_TRUE(scored.ok()) << scored.status();
    EXPECT_EQ(scored->placement().plan().max_in_flight(), w);
    fastest = std::min(fastest, scored->placement().metrics().makespan_ns());
  }
  EXPECT_EQ(placement->metrics().makespan_ns(), fastest);
}

// D left to the solver: pure replication of a chain with no update (no all-reduce) delivers the most
// microbatches per second, so D = 4 (one device per replica) wins; the placement indexes group 0.
TEST(SolvePlanTest, AnOpenReplicaCountIsChosenByThroughput) {
  v1::PlaceRequest request = ChainRequest(4);
  request.mutable_options()->set_data_parallel(0);
  absl::StatusOr<v1::Placement> placement = SolveWith(request, "single_device");
  ASSERT_TRUE(placement.ok()) << placement.status();
  EXPECT_EQ(placement->plan().data_parallel(), 4);
  EXPECT_EQ(placement->metrics().devices_size(), 1);
  for (int32_t d : placement->device()) EXPECT_EQ(d, 0);
  // One device runs 4 microbatches of 400 ns: 1600 ns; 4 replicas: 16 microbatches per 1.6 us.
  EXPECT_EQ(placement->metrics().makespan_ns(), 1600);
  EXPECT_DOUBLE_EQ(placement->metrics().microbatches_per_second(), 16 * 1e9 / 1600);
}

TEST(SolvePlanTest, EvaluateChecksDevicesAgainstReplicaGroupZero) {
  v1::PlaceRequest request = ChainRequest(2);
  google::protobuf::RepeatedField<int32_t> devices;
  for (int32_t d : {0, 1, 3, 0}) devices.Add(d);
  v1::EvaluateRequest evaluate = EvaluateRequestFor(request, devices);
  evaluate.mutable_options()->set_data_parallel(2);
  absl::StatusOr<v1::EvaluateResponse> scored = Evaluate(evaluate);
  ASSERT_FALSE(scored.ok());
  EXPECT_EQ(scored.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(scored.status().message(),
              HasSubstr("device[2]: index 3 is outside replica group 0 (the first 2 of 4 devices with "
                        "options.data_parallel 2)"));
  evaluate.set_device(2, 1);
  scored = Evaluate(evaluate);
  ASSERT_TRUE(scored.ok()) << scored.status();
  EXPECT_EQ(scored->placement().plan().data_parallel(), 2);
  EXPECT_EQ(scored->placement().metrics().devices_size(), 2);
}

// `auto` under a plan is never worse than its members run alone under the same plan (fits first, then
// the step), also when memory binds and only small windows fit.
TEST(SolvePlanTest, AutoUnderAPlanIsNeverWorseThanAMember) {
  for (const int64_t memory : {int64_t{1} << 20, int64_t{400}, int64_t{260}}) {
    v1::PlaceRequest request = ChainRequest(8);
    for (v1::Device& device : *request.mutable_cluster()->mutable_devices()) {
      device.set_memory_bytes(memory);
    }
    absl::StatusOr<v1::Placement> best = SolveWith(request, "auto");
    ASSERT_TRUE(best.ok()) << best.status();
    for (const char* member : {"pardnn", "pipeline", "round_robin", "heft", "m_etf", "metis"}) {
      absl::StatusOr<v1::Placement> alone = SolveWith(request, member);
      ASSERT_TRUE(alone.ok()) << alone.status();
      if (alone->outcome() == v1::FEASIBLE) {
        EXPECT_EQ(best->outcome(), v1::FEASIBLE) << member << " at " << memory << " bytes";
        EXPECT_LE(best->metrics().makespan_ns(), alone->metrics().makespan_ns())
            << member << " at " << memory << " bytes";
      }
    }
  }
}

}  // namespace
}  // namespace placement::engine
