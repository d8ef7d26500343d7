#include "service/server/placement_server.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <exception>
#include <thread>
#include <utility>
#include <vector>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "prometheus/exposer.h"
#include "service/cache/lru_cache.h"
#include "service/cache/tiered_result_cache.h"
#include "service/server/request_log.h"
#include "service/server/transport_security.h"

namespace placement::server {
namespace {

constexpr char kServiceName[] = "placement.v1.PlacementService";
// After the shutdown grace, the time the service's own UNAVAILABLE answers get to reach their callers
// before gRPC cancels whatever is left.
constexpr absl::Duration kAbortMargin = absl::Milliseconds(500);
// How long the start-up check of --redis waits for an answer (at least; --redis_timeout if longer).
constexpr absl::Duration kRedisCheckTimeout = absl::Seconds(1);

std::string HostPort(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

// Opens and closes a connection to `host`:`port` without waiting for anything.
void TouchPort(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), absl::StrCat(port).c_str(), &hints, &found) != 0) return;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    (void)connect(fd, a->ai_addr, a->ai_addrlen);
    close(fd);
    break;
  }
  freeaddrinfo(found);
}

}  // namespace

PlacementServer::PlacementServer(PlacementServerOptions options) : options_(std::move(options)) {
  metrics_ = std::make_unique<ServiceMetrics>();
  algorithms_ = std::make_unique<engine::AlgorithmRegistry>(engine::AlgorithmRegistryOptions{
      .include_testing_algorithms = options_.testing_algorithms});
  cache_ = std::make_unique<cache::LruResultCache>(
      cache::LruCacheOptions{.max_bytes = options_.cache_bytes});
  cache::ResultCache* results = cache_.get();
  if (absl::StatusOr<std::pair<std::string, int>> redis =
          cache::ParseRedisAddress(options_.redis_address);
      !options_.redis_address.empty() && redis.ok()) {
    cache::RedisCacheOptions redis_options = options_.redis;
    redis_options.host = redis->first;
    redis_options.port = redis->second;
    redis_options.timeout = std::min(redis_options.timeout, options_.min_time_budget / 2);
    redis_ = std::make_unique<cache::RedisResultCache>(std::move(redis_options));
    tiered_ = std::make_unique<cache::TieredResultCache>(cache_.get(), redis_.get());
    results = tiered_.get();
  }
  jobs_ = std::make_unique<jobs::JobManager>(jobs::JobManagerOptions{
      .workers = options_.workers,
      .max_queued_jobs = options_.max_queued_jobs,
      .memory_budget_bytes = options_.job_memory_budget_bytes,
      .min_time_budget = options_.min_time_budget,
      .retry_delay = options_.retry_delay,
      .observer = metrics_.get(),
  });
  operations_ = std::make_unique<jobs::OperationRegistry>(
      jobs::OperationRegistryOptions{.ttl_after_done = options_.operation_ttl,
                                     .max_operations = options_.max_operations,
                                     .retry_delay = options_.retry_delay},
      jobs_.get());
  if (!options_.auth_tokens_file.empty()) {
    absl::StatusOr<std::unique_ptr<TokenAuthenticator>> authenticator = TokenAuthenticator::Create(
        {.path = options_.auth_tokens_file, .poll_interval = options_.auth_tokens_poll});
    if (authenticator.ok()) {
      authenticator_ = *std::move(authenticator);
    } else {
      // Reported by Start(): a server told to authenticate must not run without it.
      authenticator_status_ = absl::Status(
          authenticator.status().code(),
          absl::StrCat("--auth_tokens: ", authenticator.status().message()));
    }
  }
  access_ = std::make_unique<AccessControl>(authenticator_.get(), options_.tenant_limits,
                                            /*clock=*/nullptr, metrics_.get());
  core::PlacementCoreOptions core_options = options_.core;
  core_options.tenant_limits = [access = access_.get()](const std::string& tenant) {
    return access->LimitsFor(tenant).jobs;
  };
  core_ = std::make_unique<core::PlacementCore>(std::move(core_options), algorithms_.get(), results,
                                          jobs_.get(), operations_.get(), metrics_.get());
  if (redis_ != nullptr) {
    absl::StatusOr<std::pair<std::string, int>> redis =
        cache::ParseRedisAddress(options_.redis_address);  // parsed fine above (redis_ is set)
    shared_redis_ = std::make_unique<shared_ops::RedisClient>(shared_ops::RedisClientOptions{
        .host = redis->first,
        .port = redis->second,
        .timeout = std::min(options_.redis.timeout, options_.min_time_budget / 2),
        .connections = options_.redis.connections});
    // The coordinator's own thread writes whole results and is waited for by nobody: it gets its own
    // two connections and at least a second per round trip. Its backoff stays well below the lease:
    // once Redis answers again, this replica must adopt the jobs a stalled Redis created for it late
    // (publishing its local operations) before their leases run out and another replica takes them.
    const absl::Duration background_backoff =
        std::min(absl::Seconds(2), options_.shared_operations.lease / 4);
    background_redis_ = std::make_unique<shared_ops::RedisClient>(shared_ops::RedisClientOptions{
        .host = redis->first,
        .port = redis->second,
        .timeout = std::max(options_.redis.timeout, absl::Seconds(1)),
        .connections = 2,
        .initial_backoff = std::min(absl::Milliseconds(100), background_backoff),
        .max_backoff = background_backoff});
    replica_id_ = shared_ops::NewReplicaId();
    const shared_ops::OperationStoreOptions store_options{.key_prefix = options_.redis.key_prefix,
                                                          .consumer = replica_id_};
    shared_store_ =
        std::make_unique<shared_ops::OperationStore>(shared_redis_.get(), store_options);
    background_store_ =
        std::make_unique<shared_ops::OperationStore>(background_redis_.get(), store_options);
    shared_ops::CoordinatorOptions shared = options_.shared_operations;
    shared.ttl_after_done = options_.operation_ttl;
    shared.result_key_prefix = options_.redis.key_prefix;
    shared.result_ttl = options_.redis.ttl;
    shared.retry_delay = options_.retry_delay;
    shared.log = [](absl::string_view line) { LogLine(line); };
    coordinator_ = std::make_unique<shared_ops::OperationCoordinator>(
        std::move(shared), shared_redis_.get(), shared_store_.get(), jobs_.get(), operations_.get(),
        [core = core_.get()](const std::string& request, const std::string& tenant,
                             absl::Duration time_limit) {
          return core->RebuildSharedJob(request, tenant, time_limit);
        },
        background_redis_.get(), background_store_.get());
    core_->ShareOperations(coordinator_.get());
  }
  log_ = std::make_unique<RequestLog>(RequestLog::Options{.enabled = options_.log_requests});
  service_ = std::make_unique<PlacementServiceImpl>(
      core_.get(), metrics_.get(), log_.get(),
      PlacementServiceOptions{.max_wait_timeout = options_.max_wait_timeout,
                              .access = access_.get(),
                              .offload_threads = redis_ != nullptr ? options_.offload_threads : 0,
                              .retry_delay = options_.retry_delay,
                              .max_decoding_bytes = options_.max_decoding_bytes});
  ServiceMetrics::Sources sources{.jobs = [this] { return jobs_->Stats(); },
                                  .cache = [this] { return cache_->Stats(); },
                                  .operations = [this] { return operations_->CountByState(); },
                                  .repeat_index_bytes = [this] { return core_->repeat_index_bytes(); },
                                  .queue_capacity = options_.max_queued_jobs};
  if (redis_ != nullptr) {
    sources.cache_tiers = [this] { return tiered_->Tiers(); };
    sources.redis = [this] { return redis_->RedisStats(); };
    sources.shared_operations = [this] { return coordinator_->Stats(); };
  }
  metrics_->SetSources(std::move(sources));
}

