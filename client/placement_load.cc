// placement_load — a bounded closed-loop load generator for a placement server (loopback tests only).
//
// `--concurrency` callers send requests until `--requests` have been sent or `--duration` has passed,
// whichever comes first. Each request is one of four kinds, drawn at random:
//   miss    a graph never sent before (`--miss_fraction`): runs `--algorithm` on a worker;
//   cancel  a fresh graph submitted as an operation and cancelled at once (`--cancel_fraction`); the
//           operation must then be done (cancelled, or finished if it was quicker);
//   bad     a hot graph with an edge pointing past the last op (`--bad_fraction`): INVALID_ARGUMENT;
//   hit     the rest: one of `--hot_graphs` graphs with its ops in a random order (the full validation
//           path; a cache hit once each has been computed).
// Reports requests, status codes per kind, latency percentiles per kind and cache result, and the
// server's RSS and cache bytes before and after (scraped from --metrics=HOST:PORT, or RSS read from
// /proc/--server_pid/status). The last line is a machine-readable summary for tests.
//
// Exit status 0 when every answer was expected: OK for hits and misses, INVALID_ARGUMENT with a field
// path for bad ones, and — only with --expect_rejections (overload tests) — UNAVAILABLE or
// RESOURCE_EXHAUSTED carrying a retry hint, answered without waiting for a worker; and, when
// --max_rss_growth is set, the server's RSS grew by at most that many bytes.
//
//   placement_load --server=127.0.0.1:50051 --metrics=127.0.0.1:9464 --requests=2000 --duration=60s
//
// Several tenants: --tokens=FILE (the server's --auth_tokens format, `TOKEN TENANT` per line) gives
// caller c the token of line c mod N, so the callers are spread evenly over the tenants; the report
// then also breaks latencies and answers down per tenant, and the run fails when a tenant got no
// answer at all (starved).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "client/credential_flags.h"
#include "client/placement_client.h"
#include "tests/testutil/random_graph.h"

ABSL_FLAG(std::string, server, "127.0.0.1:50051", "Server address (loopback only).");
ABSL_FLAG(std::string, metrics, "", "Server metrics HOST:PORT for RSS and cache bytes (optional).");
ABSL_FLAG(int, server_pid, 0, "Server process id: RSS from /proc when --metrics is not given.");
ABSL_FLAG(int, requests, 2000, "Upper bound on requests sent.");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(60), "Upper bound on the run's length.");
ABSL_FLAG(int, concurrency, 4, "Concurrent callers (closed loop).");
ABSL_FLAG(int, ops, 2000, "Ops per graph.");
ABSL_FLAG(double, miss_fraction, 0.1, "Fraction of requests with a graph never sent before.");
ABSL_FLAG(double, cancel_fraction, 0.0, "Fraction of requests submitted and cancelled at once.");
ABSL_FLAG(double, bad_fraction, 0.0, "Fraction of invalid requests (INVALID_ARGUMENT expected).");
ABSL_FLAG(int, hot_graphs, 8, "Distinct graphs the other requests repeat.");
ABSL_FLAG(std::string, algorithm, "pardnn", "Algorithm requested.");
ABSL_FLAG(absl::Duration, time_limit, absl::Seconds(10), "Time limit per placement.");
ABSL_FLAG(int, attempts, 5, "Tries per call (client retries on UNAVAILABLE); 1 = no retries.");
ABSL_FLAG(bool, expect_rejections, false,
          "Overload test: UNAVAILABLE / RESOURCE_EXHAUSTED with a retry hint are expected answers.");
ABSL_FLAG(std::string, tokens, "",
          "Several tenants: a file of `TOKEN TENANT` lines; caller c uses line c mod N (overrides "
          "--token / --token_file).");
ABSL_FLAG(int64_t, max_rss_growth, 0,
          "Fail when the server's RSS grew by more than this many bytes (0 = no check).");

namespace {

namespace v1 = placement::v1;
using placement::client::ClientOptions;
using placement::client::PlacementClient;

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

// The server's resident bytes: from its metrics, else from /proc; 0 when neither is available.
double ServerRss(const std::string& scrape) {
  if (!scrape.empty()) return Sample(scrape, "process_resident_memory_bytes");
  const int pid = absl::GetFlag(FLAGS_server_pid);
  if (pid <= 0) return 0;
  std::ifstream file(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(file, line)) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "VmRSS:")) continue;
    rest = absl::StripAsciiWhitespace(rest);
    absl::ConsumeSuffix(&rest, "kB");
    int64_t kib = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(rest), &kib)) return kib * 1024.0;
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

