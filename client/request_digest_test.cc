#include "client/request_digest.h"

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/synchronization/mutex.h"
#include "client/placement_client.h"
#include "gtest/gtest.h"
#include "service/engine/model/model_builder.h"
#include "service/core/algorithm_catalog.h"
#include "tests/testutil/random_graph.h"

namespace placement::client {
namespace {

v1::PlaceRequest SmallRequest(const std::string& algorithm = "") {
  testutil::RandomGraphOptions options;
  options.num_ops = 60;
  options.algorithm = algorithm;
  return testutil::RandomLayeredRequest(options);
}

// What the server caches under (PlacementCore::Prepare → Algorithm::RequestDigest).
std::string ServerDigest(const v1::PlaceRequest& request) {
  core::AlgorithmCatalog catalog;
  absl::StatusOr<engine::Model> model = engine::BuildModel(request);
  EXPECT_TRUE(model.ok()) << model.status();
  absl::StatusOr<const core::Algorithm*> algorithm = catalog.Find(request.options().algorithm());
  EXPECT_TRUE(algorithm.ok()) << algorithm.status();
  return (*algorithm)->RequestDigest(*model, request.options());
}

TEST(RequestDigestTest, EqualsTheServersDigest) {
  for (const std::string algorithm : {"", "pardnn", "m_etf", "heft"}) {
    const v1::PlaceRequest request = SmallRequest(algorithm);
    absl::StatusOr<std::string> digest = RequestDigestOf(request);
    ASSERT_TRUE(digest.ok()) << digest.status();
    EXPECT_EQ(digest->size(), 64u);
    EXPECT_EQ(*digest, ServerDigest(request)) << algorithm;
  }
}

TEST(RequestDigestTest, SameContentInAnotherOrderIsTheSameKey) {
  const v1::PlaceRequest request = SmallRequest();
  const v1::PlaceRequest shuffled = testutil::ShuffleRequest(request, 7);
  ASSERT_NE(request.SerializeAsString(), shuffled.SerializeAsString());
  EXPECT_EQ(RequestDigestOf(request).value(), RequestDigestOf(shuffled).value());
}

TEST(RequestDigestTest, ResultChangingOptionsChangeTheKey) {
  v1::PlaceRequest request = SmallRequest();
  const std::string base = RequestDigestOf(request).value();
  v1::PlaceRequest other_seed = request;
  other_seed.mutable_options()->set_seed(request.options().seed() + 1);
  EXPECT_NE(RequestDigestOf(other_seed).value(), base);
  v1::PlaceRequest other_algorithm = request;
  other_algorithm.mutable_options()->set_algorithm("m_topo");
  EXPECT_NE(RequestDigestOf(other_algorithm).value(), base);
}

TEST(RequestDigestTest, InvalidRequestsHaveNoKey) {
  v1::PlaceRequest unknown = SmallRequest("no_such_algorithm");
  EXPECT_EQ(RequestDigestOf(unknown).status().code(), absl::StatusCode::kInvalidArgument);
  v1::PlaceRequest broken = SmallRequest();
  broken.mutable_graph()->mutable_edges(0)->set_dst(1 << 30);
  EXPECT_EQ(RequestDigestOf(broken).status().code(), absl::StatusCode::kInvalidArgument);
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

TEST(RequestDigestTest, ClientSendsTheDigestHeaderWhenAsked) {
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
  options.routing_digest = RequestDigestOf;
  PlacementClient routed(options);
  ASSERT_TRUE(routed.Place(request, absl::Seconds(10)).ok());
  ClientOptions plain_options;
  plain_options.target = target;
  PlacementClient plain(plain_options);
  ASSERT_TRUE(plain.Place(request, absl::Seconds(10)).ok());
  server->Shutdown();

  const std::vector<std::string> headers = service.headers();
  ASSERT_EQ(headers.size(), 2u);
  EXPECT_EQ(headers[0], RequestDigestOf(request).value());
  EXPECT_EQ(headers[1], "<none>");
}

}  // namespace
}  // namespace placement::client
