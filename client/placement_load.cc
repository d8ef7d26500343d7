// placement_load — a bounded closed-loop load generator for a placement server (loopback tests only).
//
// `--concurrency` callers send Place requests until `--requests` have been sent or `--duration` has
// passed, whichever comes first. A fraction `--miss_fraction` of them carry a graph never sent before
// (a cache miss that runs `--algorithm`); the others pick one of `--hot_graphs` graphs (hits once each
// has been computed), each sent with its ops in a random order (the full validation path). Reports
// throughput, latency percentiles per kind, status counts, and the server's RSS and cache bytes
// before and after (scraped from --metrics=HOST:PORT).
//
//   placement_load --server=127.0.0.1:50051 --metrics=127.0.0.1:9464 --requests=2000 --duration=60s
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/random/random.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/credential_flags.h"
#include "client/placement_client.h"
#include "tests/testutil/random_graph.h"

ABSL_FLAG(std::string, server, "127.0.0.1:50051", "Server address (loopback only).");
ABSL_FLAG(std::string, metrics, "", "Server metrics HOST:PORT for RSS and cache bytes (optional).");
ABSL_FLAG(int, requests, 2000, "Upper bound on requests sent.");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(60), "Upper bound on the run's length.");
ABSL_FLAG(int, concurrency, 4, "Concurrent callers (closed loop).");
ABSL_FLAG(int, ops, 2000, "Ops per graph.");
ABSL_FLAG(double, miss_fraction, 0.1, "Fraction of requests with a graph never sent before.");
ABSL_FLAG(int, hot_graphs, 8, "Distinct graphs the other requests repeat.");
ABSL_FLAG(std::string, algorithm, "pardnn", "Algorithm requested.");
ABSL_FLAG(absl::Duration, time_limit, absl::Seconds(10), "Time limit per placement.");

namespace {

namespace v1 = placement::v1;

// GET /metrics; empty on failure.
std::string Scrape(const std::string& host_port) {
  std::vector<std::string> parts = absl::StrSplit(host_port, ':');
  int port = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &port)) return "";
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, parts[0].c_str(), &address.sin_addr);
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
    const std::string request = "GET /metrics HTTP/1.0\r\nConnection: close\r\n\r\n";
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buffer[8192];
      ssize_t n;
      while ((n = read(fd, buffer, sizeof(buffer))) > 0) response.append(buffer, n);
    }
  }
  close(fd);
  return response;
}

double Sample(const std::string& scrape, const std::string& name) {
  for (absl::string_view line : absl::StrSplit(scrape, '\n')) {
    if (!absl::ConsumePrefix(&line, name) || !absl::ConsumePrefix(&line, " ")) continue;
    double value = 0;
    if (absl::SimpleAtod(line, &value)) return value;
  }
  return 0;
}

double PercentileMs(std::vector<absl::Duration> samples, double p) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const size_t index =
      std::min(samples.size() - 1, static_cast<size_t>(p * static_cast<double>(samples.size())));
  return absl::ToDoubleMilliseconds(samples[index]);
}