// TLS and token from the command line (ApplyCredentialFlags in main), shared by every caller.
ClientOptions& Credentials() {
  static ClientOptions credentials;
  return credentials;
}

// One line of --tokens.
struct Tenant {
  std::string token;
  std::string name;
};

// Reads --tokens: `TOKEN TENANT` per line; blank lines and `#` comments skipped, further fields (the
// server's per-tenant overrides) ignored.
absl::StatusOr<std::vector<Tenant>> ReadTenants(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("--tokens: cannot read ", path));
  std::vector<Tenant> tenants;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty() || text[0] == '#') continue;
    std::vector<std::string> fields = absl::StrSplit(text, ' ', absl::SkipWhitespace());
    if (fields.size() < 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("--tokens: ", path, ":", number, ": expected `TOKEN TENANT`"));
    }
    tenants.push_back({fields[0], fields[1]});
  }
  if (tenants.empty()) return absl::InvalidArgumentError(absl::StrCat("--tokens: ", path, " is empty"));
  return tenants;
}

std::vector<Tenant>& Tenants() {
  static std::vector<Tenant> tenants;
  return tenants;
}

// The tenant of caller number `caller` ("" when --tokens is not given).
std::string TenantOf(int caller) {
  return Tenants().empty() ? "" : Tenants()[caller % Tenants().size()].name;
}

// The client options of caller number `caller`: the one place where callers differ.
ClientOptions CallerOptions(int caller) {
  ClientOptions options;
  options.tls = Credentials().tls;
  options.token = Tenants().empty() ? Credentials().token
                                    : Tenants()[caller % Tenants().size()].token;
  options.target = absl::GetFlag(FLAGS_server);
  options.default_timeout = absl::GetFlag(FLAGS_time_limit) + absl::Seconds(60);
  options.retry.max_attempts = std::max(1, absl::GetFlag(FLAGS_attempts));
  return options;
}

bool IsRejection(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable ||
         status.code() == absl::StatusCode::kResourceExhausted;
}

// What one request ended with.
struct Outcome {
  std::string kind;     // hit, miss, cancel, bad
  absl::Status status;  // of the Place call, or of Submit / Cancel for the cancel kind
  std::string cache;    // HIT / MISS / COALESCED for answered Place calls
  bool expected = false;
  bool rejected = false;  // an expected overload rejection
  std::string why;        // for unexpected outcomes
};

