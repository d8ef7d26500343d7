// cache_hit_benchmark — latency of a cache hit on a large graph against an echo RPC that carries the
// same request bytes, measured in one run on one machine (issue 21's target: hit ≤ 1.3 × echo at p50
// and p99, for Place and SubmitPlacement alike).
//
// Both servers run in this process on 127.0.0.1 with real sockets: the placement server (log and metrics
// off) and an "echo" PlacementService whose Place and SubmitPlacement do no work — gRPC parses the same
// request and it returns the same response bytes the hit returns. The difference is what the placement
// service adds to a hit. Kinds: "place hit" and "submit hit" are the server as configured (a
// byte-identical repeat is answered from the bytes received: SHA-256 of them, two lookups, mapping to
// the caller's op order — nothing decoded); "place (full)" is a server with that fast path off
// (decoding, validation, compact model and request digest on every call — what a hit of the same graph
// in another op order costs).
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
using placement::v1::SubmitPlacementRequest;
using placement::v1::SubmitPlacementResponse;

// Answers every Place and SubmitPlacement with a fixed response, doing no work of its own.
class EchoService final : public PlacementService::CallbackService {
 public:
  EchoService(PlaceResponse place, SubmitPlacementResponse submit)
      : place_(std::move(place)), submit_(std::move(submit)) {}
  grpc::ServerUnaryReactor* Place(grpc::CallbackServerContext* context, const PlaceRequest*,
                                  PlaceResponse* response) override {
    *response = place_;
    return Done(context);
  }
  grpc::ServerUnaryReactor* SubmitPlacement(grpc::CallbackServerContext* context,
                                            const SubmitPlacementRequest*,
                                            SubmitPlacementResponse* response) override {
    *response = submit_;
    return Done(context);
  }

 private:
  static grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* context) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  const PlaceResponse place_;
  const SubmitPlacementResponse submit_;
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

// One kind of call that is timed: an RPC (Place or SubmitPlacement) on one server.
struct Kind {
  const char* label;
  int port;
  bool submit;
  std::unique_ptr<PlacementService::Stub> stub;
  std::vector<absl::Duration> times;
};

