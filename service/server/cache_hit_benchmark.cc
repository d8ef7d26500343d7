// cache_hit_benchmark — latency of a cache hit on a large graph against an echo RPC that carries the
// same request bytes, measured in one run on one machine (issue 6's target: hit ≤ 1.5 × echo).
//
// Both servers run in this process on 127.0.0.1 with real sockets: the placement server (log and metrics
// off) and an "echo" PlacementService whose Place does no work — gRPC parses the same request and it
// returns the same response bytes the hit returns. The difference is what the placement service adds
// to a hit. Two variants: "cache hit" is the server as configured (a byte-identical repeat takes the
// fingerprint fast path: SHA-256 of the request, two lookups, mapping to the caller's op order);
// "hit (full)" is a server with that fast path off (validation, compact model and request digest on
// every call — what a hit of the same graph in another op order costs).
//
//   placement_cache_hit_benchmark [--ops=10000] [--calls=400] [--concurrency=2] [--algorithm=round_robin]
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "placement/v1/placement_service.grpc.pb.h"
#include "service/server/placement_server.h"
#include "tests/testutil/random_graph.h"

ABSL_FLAG(int, ops, 10000, "Ops in the graph.");
ABSL_FLAG(double, degree, 2.5, "Average out-degree of the graph.");
ABSL_FLAG(int, calls, 400, "Timed calls per kind in the latency phase (sequential).");
ABSL_FLAG(int, throughput_calls, 800, "Calls per kind in the throughput phase.");
ABSL_FLAG(int, concurrency, 2, "Concurrent callers in the throughput phase.");
ABSL_FLAG(std::string, algorithm, "round_robin",
          "Algorithm of the cached result (does not change the cost of a hit).");

namespace {

using placement::v1::PlaceRequest;
using placement::v1::PlaceResponse;
using placement::v1::PlacementService;

// Answers every Place with a fixed response, doing no work of its own.
class EchoService final : public PlacementService::CallbackService {
 public:
  explicit EchoService(PlaceResponse response) : response_(std::move(response)) {}
  grpc::ServerUnaryReactor* Place(grpc::CallbackServerContext* context, const PlaceRequest*,
                                  PlaceResponse* response) override {
    *response = response_;
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  const PlaceResponse response_;
};

std::shared_ptr<grpc::Channel> Channel(int port) {
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(256 << 20);
  arguments.SetMaxSendMessageSize(256 << 20);
  // A separate connection per caller, as separate clients would have.
  arguments.SetInt("grpc.use_local_subchannel_pool", 1);
  return grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                   grpc::InsecureChannelCredentials(), arguments);
}

absl::Duration Call(PlacementService::Stub& stub, const PlaceRequest& request,
                    PlaceResponse* response) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  const absl::Time start = absl::Now();
  grpc::Status status = stub.Place(&context, request, response);
  const absl::Duration took = absl::Now() - start;
  if (!status.ok()) {
    std::fprintf(stderr, "Place failed: %s\n", status.error_message().c_str());
    std::exit(1);
  }
  return took;
}

double Percentile(std::vector<absl::Duration> samples, double p) {
  std::sort(samples.begin(), samples.end());
  const size_t index = std::min(samples.size() - 1,
                                static_cast<size_t>(p * static_cast<double>(samples.size())));
  return absl::ToDoubleMicroseconds(samples[index]);
}