Outcome SendOne(PlacementClient& client, const std::string& kind, v1::PlaceRequest request) {
  Outcome outcome;
  outcome.kind = kind;
  const bool allow_rejections = absl::GetFlag(FLAGS_expect_rejections);
  auto rejection_ok = [&](const absl::Status& status) {
    if (!allow_rejections || !IsRejection(status)) return false;
    if (!placement::client::RetryDelayOf(status).has_value()) return false;  // must say when to retry
    outcome.rejected = true;
    return true;
  };
  if (kind == "cancel") {
    absl::StatusOr<v1::Operation> op = client.Submit(request);
    outcome.status = op.status();
    if (!op.ok()) {
      outcome.expected = rejection_ok(op.status());
      outcome.why = "submit failed";
      return outcome;
    }
    absl::StatusOr<v1::Operation> cancelled = client.CancelOperation(op->name());
    if (!cancelled.ok()) {
      outcome.status = cancelled.status();
      outcome.why = "cancel failed";
      return outcome;
    }
    // Nothing is lost: the operation ends (cancelled, or with its answer if it was quicker).
    absl::StatusOr<v1::Operation> done =
        client.WaitUntilDone(op->name(), absl::Now() + absl::Seconds(60));
    outcome.status = done.status();
    outcome.expected = done.ok() && done->done() && (done->has_error() || done->has_response());
    if (!outcome.expected) outcome.why = "cancelled operation did not end";
    return outcome;
  }
  if (kind == "bad") {
    request.mutable_graph()->mutable_edges(0)->set_dst(request.graph().ops_size());
  }
  absl::StatusOr<v1::PlaceResponse> response = client.Place(request);
  outcome.status = response.status();
  if (kind == "bad") {
    bool named = false;
    for (const auto& [field, description] : placement::client::FieldViolationsOf(response.status())) {
      named |= field == "graph.edges[0].dst";
    }
    outcome.expected = (response.status().code() == absl::StatusCode::kInvalidArgument && named) ||
                       rejection_ok(response.status());
    if (!outcome.expected) outcome.why = "bad request not rejected with its field";
    return outcome;
  }
  if (response.ok()) {
    outcome.cache = v1::CacheResult_Name(response->placement().provenance().cache());
    outcome.expected = response->placement().device_size() == request.graph().ops_size();
    if (!outcome.expected) outcome.why = "wrong number of devices in the answer";
  } else {
    outcome.expected = rejection_ok(response.status());
    outcome.why = "error";
  }
  return outcome;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  // --token / --token_file / --tls_ca / --tls_cert / --tls_key, as placementctl.
  if (absl::Status applied = placement::client::ApplyCredentialFlags(&Credentials());
      !applied.ok()) {
    std::fprintf(stderr, "%s\n", std::string(applied.message()).c_str());
    return 64;
  }
  if (const std::string tokens = absl::GetFlag(FLAGS_tokens); !tokens.empty()) {
    absl::StatusOr<std::vector<Tenant>> tenants = ReadTenants(tokens);
    if (!tenants.ok()) {
      std::fprintf(stderr, "%s\n", std::string(tenants.status().message()).c_str());
      return 64;
    }
    Tenants() = *std::move(tenants);
  }
  const std::string metrics = absl::GetFlag(FLAGS_metrics);
  const std::string before = metrics.empty() ? "" : Scrape(metrics);
  const double rss_before = ServerRss(before);

  std::vector<v1::PlaceRequest> hot;
  for (int i = 0; i < absl::GetFlag(FLAGS_hot_graphs); ++i) hot.push_back(Graph(1000 + i));
  const uint64_t fresh_base = static_cast<uint64_t>(absl::ToUnixNanos(absl::Now()));
  const double miss = absl::GetFlag(FLAGS_miss_fraction);
  const double cancel = absl::GetFlag(FLAGS_cancel_fraction);
  const double bad = absl::GetFlag(FLAGS_bad_fraction);

  std::mutex mu;
  std::map<std::string, std::vector<absl::Duration>> latencies;  // by kind, and by cache result
  std::map<std::string, std::map<std::string, int>> codes;       // kind -> code -> count
  std::map<std::string, int> unexpected;                         // "kind code: why" -> count
  std::map<std::string, int> answered_by_tenant;                 // tenant -> answered requests
  for (const Tenant& tenant : Tenants()) answered_by_tenant[tenant.name] = 0;
  int total = 0, unexpected_total = 0, rejected = 0;
  std::atomic<int> sent{0};
  std::atomic<uint64_t> fresh{0};
  const absl::Time start = absl::Now();
  const absl::Time stop = start + absl::GetFlag(FLAGS_duration);
  const int max_requests = absl::GetFlag(FLAGS_requests);

  std::vector<std::thread> callers;
  for (int c = 0; c < absl::GetFlag(FLAGS_concurrency); ++c) {
    callers.emplace_back([&, c] {
      PlacementClient client(CallerOptions(c));
      const std::string tenant = TenantOf(c);
      absl::BitGen random;
      while (absl::Now() < stop && sent.fetch_add(1) < max_requests) {
        const double draw = absl::Uniform(random, 0.0, 1.0);
        std::string kind;
        v1::PlaceRequest request;
        if (draw < miss) {
          kind = "miss";
        } else if (draw < miss + cancel) {
          kind = "cancel";
        } else if (draw < miss + cancel + bad) {
          kind = "bad";
        } else {
          kind = "hit";
        }
        if (kind == "miss" || kind == "cancel") {
          request = Graph(fresh_base + fresh.fetch_add(1));
        } else {
          request = placement::testutil::ShuffleRequest(
              hot[absl::Uniform<size_t>(random, 0, hot.size())], absl::Uniform<uint64_t>(random));
        }
        const absl::Time begin = absl::Now();
        const Outcome outcome = SendOne(client, kind, std::move(request));
        const absl::Duration took = absl::Now() - begin;
        std::lock_guard<std::mutex> lock(mu);
        ++total;
        ++codes[kind][absl::StatusCodeToString(outcome.status.code())];
        if (!outcome.expected) {
          ++unexpected_total;
          ++unexpected[absl::StrCat(kind, " ", absl::StatusCodeToString(outcome.status.code()),
                                    ": ", outcome.why, " (",
                                    outcome.status.message().substr(0, 120), ")")];
        }
        if (outcome.rejected) {
          ++rejected;
          latencies["rejected"].push_back(took);
        } else {
          latencies[kind].push_back(took);
          latencies["all answered"].push_back(took);
          if (!outcome.cache.empty()) latencies["place " + outcome.cache].push_back(took);
          if (!tenant.empty()) {
            latencies["tenant " + tenant].push_back(took);
            if (outcome.expected) ++answered_by_tenant[tenant];
          }
        }
      }
    });
  }
  for (std::thread& caller : callers) caller.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const std::string after = metrics.empty() ? "" : Scrape(metrics);
  const double rss_after = ServerRss(after);

  std::printf("requests: %d in %.1f s = %.1f requests/s (concurrency %d, %d ops per graph)\n", total,
              seconds, total / seconds, absl::GetFlag(FLAGS_concurrency), absl::GetFlag(FLAGS_ops));
  for (const auto& [kind, by_code] : codes) {
    for (const auto& [code, count] : by_code) {
      std::printf("  %-7s status %-20s %d\n", kind.c_str(), code.c_str(), count);
    }
  }
  std::printf("%-16s %8s %10s %10s %10s\n", "latency", "count", "p50 ms", "p90 ms", "p99 ms");
  for (const auto& [kind, samples] : latencies) {
    std::printf("%-16s %8zu %10.2f %10.2f %10.2f\n", kind.c_str(), samples.size(),
                PercentileMs(samples, 0.5), PercentileMs(samples, 0.9), PercentileMs(samples, 0.99));
  }
  for (const auto& [what, count] : unexpected) {
    std::printf("UNEXPECTED x%d: %s\n", count, what.c_str());
  }
  if (rss_before > 0 || rss_after > 0) {
    std::printf("server RSS: %.1f MiB before, %.1f MiB after", rss_before / (1 << 20),
                rss_after / (1 << 20));
    if (!after.empty()) {
      std::printf("; cache %.1f MiB of %.1f MiB", Sample(after, "placement_cache_bytes") / (1 << 20),
                  Sample(after, "placement_cache_max_bytes") / (1 << 20));
    }
    std::printf("\n");
  }
  // A tenant with callers but no answer was starved by the others.
  int starved = 0;
  int min_tenant_answered = answered_by_tenant.empty() ? 0 : total;
  for (const auto& [tenant, answered] : answered_by_tenant) {
    min_tenant_answered = std::min(min_tenant_answered, answered);
    if (answered == 0) {
      ++starved;
      std::printf("STARVED: tenant %s got no answer\n", tenant.c_str());
    }
  }
  const int64_t max_growth = absl::GetFlag(FLAGS_max_rss_growth);
  const bool rss_ok =
      max_growth <= 0 || (rss_after > 0 && rss_after - rss_before <= static_cast<double>(max_growth));
  if (!rss_ok) {
    std::printf("RSS grew by %.1f MiB, more than --max_rss_growth (%.1f MiB)\n",
                (rss_after - rss_before) / (1 << 20), max_growth / double{1 << 20});
  }
  std::printf(
      "summary: requests=%d unexpected=%d rejected=%d rejected_p99_ms=%.1f p50_ms=%.1f p99_ms=%.1f "
      "rss_before=%.0f rss_after=%.0f tenants=%zu min_tenant_answered=%d\n",
      total, unexpected_total, rejected, PercentileMs(latencies["rejected"], 0.99),
      PercentileMs(latencies["all answered"], 0.5), PercentileMs(latencies["all answered"], 0.99),
      rss_before, rss_after, answered_by_tenant.size(), min_tenant_answered);
  return unexpected_total == 0 && starved == 0 && rss_ok && total > 0 ? 0 : 1;
}