v1::PlaceRequest Graph(uint64_t seed) {
  placement::testutil::RandomGraphOptions options;
  options.num_ops = absl::GetFlag(FLAGS_ops);
  options.avg_out_degree = 2.5;
  options.num_devices = 8;
  options.num_nodes = 2;
  options.seed = seed;
  options.algorithm = absl::GetFlag(FLAGS_algorithm);
  v1::PlaceRequest request = placement::testutil::RandomLayeredRequest(options);
  const int64_t nanos = absl::ToInt64Nanoseconds(absl::GetFlag(FLAGS_time_limit));
  request.mutable_options()->mutable_time_limit()->set_seconds(nanos / 1'000'000'000);
  request.mutable_options()->mutable_time_limit()->set_nanos(
      static_cast<int32_t>(nanos % 1'000'000'000));
  return request;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  // --token / --token_file / --tls_ca / --tls_cert / --tls_key, as placementctl.
  placement::client::ClientOptions credentials;
  if (absl::Status applied = placement::client::ApplyCredentialFlags(&credentials); !applied.ok()) {
    std::fprintf(stderr, "%s\n", std::string(applied.message()).c_str());
    return 64;
  }
  const std::string metrics = absl::GetFlag(FLAGS_metrics);
  const std::string before = metrics.empty() ? "" : Scrape(metrics);

  std::vector<v1::PlaceRequest> hot;
  for (int i = 0; i < absl::GetFlag(FLAGS_hot_graphs); ++i) hot.push_back(Graph(1000 + i));
  const uint64_t fresh_base = static_cast<uint64_t>(absl::ToUnixNanos(absl::Now()));

  std::mutex mu;
  std::map<std::string, std::vector<absl::Duration>> latencies;  // by cache result
  std::map<std::string, int> statuses;
  std::atomic<int> sent{0};
  std::atomic<uint64_t> fresh{0};
  const absl::Time start = absl::Now();
  const absl::Time stop = start + absl::GetFlag(FLAGS_duration);
  const int max_requests = absl::GetFlag(FLAGS_requests);

  std::vector<std::thread> callers;
  for (int c = 0; c < absl::GetFlag(FLAGS_concurrency); ++c) {
    callers.emplace_back([&, c] {
      placement::client::ClientOptions options;
      options.target = absl::GetFlag(FLAGS_server);
      options.default_timeout = absl::GetFlag(FLAGS_time_limit) + absl::Seconds(30);
      options.tls = credentials.tls;
      options.token = credentials.token;
      placement::client::PlacementClient client(options);
      absl::BitGen random;
      while (absl::Now() < stop && sent.fetch_add(1) < max_requests) {
        v1::PlaceRequest request;
        if (absl::Bernoulli(random, absl::GetFlag(FLAGS_miss_fraction))) {
          request = Graph(fresh_base + fresh.fetch_add(1));
        } else {
          request = placement::testutil::ShuffleRequest(
              hot[absl::Uniform<size_t>(random, 0, hot.size())], absl::Uniform<uint64_t>(random));
        }
        const absl::Time begin = absl::Now();
        absl::StatusOr<v1::PlaceResponse> response = client.Place(request);
        const absl::Duration took = absl::Now() - begin;
        std::lock_guard<std::mutex> lock(mu);
        ++statuses[absl::StatusCodeToString(response.status().code())];
        if (response.ok()) {
          latencies[v1::CacheResult_Name(response->placement().provenance().cache())].push_back(
              took);
          latencies["all"].push_back(took);
        }
      }
      (void)c;
    });
  }
  for (std::thread& caller : callers) caller.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const std::string after = metrics.empty() ? "" : Scrape(metrics);

  int total = 0;
  for (const auto& [code, count] : statuses) total += count;
  std::printf("requests: %d in %.1f s = %.1f requests/s (concurrency %d, %d ops per graph)\n",
              total, seconds, total / seconds, absl::GetFlag(FLAGS_concurrency),
              absl::GetFlag(FLAGS_ops));
  for (const auto& [code, count] : statuses) std::printf("  status %-18s %d\n", code.c_str(), count);
  std::printf("%-10s %8s %10s %10s %10s\n", "cache", "count", "p50 ms", "p90 ms", "p99 ms");
  for (const auto& [kind, samples] : latencies) {
    std::printf("%-10s %8zu %10.2f %10.2f %10.2f\n", kind.c_str(), samples.size(),
                PercentileMs(samples, 0.5), PercentileMs(samples, 0.9),
                PercentileMs(samples, 0.99));
  }
  if (!metrics.empty()) {
    std::printf("server RSS: %.1f MiB before, %.1f MiB after; cache %.1f MiB of %.1f MiB\n",
                Sample(before, "process_resident_memory_bytes") / (1 << 20),
                Sample(after, "process_resident_memory_bytes") / (1 << 20),
                Sample(after, "placement_cache_bytes") / (1 << 20),
                Sample(after, "placement_cache_max_bytes") / (1 << 20));
  }
  return statuses.count("OK") == 1 && statuses.size() == 1 ? 0 : 1;
}