// Requests per second with `concurrency` callers making `calls` calls in all.
double Throughput(int port, const PlaceRequest& request, int calls, int concurrency) {
  std::atomic<int> next{0};
  std::vector<std::thread> callers;
  const absl::Time start = absl::Now();
  for (int c = 0; c < concurrency; ++c) {
    callers.emplace_back([&] {
      std::unique_ptr<PlacementService::Stub> stub = PlacementService::NewStub(Channel(port));
      PlaceResponse response;
      while (next.fetch_add(1) < calls) Call(*stub, request, &response);
    });
  }
  for (std::thread& caller : callers) caller.join();
  return calls / absl::ToDoubleSeconds(absl::Now() - start);
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);

  placement::testutil::RandomGraphOptions graph;
  graph.num_ops = absl::GetFlag(FLAGS_ops);
  graph.avg_out_degree = absl::GetFlag(FLAGS_degree);
  graph.num_devices = 8;
  graph.num_nodes = 2;
  graph.algorithm = absl::GetFlag(FLAGS_algorithm);
  graph.seed = 42;
  const PlaceRequest request = placement::testutil::RandomLayeredRequest(graph);

  placement::server::PlacementServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.metrics_port = -1;
  options.log_requests = false;
  options.security.insecure = true;  // loopback benchmark
  placement::server::PlacementServer server(options);
  if (!server.Start().ok()) return 1;
  // The same server without the repeat fast path: every hit is validated, modelled and digested.
  placement::server::PlacementServerOptions full_options = options;
  full_options.core.repeat_index_bytes = 0;
  placement::server::PlacementServer full_server(full_options);
  if (!full_server.Start().ok()) return 1;

  std::unique_ptr<PlacementService::Stub> placement = PlacementService::NewStub(Channel(server.port()));
  PlaceResponse hit;
  Call(*placement, request, &hit);  // computes and caches it
  Call(*placement, request, &hit);
  if (hit.placement().provenance().cache() != placement::v1::HIT) {
    std::fprintf(stderr, "expected a cache hit\n");
    return 1;
  }

  std::unique_ptr<PlacementService::Stub> full =
      PlacementService::NewStub(Channel(full_server.port()));
  PlaceResponse full_hit;
  Call(*full, request, &full_hit);
  Call(*full, request, &full_hit);
  if (full_hit.placement().provenance().cache() != placement::v1::HIT) return 1;

  EchoService echo_service(hit);
  grpc::ServerBuilder builder;
  int echo_port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &echo_port);
  builder.RegisterService(&echo_service);
  builder.SetMaxReceiveMessageSize(256 << 20);
  builder.SetMaxSendMessageSize(256 << 20);
  std::unique_ptr<grpc::Server> echo = builder.BuildAndStart();
  std::unique_ptr<PlacementService::Stub> echo_stub = PlacementService::NewStub(Channel(echo_port));

  std::printf("request: %d ops, %d edges, %zu bytes; response: %zu bytes\n",
              request.graph().ops_size(), request.graph().edges_size(), request.ByteSizeLong(),
              hit.ByteSizeLong());

  // Latency: alternate blocks of sequential calls so both kinds see the same machine noise.
  PlaceResponse response;
  for (int i = 0; i < 20; ++i) {  // warm-up
    Call(*placement, request, &response);
    Call(*echo_stub, request, &response);
    Call(*full, request, &response);
  }
  std::vector<absl::Duration> full_times;
  std::vector<absl::Duration> hit_times;
  std::vector<absl::Duration> echo_times;
  const int calls = absl::GetFlag(FLAGS_calls);
  constexpr int kBlock = 20;
  for (int done = 0; done < calls; done += kBlock) {
    for (int i = 0; i < kBlock; ++i) hit_times.push_back(Call(*placement, request, &response));
    for (int i = 0; i < kBlock; ++i) echo_times.push_back(Call(*echo_stub, request, &response));
    for (int i = 0; i < kBlock; ++i) full_times.push_back(Call(*full, request, &response));
  }
  const double full_p50 = Percentile(full_times, 0.50);
  const double full_p99 = Percentile(full_times, 0.99);
  const double hit_p50 = Percentile(hit_times, 0.50);
  const double hit_p99 = Percentile(hit_times, 0.99);
  const double echo_p50 = Percentile(echo_times, 0.50);
  const double echo_p99 = Percentile(echo_times, 0.99);

  const int throughput_calls = absl::GetFlag(FLAGS_throughput_calls);
  const int concurrency = absl::GetFlag(FLAGS_concurrency);
  const double echo_rps = Throughput(echo_port, request, throughput_calls, concurrency);
  const double hit_rps = Throughput(server.port(), request, throughput_calls, concurrency);
  const double full_rps = Throughput(full_server.port(), request, throughput_calls, concurrency);

  std::printf("%-10s %12s %12s %14s\n", "kind", "p50 (us)", "p99 (us)", "requests/s");
  std::printf("%-10s %12.0f %12.0f %14.0f\n", "cache hit", hit_p50, hit_p99, hit_rps);
  std::printf("%-10s %12.0f %12.0f %14.0f\n", "echo", echo_p50, echo_p99, echo_rps);
  std::printf("%-10s %12.0f %12.0f %14.0f\n", "hit (full)", full_p50, full_p99, full_rps);
  std::printf("ratio hit/echo: p50 %.2f, p99 %.2f, throughput %.2f (echo/hit)\n",
              hit_p50 / echo_p50, hit_p99 / echo_p99, echo_rps / hit_rps);
  std::printf("ratio full-path hit/echo: p50 %.2f, p99 %.2f, throughput %.2f (echo/hit)\n",
              full_p50 / echo_p50, full_p99 / echo_p99, echo_rps / full_rps);

  echo->Shutdown(std::chrono::system_clock::now());
  full_server.Shutdown();
  server.Shutdown();
  return 0;
}