PlacementServer::~PlacementServer() {
  Shutdown();
  // Stop scrapes before the sources they read go away.
  exposer_.reset();
}

absl::Status PlacementServer::Start() {
  absl::MutexLock lock(&shutdown_mu_);
  if (started_) return absl::FailedPreconditionError("already started");
  if (!options_.redis_address.empty()) {
    absl::StatusOr<std::pair<std::string, int>> redis =
        cache::ParseRedisAddress(options_.redis_address);
    if (!redis.ok()) {
      jobs_->Shutdown();
      return redis.status();
    }
    // Not Redis at all, or a Redis this server cannot use (a password, too old): a failed start, as
    // no retry will ever change it. A Redis that does not answer yet is only logged: the shared
    // tier is best effort, and it may be up in a moment.
    absl::Status usable = cache::CheckRedisServer(
        redis->first, redis->second, std::max(options_.redis.timeout, kRedisCheckTimeout));
    if (absl::IsUnavailable(usable)) {
      LogLine(absl::StrCat("--redis=", options_.redis_address, ": ", usable.message(),
                           "; serving from this process's cache and operations until it answers"));
    } else if (!usable.ok()) {
      jobs_->Shutdown();
      return absl::Status(usable.code(),
                          absl::StrCat("--redis=", options_.redis_address, ": ", usable.message()));
    }
  }
  started_ = true;
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      ServerCredentialsFor(options_.security);
  absl::Status configured = credentials.ok() ? authenticator_status_ : credentials.status();
  if (!configured.ok()) {
    jobs_->Shutdown();
    return configured;
  }

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT by default: a second server on the same port would then start fine and
  // the kernel would split connections between the two processes (operations of one invisible to
  // callers routed to the other). A taken port must be a failed start.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(HostPort(options_.host, options_.port), *credentials, &port_);
  if (options_.grpc_memory_bytes > 0) {
    grpc::ResourceQuota quota("placement_server");
    quota.Resize(static_cast<size_t>(options_.grpc_memory_bytes));
    builder.SetResourceQuota(quota);
  }
  builder.RegisterService(service_.get());
  builder.SetMaxReceiveMessageSize(options_.max_message_bytes);
  builder.SetMaxSendMessageSize(options_.max_message_bytes);
  // Clients may send keepalive pings every 10 s or more, also between calls.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  if (options_.max_connection_age > absl::ZeroDuration()) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                               static_cast<int>(absl::ToInt64Milliseconds(
                                   options_.max_connection_age)));
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                               static_cast<int>(absl::ToInt64Milliseconds(
                                   options_.shutdown_grace)));
  }
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    jobs_->Shutdown();
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", HostPort(options_.host, options_.port),
        ": the port is taken (another process listens on it) or the address is not local"));
  }
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  health->SetServingStatus("", true);
  health->SetServingStatus(kServiceName, true);

  if (options_.metrics_port >= 0) {
    try {
      exposer_ = std::make_unique<prometheus::Exposer>(
          HostPort(options_.host, options_.metrics_port));
    } catch (const std::exception& e) {
      server_->Shutdown(std::chrono::system_clock::now());
      jobs_->Shutdown();
      return absl::UnavailableError(
          absl::StrCat("cannot serve metrics on ", HostPort(options_.host, options_.metrics_port),
                       ": ", e.what()));
    }
    exposer_->RegisterCollectable(metrics_->registry());
    exposer_->RegisterCollectable(metrics_->gauges());
    const std::vector<int> ports = exposer_->GetListeningPorts();
    metrics_port_ = ports.empty() ? options_.metrics_port : ports.front();
  }

  LogLine(absl::StrCat("workers=", jobs_->workers(), " cache_bytes=", options_.cache_bytes,
                       " max_queued_jobs=", options_.max_queued_jobs,
                       " max_message_bytes=", options_.max_message_bytes));
  LogLine(absl::StrCat("transport: ", DescribeTransportSecurity(options_.security), "; auth: ",
                       authenticator_ != nullptr
                           ? absl::StrCat("bearer tokens from ", options_.auth_tokens_file)
                           : std::string("none (every caller is tenant \"\")")));
  if (redis_ != nullptr) {
    LogLine(absl::StrCat("shared cache: redis ", options_.redis_address,
                         " ttl=", absl::FormatDuration(options_.redis.ttl),
                         " max_value_bytes=", options_.redis.max_value_bytes, " timeout=",
                         absl::FormatDuration(std::min(options_.redis.timeout,
                                                       options_.min_time_budget / 2))));
  }
  if (coordinator_ != nullptr) {
    coordinator_->Start();
    LogLine(absl::StrCat("shared operations: redis ", options_.redis_address, " replica=",
                         replica_id_, " lease=",
                         absl::FormatDuration(options_.shared_operations.lease), " poll_interval=",
                         absl::FormatDuration(options_.shared_operations.poll_interval)));
  }
  LogLine(absl::StrCat("listening on ", HostPort(options_.host, port_)));
  if (metrics_port_ >= 0) {
    LogLine(absl::StrCat("metrics on ", HostPort(options_.host, metrics_port_)));
  }
  return absl::OkStatus();
}

