// End-to-end tests of scale-out (issue 8): two placement_server replicas sharing a real redis-server,
// and a real nginx routing on the x-placement-digest header in front of them. Everything runs on
// 127.0.0.1 with ports picked at run time; each test skips when redis-server or nginx is missing.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/placement_client.h"
#include "client/routing_digest.h"
#include "gtest/gtest.h"
#include "tests/e2e/nginx_process.h"
#include "tests/e2e/server_process.h"
#include "tests/e2e/test_requests.h"
#include "tests/testutil/random_graph.h"
#include "tests/testutil/redis_server.h"

namespace placement::e2e {
namespace {

using client::PlacementClient;
using client::RoutingDigestOf;
using testutil::RedisServer;

// Small and fast (m_topo) so that the tests measure routing and caching, not solving.
v1::PlaceRequest Request(uint64_t seed) { return RandomRequest(80, seed, "m_topo"); }

std::unique_ptr<ServerProcess> StartReplica(std::vector<std::string> flags) {
  flags.push_back("--workers=1");
  flags.push_back("--log_requests=false");
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(flags);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

std::vector<std::string> RedisFlags(const RedisServer& redis) {
  return {absl::StrCat("--redis=", redis.address()),
          absl::StrCat("--redis_key_prefix=e2e", FreshSeed(), ":"), "--redis_timeout=100ms"};
}

double Metric(const ServerProcess& server, absl::string_view series) {
  absl::StatusOr<std::string> scrape = ScrapeMetrics(server.metrics_port());
  EXPECT_TRUE(scrape.ok()) << scrape.status();
  return scrape.ok() ? MetricValue(*scrape, series) : -1;
}

double RedisErrors(const ServerProcess& server) {
  double sum = 0;
  for (const char* op : {"connect", "get", "set", "decode"}) {
    sum += Metric(server, absl::StrCat("placement_redis_errors_total{op=\"", op, "\"}"));
  }
  return sum;
}

// Polls until `series` on `server` reaches `at_least` (true) or 10 s pass.
bool AwaitMetric(const ServerProcess& server, absl::string_view series, double at_least) {
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (absl::Now() < give_up) {
    if (Metric(server, series) >= at_least) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return false;
}

constexpr char kStored[] = "placement_redis_writes_total{result=\"stored\"}";
constexpr char kSolves[] = "placement_solves_total{algorithm=\"m_topo\"}";
constexpr char kOkPlaces[] = "placement_requests_total{code=\"OK\",method=\"Place\"}";

client::ClientOptions Direct(const ServerProcess& server) {
  client::ClientOptions options;
  options.target = server.address();
  options.default_timeout = absl::Seconds(30);
  return options;
}

// Two replicas (no Redis) behind a real nginx that hashes the x-placement-digest header.
struct RoutedReplicas {
  std::unique_ptr<ServerProcess> a;
  std::unique_ptr<ServerProcess> b;
  std::unique_ptr<NginxProcess> router;

  // NOT_FOUND when nginx is not installed (the caller skips).
  static absl::StatusOr<RoutedReplicas> Start() {
    RoutedReplicas replicas;
    replicas.a = StartReplica({});
    replicas.b = StartReplica({});
    if (replicas.a == nullptr || replicas.b == nullptr) {
      return absl::FailedPreconditionError("a replica did not start");
    }
    absl::StatusOr<std::unique_ptr<NginxProcess>> router =
        NginxProcess::Start({replicas.a->port(), replicas.b->port()});
    if (!router.ok()) return router.status();
    replicas.router = *std::move(router);
    return replicas;
  }

  // A client that sends each request's digest, so nginx routes it.
  client::ClientOptions Routed() const {
    client::ClientOptions options;
    options.target = router->address();
    options.default_timeout = absl::Seconds(30);
    options.routing_digest = RoutingDigestOf;
    return options;
  }
};

// Two replicas (no router) sharing one throw-away redis-server as their shared cache tier.
struct SharedTierReplicas {
  std::unique_ptr<RedisServer> redis;
  std::unique_ptr<ServerProcess> a;
  std::unique_ptr<ServerProcess> b;

  // NOT_FOUND when redis-server is not installed (the caller skips).
  static absl::StatusOr<SharedTierReplicas> Start() {
    SharedTierReplicas replicas;
    absl::StatusOr<std::unique_ptr<RedisServer>> redis = RedisServer::Start();
    if (!redis.ok()) return redis.status();
    replicas.redis = *std::move(redis);
    const std::vector<std::string> flags = RedisFlags(*replicas.redis);
    replicas.a = StartReplica(flags);
    replicas.b = StartReplica(flags);
    if (replicas.a == nullptr || replicas.b == nullptr) {
      return absl::FailedPreconditionError("a replica did not start");
    }
    return replicas;
  }
};

// A TCP listener on 127.0.0.1 that accepts connections and never answers: a Redis that hangs.
class SilentTcpServer {
 public:
  SilentTcpServer() {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if (bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        listen(listener_, 16) != 0 ||
        getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      ADD_FAILURE() << "cannot listen on 127.0.0.1";
      return;
    }
    port_ = ntohs(address.sin_port);
    acceptor_ = std::thread([this] {
      while (true) {
        const int connection = accept(listener_, nullptr, nullptr);
        if (connection < 0) return;  // shut down
        connections_.push_back(connection);  // held open, never read
      }
    });
  }
  ~SilentTcpServer() {
    shutdown(listener_, SHUT_RDWR);
    if (acceptor_.joinable()) acceptor_.join();
    close(listener_);
    for (const int connection : connections_) close(connection);
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

 private:
  int listener_ = -1;
  int port_ = 0;
  std::thread acceptor_;
  std::vector<int> connections_;  // only the acceptor thread touches it until the join
};

// With a shared tier, Place starts on the service's offload threads, not gRPC's. A caller that gives up
// while its lookup hangs on Redis gets DEADLINE_EXCEEDED at its deadline; gRPC's OnCancel arrives while
// the start still runs, so the offload thread must end the call once the lookup returns (the server
// counts it), release whatever it admitted, and the next call must be served normally.
TEST(ScaleE2ETest, ACallerLeavingWhileRedisHangsIsEndedCleanlyByTheOffloadThread) {
  SilentTcpServer hanging_redis;
  std::unique_ptr<ServerProcess> server = StartReplica(
      {"--redis=" + hanging_redis.address(), "--redis_timeout=1500ms", "--min_time_budget=4s",
       "--offload_threads=1"});
  ASSERT_NE(server, nullptr);
  client::ClientOptions options = Direct(*server);
  options.retry.max_attempts = 1;
  PlacementClient client(options);

  const absl::Time start = absl::Now();
  absl::StatusOr<v1::PlaceResponse> gave_up = client.Place(Request(FreshSeed()), absl::Milliseconds(300));
  EXPECT_EQ(gave_up.status().code(), absl::StatusCode::kDeadlineExceeded) << gave_up.status();
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(1200));  // not held for the Redis timeout
  // Meanwhile gRPC's threads are free: a cheap call is answered while the lookup still hangs.
  EXPECT_TRUE(client.ListAlgorithms().ok());

  // The offload thread ends the abandoned call once the lookup times out, and nothing stays admitted.
  ASSERT_TRUE(AwaitMetric(
      *server, "placement_requests_total{code=\"DEADLINE_EXCEEDED\",method=\"Place\"}", 1));
  EXPECT_EQ(Metric(*server, "placement_jobs_running"), 0);
  EXPECT_EQ(Metric(*server, "placement_queue_depth"), 0);
  // Redis is now paused after its failure: the next call is a plain miss, solved and answered.
  absl::StatusOr<v1::PlaceResponse> next = client.Place(Request(FreshSeed()), absl::Seconds(30));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->placement().provenance().cache(), v1::MISS);
  server->Signal(SIGTERM);
  EXPECT_EQ(server->WaitForExit(absl::Seconds(60)).value_or(-100), 0) << server->Log();
}

TEST(ScaleE2ETest, ResultComputedOnOneReplicaIsAHitOnTheOther) {
  absl::StatusOr<SharedTierReplicas> replicas = SharedTierReplicas::Start();
  if (absl::IsNotFound(replicas.status())) GTEST_SKIP() << replicas.status();
  ASSERT_TRUE(replicas.ok()) << replicas.status();
  auto& [redis, a, b] = *replicas;
  EXPECT_TRUE(a->WaitForLog("shared cache: redis", absl::Seconds(1))) << a->Log();

  const v1::PlaceRequest request = Request(FreshSeed());
  PlacementClient client_a(Direct(*a));
  absl::StatusOr<v1::PlaceResponse> on_a = client_a.Place(request);
  ASSERT_TRUE(on_a.ok()) << on_a.status();
  EXPECT_EQ(on_a->placement().provenance().cache(), v1::MISS);
  ASSERT_TRUE(AwaitMetric(*a, kStored, 1)) << "A never stored its result in Redis";

  // B has never seen it: the same content, in another op order, is a HIT from the shared tier.
  const v1::PlaceRequest shuffled = testutil::ShuffleRequest(request, 3);
  // A router would have sent both to one replica: the client's routing key depends on content only
  // (it is not the server's request_digest, which names the algorithm's version).
  EXPECT_EQ(RoutingDigestOf(shuffled).value(), RoutingDigestOf(request).value());
  EXPECT_NE(RoutingDigestOf(Request(FreshSeed())).value(), RoutingDigestOf(request).value());
  PlacementClient client_b(Direct(*b));
  absl::StatusOr<v1::PlaceResponse> on_b = client_b.Place(shuffled);
  ASSERT_TRUE(on_b.ok()) << on_b.status();
  EXPECT_EQ(on_b->placement().provenance().cache(), v1::HIT);
  EXPECT_EQ(on_b->placement().provenance().request_digest(),
            on_a->placement().provenance().request_digest());
  EXPECT_EQ(on_b->placement().metrics().makespan_ns(), on_a->placement().metrics().makespan_ns());
  // Same device per op name, whatever the order.
  EXPECT_EQ(testutil::DevicesByName(shuffled, on_b->placement()),
            testutil::DevicesByName(request, on_a->placement()));
  EXPECT_EQ(Metric(*b, kSolves), 0);
  EXPECT_EQ(Metric(*b, "placement_redis_lookups_total{result=\"hit\"}"), 1);
  EXPECT_EQ(Metric(*b, "placement_cache_lookups_total{result=\"hit\"}"), 1);

  // Again on B: now from B's own memory, no Redis round trip.
  absl::StatusOr<v1::PlaceResponse> again = client_b.Place(request);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->placement().provenance().cache(), v1::HIT);
  EXPECT_EQ(Metric(*b, "placement_cache_tier_lookups_total{result=\"hit\",tier=\"local\"}"), 1);
  EXPECT_EQ(Metric(*b, "placement_redis_lookups_total{result=\"hit\"}"), 1);
  EXPECT_EQ(RedisErrors(*a) + RedisErrors(*b), 0);

  // The tier and Redis families pass promtool when it is installed (Debian package `prometheus`).
  if (RunCommand({"/bin/sh", "-c", "command -v promtool"}).exit_status == 0) {
    const std::string path = ::testing::TempDir() + "/placement_scale_metrics.txt";
    {
      std::ofstream out(path);
      out << ScrapeMetrics(b->metrics_port()).value();
    }
    CommandResult lint = RunCommand({"/bin/sh", "-c", "promtool check metrics < " + path});
    EXPECT_EQ(lint.exit_status, 0) << lint.out << lint.err;
  }
}

TEST(ScaleE2ETest, ReplicasKeepServingWhenRedisDiesAndReconnectWhenItReturns) {
  absl::StatusOr<SharedTierReplicas> replicas = SharedTierReplicas::Start();
  if (absl::IsNotFound(replicas.status())) GTEST_SKIP() << replicas.status();
  ASSERT_TRUE(replicas.ok()) << replicas.status();
  auto& [redis, a, b] = *replicas;
  PlacementClient client_a(Direct(*a));
  PlacementClient client_b(Direct(*b));
  ASSERT_TRUE(client_a.Place(Request(FreshSeed())).ok());  // connections open, Redis in use
  ASSERT_TRUE(AwaitMetric(*a, kStored, 1));

  redis->Kill();
  for (PlacementClient* client : {&client_a, &client_b}) {
    const v1::PlaceRequest request = Request(FreshSeed());
    const absl::Time start = absl::Now();
    absl::StatusOr<v1::PlaceResponse> first = client->Place(request);
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_EQ(first->placement().provenance().cache(), v1::MISS);
    absl::StatusOr<v1::PlaceResponse> second = client->Place(request);
    ASSERT_TRUE(second.ok()) << second.status();
    EXPECT_EQ(second->placement().provenance().cache(), v1::HIT);  // the local tier
    EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  }
  EXPECT_GE(RedisErrors(*a), 1);
  EXPECT_GE(RedisErrors(*b), 1);
  EXPECT_EQ(Metric(*a, kOkPlaces), 3);
  EXPECT_EQ(Metric(*b, kOkPlaces), 2);

  // Redis is back (empty): after its backoff, A stores results there again by itself.
  ASSERT_TRUE(redis->Restart().ok());
  const double stored_before = Metric(*a, kStored);
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  bool stored_again = false;
  while (!stored_again && absl::Now() < give_up) {
    ASSERT_TRUE(client_a.Place(Request(FreshSeed())).ok());
    absl::SleepFor(absl::Milliseconds(100));
    stored_again = Metric(*a, kStored) > stored_before;
  }
  EXPECT_TRUE(stored_again) << "A did not reconnect to Redis";
}

TEST(ScaleE2ETest, NginxSendsIdenticalRequestsToTheSameReplica) {
  // No Redis here: a request routed to the replica that did not compute it would be a MISS.
  absl::StatusOr<RoutedReplicas> replicas = RoutedReplicas::Start();
  if (absl::IsNotFound(replicas.status())) GTEST_SKIP() << replicas.status();
  ASSERT_TRUE(replicas.ok()) << replicas.status();
  ServerProcess* a = replicas->a.get();
  ServerProcess* b = replicas->b.get();
  NginxProcess* router = replicas->router.get();

  PlacementClient client(replicas->Routed());
  constexpr int kDistinct = 16;
  constexpr int kRepeats = 3;
  const uint64_t base = FreshSeed();
  for (int repeat = 0; repeat < kRepeats; ++repeat) {
    for (int i = 0; i < kDistinct; ++i) {
      // Repeats come in another op order: different bytes, same digest, same replica.
      v1::PlaceRequest request = Request(base + i);
      if (repeat > 0) request = testutil::ShuffleRequest(request, repeat);
      absl::StatusOr<v1::PlaceResponse> placed = client.Place(request);
      ASSERT_TRUE(placed.ok()) << placed.status() << "\n" << router->ErrorLog();
      EXPECT_EQ(placed->placement().provenance().cache(), repeat == 0 ? v1::MISS : v1::HIT)
          << "request " << i << " repeat " << repeat;
    }
  }
  // Every distinct request was computed once in total, and both replicas took a share.
  const double solves_a = Metric(*a, kSolves);
  const double solves_b = Metric(*b, kSolves);
  EXPECT_EQ(solves_a + solves_b, kDistinct);
  EXPECT_GT(solves_a, 0);
  EXPECT_GT(solves_b, 0);
  EXPECT_EQ(Metric(*a, kOkPlaces) + Metric(*b, kOkPlaces), kDistinct * kRepeats);
  EXPECT_EQ(Metric(*a, kOkPlaces), solves_a * kRepeats);
}

// Submits `count` requests through `client`, then polls each by name three times and waits for it:
// every call must find the operation, and each must end with a placement.
void SubmitAndFollowByName(PlacementClient& client, uint64_t base, int count) {
  for (int i = 0; i < count; ++i) {
    absl::StatusOr<v1::Operation> submitted = client.Submit(Request(base + i));
    ASSERT_TRUE(submitted.ok()) << submitted.status();
    for (int poll = 0; poll < 3; ++poll) {
      absl::StatusOr<v1::Operation> got = client.GetOperation(submitted->name());
      ASSERT_TRUE(got.ok()) << got.status();
    }
    absl::StatusOr<v1::Operation> done =
        client.WaitUntilDone(submitted->name(), absl::Now() + absl::Seconds(30));
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_TRUE(done->has_response()) << done->error().message();
  }
}

TEST(ScaleE2ETest, OperationsThroughNginxReachTheReplicaThatHoldsThem) {
  absl::StatusOr<RoutedReplicas> replicas = RoutedReplicas::Start();
  if (absl::IsNotFound(replicas.status())) GTEST_SKIP() << replicas.status();
  ASSERT_TRUE(replicas.ok()) << replicas.status();
  NginxProcess* router = replicas->router.get();

  PlacementClient client(replicas->Routed());
  const uint64_t base = FreshSeed();
  // An unrouted call has a 1 in 2 chance per call of reaching the replica that does not hold it.
  SubmitAndFollowByName(client, base, 12);

  // placementctl --digest_header through the router, on the operation path (progress bar forced).
  const std::string request_path = ::testing::TempDir() + "/scale_request.pb";
  {
    std::ofstream out(request_path, std::ios::binary);
    out << Request(base + 100).SerializeAsString();
  }
  for (int i = 0; i < 4; ++i) {
    CommandResult placed = RunCommand({PlacementctlBinary(), "--server=" + router->address(),
                                       "--digest_header", "--progress=always", "place",
                                       "--request=" + request_path});
    EXPECT_EQ(placed.exit_status, 0) << placed.err;
  }
}

// With --redis any replica answers for any operation, so operation calls need no routing header:
// a client that sends none, through the same nginx, finds every operation on whichever replica the
// call reaches (and the calls do reach both).
TEST(ScaleE2ETest, WithRedisOperationsThroughNginxNeedNoDigestHeader) {
  absl::StatusOr<std::unique_ptr<RedisServer>> redis = RedisServer::Start();
  if (absl::IsNotFound(redis.status())) GTEST_SKIP() << redis.status();
  ASSERT_TRUE(redis.ok()) << redis.status();
  const std::vector<std::string> flags = RedisFlags(**redis);
  std::unique_ptr<ServerProcess> a = StartReplica(flags);
  std::unique_ptr<ServerProcess> b = StartReplica(flags);
  ASSERT_TRUE(a && b);
  absl::StatusOr<std::unique_ptr<NginxProcess>> router = NginxProcess::Start({a->port(), b->port()});
  if (absl::IsNotFound(router.status())) GTEST_SKIP() << router.status();
  ASSERT_TRUE(router.ok()) << router.status();

  client::ClientOptions options;
  options.target = (*router)->address();
  options.default_timeout = absl::Seconds(30);
  options.retry.max_attempts = 1;  // a NOT_FOUND must show, not be retried away
  PlacementClient client(options);  // no routing_digest: no x-placement-digest header
  const uint64_t base = FreshSeed();
  SubmitAndFollowByName(client, base, 8);
  constexpr char kOkGets[] = "placement_requests_total{code=\"OK\",method=\"GetOperation\"}";
  EXPECT_GT(Metric(*a, kOkGets), 0) << "no GetOperation reached replica A";
  EXPECT_GT(Metric(*b, kOkGets), 0) << "no GetOperation reached replica B";
}

TEST(ScaleE2ETest, ClientsWithRetriesThroughNginxSurviveAReplicaKilledUnderLoad) {
  absl::StatusOr<RoutedReplicas> replicas = RoutedReplicas::Start();
  if (absl::IsNotFound(replicas.status())) GTEST_SKIP() << replicas.status();
  ASSERT_TRUE(replicas.ok()) << replicas.status();
  ServerProcess* a = replicas->a.get();
  ServerProcess* b = replicas->b.get();

  constexpr int kThreads = 4;
  constexpr int kPerThread = 20;
  const uint64_t base = FreshSeed();
  std::atomic<int> done{0};
  std::atomic<int> failed{0};
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      client::ClientOptions options = replicas->Routed();
      options.retry = {.max_attempts = 8,
                       .initial_backoff = absl::Milliseconds(50),
                       .max_backoff = absl::Milliseconds(500)};
      PlacementClient client(options);
      for (int i = 0; i < kPerThread; ++i) {
        absl::StatusOr<v1::PlaceResponse> placed =
            client.Place(Request(base + (t * kPerThread + i) % 24));
        if (!placed.ok()) {
          ++failed;
          failures[t] = placed.status().ToString();
        }
        ++done;
      }
    });
  }
  // Kill B (no drain, no goodbye) once the load is under way.
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (done.load() < kThreads * kPerThread / 4 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  const double b_served = Metric(*b, kOkPlaces);
  b->Signal(SIGKILL);
  for (std::thread& thread : threads) thread.join();

  EXPECT_EQ(done.load(), kThreads * kPerThread);
  EXPECT_EQ(failed.load(), 0) << failures[0] << failures[1] << failures[2] << failures[3];
  EXPECT_GT(b_served, 0) << "B took no load before it was killed: nothing was tested";
  EXPECT_GT(Metric(*a, kOkPlaces), 0);
}

}  // namespace
}  // namespace placement::e2e
