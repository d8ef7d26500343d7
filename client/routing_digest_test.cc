#include "client/routing_digest.h"

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/synchronization/mutex.h"
#include "client/placement_client.h"
#include "gtest/gtest.h"
#include "tests/testutil/random_graph.h"

namespace placement::client {
namespace {

v1::PlaceRequest SmallRequest(const std::string& algorithm = "", uint64_t graph_seed = 1) {
  testutil::RandomGraphOptions options;
  options.num_ops = 60;
  options.seed = graph_seed;
  options.algorithm = algorithm;
  return testutil::RandomLayeredRequest(options);
}

TEST(RoutingDigestTest, SameRequestSameKey) {
  const v1::PlaceRequest request = SmallRequest();
  absl::StatusOr<std::string> first = RoutingDigestOf(request);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->size(), 64u);
  EXPECT_EQ(first->find_first_not_of("0123456789abcdef"), std::string::npos) << *first;
  EXPECT_EQ(RoutingDigestOf(SmallRequest()).value(), *first);
}

TEST(RoutingDigestTest, SameContentInAnotherOrderIsTheSameKey) {
  for (const std::string algorithm : {"", "pardnn", "heft"}) {
    const v1::PlaceRequest request = SmallRequest(algorithm);
    for (uint64_t shuffle_seed : {7, 8, 9}) {
      const v1::PlaceRequest shuffled = testutil::ShuffleRequest(request, shuffle_seed);
      ASSERT_NE(request.SerializeAsString(), shuffled.SerializeAsString());
      EXPECT_EQ(RoutingDigestOf(request).value(), RoutingDigestOf(shuffled).value())
          << algorithm << " shuffle " << shuffle_seed;
    }
  }
}

TEST(RoutingDigestTest, AnotherGraphClusterAlgorithmOrSeedIsAnotherKey) {
  const v1::PlaceRequest request = SmallRequest();
  const std::string base = RoutingDigestOf(request).value();

  EXPECT_NE(RoutingDigestOf(SmallRequest("", /*graph_seed=*/2)).value(), base);
  v1::PlaceRequest slower_op = request;
  slower_op.mutable_graph()->mutable_ops(0)->set_compute_ns(request.graph().ops(0).compute_ns() + 1);
  EXPECT_NE(RoutingDigestOf(slower_op).value(), base);
  v1::PlaceRequest smaller_device = request;
  smaller_device.mutable_cluster()->mutable_devices(0)->set_memory_bytes(
      request.cluster().devices(0).memory_bytes() - 1);
  EXPECT_NE(RoutingDigestOf(smaller_device).value(), base);
  v1::PlaceRequest other_seed = request;
  other_seed.mutable_options()->set_seed(request.options().seed() + 1);
  EXPECT_NE(RoutingDigestOf(other_seed).value(), base);
  v1::PlaceRequest other_algorithm = request;
  other_algorithm.mutable_options()->set_algorithm("m_topo");
  EXPECT_NE(RoutingDigestOf(other_algorithm).value(), base);
}

// The name is hashed as written: the client does not know which algorithm "" resolves to, nor which
// names the server offers.
TEST(RoutingDigestTest, AlgorithmNameIsTakenAsWritten) {
  const std::string unnamed = RoutingDigestOf(SmallRequest("")).value();
  const std::string named = RoutingDigestOf(SmallRequest("auto")).value();
  EXPECT_NE(unnamed, named);
  absl::StatusOr<std::string> unknown = RoutingDigestOf(SmallRequest("no_such_algorithm"));
  ASSERT_TRUE(unknown.ok()) << unknown.status();
  EXPECT_NE(*unknown, unnamed);
}

TEST(RoutingDigestTest, InvalidRequestsHaveNoKey) {
  v1::PlaceRequest broken = SmallRequest();
  broken.mutable_graph()->mutable_edges(0)->set_dst(1 << 30);
  absl::StatusOr<std::string> digest = RoutingDigestOf(broken);
  EXPECT_EQ(digest.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(digest.status().message().find("graph.edges[0].dst"), absl::string_view::npos)
      << digest.status();
  v1::PlaceRequest no_devices = SmallRequest();
  no_devices.mutable_cluster()->clear_devices();
  EXPECT_EQ(RoutingDigestOf(no_devices).status().code(), absl::StatusCode::kInvalidArgument);
}

// A PlacementService that records the digest header of each Place call.
class RecordingService final : public v1::PlacementService::Service {
 public:
  grpc::Status Place(grpc::ServerContext* context, const v1::PlaceRequest*,
                     v1::PlaceResponse*) override {
    const auto& metadata = context->client_metadata();
    auto it = metadata.find(kDigestHeader);
    absl::MutexLock lock(&mu_);
    headers_.push_back(it == metadata.end() ? "<none>"
                                            : std::string(it->second.data(), it->second.size()));
    return grpc::Status::OK;
  }
  std::vector<std::string> headers() {
    absl::MutexLock lock(&mu_);
    return headers_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> headers_;
};

TEST(RoutingDigestTest, ClientSendsTheDigestHeaderWhenAsked) {
  RecordingService service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  const std::string target = "127.0.0.1:" + std::to_string(port);
  const v1::PlaceRequest request = SmallRequest();

  ClientOptions options;
  options.target = target;
  options.routing_digest = RoutingDigestOf;
  PlacementClient routed(options);
  ASSERT_TRUE(routed.Place(request, absl::Seconds(10)).ok());
  ClientOptions plain_options;
  plain_options.target = target;
  PlacementClient plain(plain_options);
  ASSERT_TRUE(plain.Place(request, absl::Seconds(10)).ok());
  server->Shutdown();

  const std::vector<std::string> headers = service.headers();
  ASSERT_EQ(headers.size(), 2u);
  EXPECT_EQ(headers[0], RoutingDigestOf(request).value());
  EXPECT_EQ(headers[1], "<none>");
}

}  // namespace
}  // namespace placement::client