void PlacementServer::Shutdown() {
  {
    absl::MutexLock lock(&shutdown_mu_);
    if (shut_down_) return;
    shut_down_ = true;
    if (!started_ || server_ == nullptr) {
      jobs_->Shutdown();
      shutdown_done_.Notify();
      return;
    }
  }
  const absl::Time begin = absl::Now();
  LogLine("shutting down: health NOT_SERVING");
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  health->SetServingStatus(kServiceName, false);
  health->SetServingStatus("", false);
  if (options_.shutdown_drain_delay > absl::ZeroDuration()) {
    absl::SleepFor(options_.shutdown_drain_delay);
  }
  // Everything from here on fits in the grace (plus the margin below and a moment to clean up),
  // whatever Redis does: a container runtime kills the process soon after it.
  const absl::Time grace_end = absl::Now() + options_.shutdown_grace;
  jobs_->StopAdmitting();
  std::thread hand_back;
  if (coordinator_ != nullptr) {
    // The jobs this replica runs for the cluster: another replica takes them over within about half
    // a second, so that a rolling restart loses nothing. On its own thread: a Redis that does not
    // answer must not delay the drain of the calls.
    hand_back = std::thread([this] { coordinator_->HandBack(); });
  }
  service_->Drain();
  LogLine(absl::StrCat("shutting down: waiting up to ",
                       absl::FormatDuration(options_.shutdown_grace), " for in-flight calls"));
  // At the end of the grace, calls still waiting for a job are answered UNAVAILABLE ("shutting
  // down", RetryInfo) by the service itself; gRPC's own cancellation, a moment later, would only
  // tell them CANCELLED.
  absl::Notification calls_done;
  std::thread aborter([this, &calls_done, grace_end] {
    if (calls_done.WaitForNotificationWithDeadline(grace_end)) return;
    if (const size_t answered = service_->AbortWaits(); answered > 0) {
      LogLine(absl::StrCat("shutting down: the grace period is over; answered the ", answered,
                           " calls still waiting UNAVAILABLE"));
    }
  });
  server_->Shutdown(absl::ToChronoTime(grace_end + kAbortMargin));
  calls_done.Notify();
  aborter.join();
  // No call is left that needs Redis: round trips still waiting for a Redis that does not answer
  // end now instead of at their timeouts.
  if (coordinator_ != nullptr) coordinator_->Stop();
  if (shared_redis_ != nullptr) shared_redis_->Close();
  if (background_redis_ != nullptr) background_redis_->Close();
  if (hand_back.joinable()) hand_back.join();
  jobs_->Shutdown();
  StopMetricsEndpoint();
  LogLine(absl::StrCat("shut down in ", absl::FormatDuration(absl::Now() - begin)));
  shutdown_done_.Notify();
}

void PlacementServer::Wait() { shutdown_done_.WaitForNotification(); }

void PlacementServer::StopMetricsEndpoint() {
  if (exposer_ == nullptr) return;
  // civetweb's listening thread looks at its stop flag only between polls of up to 2 s, so stopping
  // it took up to 2 s of a shutdown's time; a connection to the port ends the poll at once.
  absl::Notification stopped;
  std::thread stopper([this, &stopped] {
    exposer_.reset();
    stopped.Notify();
  });
  const bool wildcard = options_.host.empty() || options_.host == "0.0.0.0" || options_.host == "::";
  const std::string host = wildcard ? "127.0.0.1" : options_.host;
  while (!stopped.WaitForNotificationWithTimeout(absl::Milliseconds(20))) {
    TouchPort(host, metrics_port_);
  }
  stopper.join();
}

absl::Status PlacementServer::ReloadAuthTokens() {
  if (authenticator_ == nullptr) {
    return absl::FailedPreconditionError("no tokens file (--auth_tokens) to reload");
  }
  return authenticator_->Reload();
}

}  // namespace placement::server