// One call of `kind` with `request`; exits on failure or when a hit was expected and not given.
absl::Duration Call(PlacementService::Stub& stub, bool submit, const PlaceRequest& request,
                    const SubmitPlacementRequest& submit_request, bool expect_hit = false) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  PlaceResponse placed;
  SubmitPlacementResponse submitted;
  const absl::Time start = absl::Now();
  grpc::Status status = submit ? stub.SubmitPlacement(&context, submit_request, &submitted)
                               : stub.Place(&context, request, &placed);
  const absl::Duration took = absl::Now() - start;
  if (!status.ok()) {
    std::fprintf(stderr, "%s failed: %s\n", submit ? "SubmitPlacement" : "Place",
                 status.error_message().c_str());
    std::exit(1);
  }
  const placement::v1::Placement& placement =
      submit ? submitted.operation().response().placement() : placed.placement();
  if (expect_hit && placement.provenance().cache() != placement::v1::HIT) {
    std::fprintf(stderr, "expected a cache hit\n");
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

// Requests per second with `concurrency` callers making `calls` calls of `kind` in all.
double Throughput(const Kind& kind, const PlaceRequest& request,
                  const SubmitPlacementRequest& submit_request, int calls, int concurrency) {
  std::atomic<int> next{0};
  std::vector<std::thread> callers;
  const absl::Time start = absl::Now();
  for (int c = 0; c < concurrency; ++c) {
    callers.emplace_back([&] {
      std::unique_ptr<PlacementService::Stub> stub = PlacementService::NewStub(Channel(kind.port));
      while (next.fetch_add(1) < calls) Call(*stub, kind.submit, request, submit_request);
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
  SubmitPlacementRequest submit_request;
  *submit_request.mutable_request() = request;

  placement::server::PlacementServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.metrics_port = -1;
  options.log_requests = false;
  options.security.insecure = true;  // loopback benchmark
  placement::server::PlacementServer server(options);
  if (!server.Start().ok()) return 1;
  // The same server without the repeat fast path: every hit is decoded, validated, modelled and
  // digested.
  placement::server::PlacementServerOptions full_options = options;
  full_options.core.repeat_index_bytes = 0;
  placement::server::PlacementServer full_server(full_options);
  if (!full_server.Start().ok()) return 1;

  // Computes and caches the answer on both servers; the responses the echo returns are the hits'.
  PlaceResponse hit;
  SubmitPlacementResponse submitted;
  for (int port : {server.port(), full_server.port()}) {
    std::unique_ptr<PlacementService::Stub> stub = PlacementService::NewStub(Channel(port));
    Call(*stub, /*submit=*/false, request, submit_request);
    Call(*stub, /*submit=*/false, request, submit_request, /*expect_hit=*/true);
    Call(*stub, /*submit=*/true, request, submit_request, /*expect_hit=*/true);
  }
  {
    std::unique_ptr<PlacementService::Stub> stub = PlacementService::NewStub(Channel(server.port()));
    grpc::ClientContext place_context;
    if (!stub->Place(&place_context, request, &hit).ok()) return 1;
    grpc::ClientContext submit_context;
    if (!stub->SubmitPlacement(&submit_context, submit_request, &submitted).ok()) return 1;
  }

  EchoService echo_service(hit, submitted);
  grpc::ServerBuilder builder;
  int echo_port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &echo_port);
  builder.RegisterService(&echo_service);
  builder.SetMaxReceiveMessageSize(256 << 20);
  builder.SetMaxSendMessageSize(256 << 20);
  std::unique_ptr<grpc::Server> echo = builder.BuildAndStart();

  std::printf("request: %d ops, %d edges, %zu bytes; response: %zu bytes (Place), %zu (Submit)\n",
              request.graph().ops_size(), request.graph().edges_size(), request.ByteSizeLong(),
              hit.ByteSizeLong(), submitted.ByteSizeLong());

  std::vector<Kind> kinds;
  kinds.push_back({"place hit", server.port(), false, nullptr, {}});
  kinds.push_back({"place echo", echo_port, false, nullptr, {}});
  kinds.push_back({"submit hit", server.port(), true, nullptr, {}});
  kinds.push_back({"submit echo", echo_port, true, nullptr, {}});
  kinds.push_back({"place (full)", full_server.port(), false, nullptr, {}});
  for (Kind& kind : kinds) kind.stub = PlacementService::NewStub(Channel(kind.port));

  // Latency: alternate blocks of sequential calls so every kind sees the same machine noise.
  for (int i = 0; i < 20; ++i) {  // warm-up
    for (Kind& kind : kinds) Call(*kind.stub, kind.submit, request, submit_request);
  }
  const int calls = absl::GetFlag(FLAGS_calls);
  constexpr int kBlock = 20;
  for (int done = 0; done < calls; done += kBlock) {
    for (Kind& kind : kinds) {
      for (int i = 0; i < kBlock; ++i) {
        kind.times.push_back(Call(*kind.stub, kind.submit, request, submit_request));
      }
    }
  }

  const int throughput_calls = absl::GetFlag(FLAGS_throughput_calls);
  const int concurrency = absl::GetFlag(FLAGS_concurrency);
  std::printf("%-13s %12s %12s %14s\n", "kind", "p50 (us)", "p99 (us)", "requests/s");
  std::vector<double> p50(kinds.size()), p99(kinds.size()), rps(kinds.size());
  for (size_t k = 0; k < kinds.size(); ++k) {
    p50[k] = Percentile(kinds[k].times, 0.50);
    p99[k] = Percentile(kinds[k].times, 0.99);
    rps[k] = Throughput(kinds[k], request, submit_request, throughput_calls, concurrency);
    std::printf("%-13s %12.0f %12.0f %14.0f\n", kinds[k].label, p50[k], p99[k], rps[k]);
  }
  // kinds: 0 place hit, 1 place echo, 2 submit hit, 3 submit echo, 4 place (full).
  const auto ratio = [&](const char* what, size_t hit_kind, size_t echo_kind) {
    std::printf("ratio %s/echo: p50 %.2f, p99 %.2f, throughput %.2f (echo/hit)\n", what,
                p50[hit_kind] / p50[echo_kind], p99[hit_kind] / p99[echo_kind],
                rps[echo_kind] / rps[hit_kind]);
  };
  ratio("place hit", 0, 1);
  ratio("submit hit", 2, 3);
  ratio("full-path place hit", 4, 1);

  echo->Shutdown(std::chrono::system_clock::now());
  full_server.Shutdown();
  server.Shutdown();
  return 0;
}
