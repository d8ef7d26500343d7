#include "client/placement_client.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "placement/v1/operation.pb.h"
#include "service/engine/io/placement_file.h"

namespace placement::client {
namespace {

std::chrono::system_clock::time_point ToChrono(absl::Time t) {
  if (t == absl::InfiniteFuture()) return std::chrono::system_clock::time_point::max();
  return absl::ToChronoTime(t);
}

absl::Status AddDetails(absl::Status status, const v1::Status& proto) {
  for (const google::protobuf::Any& detail : proto.details()) {
    status.SetPayload(detail.type_url(), absl::Cord(detail.value()));
  }
  return status;
}

}  // namespace

const char* ServingStatusName(ServingStatus status) {
  switch (status) {
    case ServingStatus::kServing: return "SERVING";
    case ServingStatus::kNotServing: return "NOT_SERVING";
    case ServingStatus::kServiceUnknown: return "SERVICE_UNKNOWN";
    case ServingStatus::kUnknown: break;
  }
  return "UNKNOWN";
}

std::shared_ptr<grpc::Channel> MakeChannel(const ClientOptions& options) {
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(options.max_message_bytes);
  arguments.SetMaxSendMessageSize(options.max_message_bytes);
  if (!options.load_balancing_policy.empty()) {
    arguments.SetLoadBalancingPolicyName(options.load_balancing_policy);
  }
  if (!options.tls.enabled) {
    return grpc::CreateCustomChannel(options.target, grpc::InsecureChannelCredentials(), arguments);
  }
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = options.tls.ca_pem;
  ssl.pem_cert_chain = options.tls.cert_pem;
  ssl.pem_private_key = options.tls.key_pem;
  if (!options.tls.server_name_override.empty()) {
    arguments.SetSslTargetNameOverride(options.tls.server_name_override);
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::SslCredentials(ssl);
  if (!options.token.empty()) {
    credentials = grpc::CompositeChannelCredentials(
        credentials, grpc::AccessTokenCredentials(options.token));
  }
  return grpc::CreateCustomChannel(options.target, credentials, arguments);
}

namespace {

absl::StatusOr<std::string> ReadWholeFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read the ", what, " file ", path));
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

}  // namespace

absl::Status LoadTlsFiles(const std::string& ca_file, const std::string& cert_file,
                          const std::string& key_file, TlsOptions* tls) {
  if (cert_file.empty() != key_file.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key go together");
  }
  const std::pair<const std::string*, std::string*> files[] = {
      {&ca_file, &tls->ca_pem}, {&cert_file, &tls->cert_pem}, {&key_file, &tls->key_pem}};
  const char* what[] = {"TLS CA", "TLS certificate", "TLS key"};
  for (int i = 0; i < 3; ++i) {
    if (files[i].first->empty()) continue;
    absl::StatusOr<std::string> pem = ReadWholeFile(*files[i].first, what[i]);
    if (!pem.ok()) return pem.status();
    if (pem->empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the ", what[i], " file ", *files[i].first, " is empty"));
    }
    *files[i].second = *std::move(pem);
    tls->enabled = true;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadWholeFile(path, "token");
  if (!text.ok()) return text.status();
  const absl::string_view first_line = absl::StripAsciiWhitespace(
      absl::string_view(*text).substr(0, absl::string_view(*text).find('\n')));
  if (first_line.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("the token file ", path, " is empty"));
  }
  return std::string(first_line);
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  absl::Status converted(static_cast<absl::StatusCode>(status.error_code()),
                         status.error_message());
  if (!status.error_details().empty()) {
    v1::Status proto;
    if (proto.ParseFromString(status.error_details())) {
      converted = AddDetails(std::move(converted), proto);
    }
  }
  return converted;
}

absl::Status FromStatusProto(const v1::Status& status) {
  if (status.code() == 0) return absl::OkStatus();
  return AddDetails(absl::Status(static_cast<absl::StatusCode>(status.code()), status.message()),
                    status);
}

std::string StatusLine(const absl::Status& status) {
  return absl::StrCat(absl::StatusCodeToString(status.code()), ": ",
                      std::string(status.message()));
}

absl::Duration BackoffDelay(const RetryOptions& options, int retry) {
  const double factor = std::pow(options.multiplier, std::max(0, retry));
  return std::min(options.max_backoff, options.initial_backoff * factor);
}

PlacementClient::PlacementClient(ClientOptions options)
    : PlacementClient(options, MakeChannel(options)) {
  token_in_channel_ = options_.tls.enabled && !options_.token.empty();
}

void PlacementClient::Authorize(grpc::ClientContext& context) const {
  if (options_.token.empty() || token_in_channel_) return;
  context.AddMetadata("authorization", absl::StrCat("Bearer ", options_.token));
}

// Operations live in the replica that created them: calls about an operation this client submitted
// with a routing digest carry the same digest, so a hashing proxy sends them to that replica.
class PlacementClient::OperationRoutes {
 public:
  // Enough for any one client's operations in flight; when full it starts over (a forgotten
  // operation's calls are balanced like unrouted ones).
  static constexpr size_t kMaxRemembered = 4096;

  void Remember(const std::string& operation, const std::string& digest) {
    absl::MutexLock lock(&mu_);
    if (digests_.size() >= kMaxRemembered) digests_.clear();
    digests_[operation] = digest;
  }
  std::string DigestOf(const std::string& operation) const {
    absl::MutexLock lock(&mu_);
    auto it = digests_.find(operation);
    return it == digests_.end() ? std::string() : it->second;
  }

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::string> digests_ ABSL_GUARDED_BY(mu_);
};

PlacementClient::PlacementClient(ClientOptions options, std::shared_ptr<grpc::Channel> channel)
    : operation_routes_(std::make_shared<OperationRoutes>()),
      options_(std::move(options)),
      channel_(std::move(channel)),
      stub_(v1::PlacementService::NewStub(channel_)) {}

absl::Time PlacementClient::DeadlineFor(absl::Duration timeout) const {
  return absl::Now() + (timeout > absl::ZeroDuration() ? timeout : options_.default_timeout);
}

absl::Status PlacementClient::WaitForConnected(absl::Duration timeout) {
  if (channel_->WaitForConnected(ToChrono(absl::Now() + timeout))) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("cannot connect to ", options_.target, " within ",
                                             absl::FormatDuration(timeout)));
}

absl::Status PlacementClient::CallWithRetries(
    absl::Time deadline, const std::function<grpc::Status(grpc::ClientContext&)>& attempt) {
  absl::BitGen random;
  for (int tries = 1;; ++tries) {
    grpc::ClientContext context;
    context.set_deadline(ToChrono(deadline));
    Authorize(context);
    absl::Status status = FromGrpcStatus(attempt(context));
    if (status.code() != absl::StatusCode::kUnavailable ||
        tries >= options_.retry.max_attempts) {
      return status;
    }
    absl::Duration delay = BackoffDelay(options_.retry, tries - 1);
    const double jitter = options_.retry.jitter;
    if (jitter > 0) delay *= absl::Uniform(random, 1.0 - jitter, 1.0 + jitter);
    if (std::optional<absl::Duration> hint = RetryDelayOf(status)) delay = std::max(delay, *hint);
    if (absl::Now() + delay >= deadline) return status;  // no time left for another try
    absl::SleepFor(delay);
  }
}

std::string PlacementClient::RoutingDigest(const v1::PlaceRequest& request) const {
  if (!options_.routing_digest) return "";
  absl::StatusOr<std::string> digest = options_.routing_digest(request);
  return digest.ok() ? *std::move(digest) : "";
}

template <typename Request, typename Response>
absl::Status PlacementClient::Call(
    grpc::Status (v1::PlacementService::Stub::*rpc)(grpc::ClientContext*, const Request&,
                                                    Response*),
    const Request& request, Response* response, absl::Time deadline, const std::string& digest) {
  return CallWithRetries(deadline, [&](grpc::ClientContext& context) {
    if (!digest.empty()) context.AddMetadata(kDigestHeader, digest);
    return (stub_.get()->*rpc)(&context, request, response);
  });
}

template <typename Request, typename Response>
absl::StatusOr<v1::Operation> PlacementClient::CallOnOperation(
    grpc::Status (v1::PlacementService::Stub::*rpc)(grpc::ClientContext*, const Request&,
                                                    Response*),
    const std::string& name, Request request, absl::Time deadline) {
  request.set_name(name);
  Response response;
  absl::Status status =
      Call(rpc, request, &response, deadline, operation_routes_->DigestOf(name));
  if (!status.ok()) return status;
  return std::move(*response.mutable_operation());
}

absl::StatusOr<v1::PlaceResponse> PlacementClient::Place(const v1::PlaceRequest& request,
                                                         absl::Duration timeout) {
  v1::PlaceResponse response;
  absl::Status status = Call(&v1::PlacementService::Stub::Place, request, &response,
                             DeadlineFor(timeout), RoutingDigest(request));
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<v1::Operation> PlacementClient::Submit(const v1::PlaceRequest& request,
                                                      absl::Duration timeout) {
  v1::SubmitPlacementRequest submit;
  *submit.mutable_request() = request;
  v1::SubmitPlacementResponse response;
  const std::string digest = RoutingDigest(request);
  absl::Status status = Call(&v1::PlacementService::Stub::SubmitPlacement, submit, &response,
                             DeadlineFor(timeout), digest);
  if (!status.ok()) return status;
  if (!digest.empty()) operation_routes_->Remember(response.operation().name(), digest);
  return std::move(*response.mutable_operation());
}

absl::StatusOr<v1::Operation> PlacementClient::GetOperation(const std::string& name) {
  return CallOnOperation(&v1::PlacementService::Stub::GetOperation, name,
                         v1::GetOperationRequest(), DeadlineFor(absl::ZeroDuration()));
}

absl::StatusOr<v1::Operation> PlacementClient::WaitOperation(const std::string& name,
                                                             absl::Duration wait) {
  v1::WaitOperationRequest request;
  const int64_t nanos = absl::ToInt64Nanoseconds(wait);
  request.mutable_timeout()->set_seconds(nanos / 1'000'000'000);
  request.mutable_timeout()->set_nanos(static_cast<int32_t>(nanos % 1'000'000'000));
  // Leave the server room to answer before the call's own deadline.
  return CallOnOperation(&v1::PlacementService::Stub::WaitOperation, name, std::move(request),
                         absl::Now() + wait + absl::Seconds(10));
}

absl::StatusOr<v1::Operation> PlacementClient::CancelOperation(const std::string& name) {
  return CallOnOperation(&v1::PlacementService::Stub::CancelOperation, name,
                         v1::CancelOperationRequest(), DeadlineFor(absl::ZeroDuration()));
}

absl::StatusOr<v1::Operation> PlacementClient::WatchOperation(
    const std::string& name, const std::function<void(const v1::Operation&)>& on_update,
    absl::Time deadline) {
  v1::WatchOperationRequest request;
  request.set_name(name);
  grpc::ClientContext context;
  if (const std::string digest = operation_routes_->DigestOf(name); !digest.empty()) {
    context.AddMetadata(kDigestHeader, digest);
  }
  context.set_deadline(ToChrono(deadline));
  Authorize(context);
  std::unique_ptr<grpc::ClientReader<v1::WatchOperationResponse>> reader =
      stub_->WatchOperation(&context, request);
  v1::WatchOperationResponse message;
  std::optional<v1::Operation> last;
  while (reader->Read(&message)) {
    if (on_update) on_update(message.operation());
    last = std::move(*message.mutable_operation());
  }
  absl::Status status = FromGrpcStatus(reader->Finish());
  if (!status.ok()) return status;
  if (!last.has_value()) return absl::UnknownError("the watch stream ended without a message");
  return *std::move(last);
}

absl::StatusOr<v1::Operation> PlacementClient::WaitUntilDone(
    const std::string& name, absl::Time deadline,
    const std::function<void(const v1::Operation&)>& on_update) {
  absl::StatusOr<v1::Operation> watched = WatchOperation(name, on_update, deadline);
  if (watched.ok() && watched->done()) return watched;
  if (!watched.ok() && watched.status().code() != absl::StatusCode::kUnavailable &&
      watched.status().code() != absl::StatusCode::kUnknown) {
    return watched;  // NOT_FOUND, DEADLINE_EXCEEDED, ...
  }
  // The server ended the stream because it is shutting down: its operations end with it, so
  // polling it would only spin until it is gone. Its message says what to do.
  if (!watched.ok() && absl::StrContains(watched.status().message(), "shutting down")) {
    return watched;
  }
  // The stream broke (e.g. the connection was reset): fall back to long polls.
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(
          absl::StrCat("operation ", name, " was not done before the deadline"));
    }
    absl::StatusOr<v1::Operation> op = WaitOperation(name, std::min(left, absl::Seconds(30)));
    if (!op.ok() && op.status().code() == absl::StatusCode::kCancelled) {
      // This client never cancels the wait: the server (or the connection) ended it.
      return absl::UnavailableError(absl::StrCat(
          "the server ended the wait for ", name,
          " (it is shutting down or the connection broke); operations do not survive a server "
          "restart: submit the request again (the same request_id) once a server is back"));
    }
    if (!op.ok()) return op;
    if (on_update) on_update(*op);
    if (op->done()) return op;
  }
}

absl::StatusOr<v1::EvaluateResponse> PlacementClient::Evaluate(const v1::EvaluateRequest& request,
                                                               absl::Duration timeout) {
  v1::EvaluateResponse response;
  absl::Status status = CallWithRetries(DeadlineFor(timeout), [&](grpc::ClientContext& context) {
    return stub_->Evaluate(&context, request, &response);
  });
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<v1::RecommendResponse> PlacementClient::Recommend(const v1::RecommendRequest& request,
                                                                 absl::Duration timeout) {
  v1::RecommendResponse response;
  absl::Status status = CallWithRetries(DeadlineFor(timeout), [&](grpc::ClientContext& context) {
    return stub_->Recommend(&context, request, &response);
  });
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<v1::ListAlgorithmsResponse> PlacementClient::ListAlgorithms() {
  v1::ListAlgorithmsRequest request;
  v1::ListAlgorithmsResponse response;
  absl::Status status = CallWithRetries(
      DeadlineFor(absl::ZeroDuration()), [&](grpc::ClientContext& context) {
        return stub_->ListAlgorithms(&context, request, &response);
      });
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<ServingStatus> PlacementClient::CheckHealth(const std::string& service,
                                                           absl::Duration timeout) {
  std::unique_ptr<grpc::health::v1::Health::Stub> health =
      grpc::health::v1::Health::NewStub(channel_);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  grpc::ClientContext context;
  context.set_deadline(ToChrono(absl::Now() + timeout));
  Authorize(context);
  absl::Status status = FromGrpcStatus(health->Check(&context, request, &response));
  if (status.code() == absl::StatusCode::kNotFound) return ServingStatus::kServiceUnknown;
  if (!status.ok()) return status;
  switch (response.status()) {
    case grpc::health::v1::HealthCheckResponse::SERVING: return ServingStatus::kServing;
    case grpc::health::v1::HealthCheckResponse::NOT_SERVING: return ServingStatus::kNotServing;
    case grpc::health::v1::HealthCheckResponse::SERVICE_UNKNOWN:
      return ServingStatus::kServiceUnknown;
    default: return ServingStatus::kUnknown;
  }
}

absl::StatusOr<v1::PlaceRequest> ReplacementRequest(v1::PlaceRequest request,
                                                    const v1::PlaceRequest& previous_request,
                                                    const v1::Placement& previous_answer,
                                                    double move_weight_ns_per_byte) {
  const absl::Status set = engine::SetPreviousPlacement(previous_request, previous_answer, request.cluster(),
                                                        request.mutable_options());
  if (!set.ok()) return set;
  request.mutable_options()->set_move_weight_ns_per_byte(move_weight_ns_per_byte);
  return request;
}

}  // namespace placement::client
