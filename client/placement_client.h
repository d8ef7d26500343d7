// placement_client.h — a small C++ client for placement.v1.PlacementService.
//
// What it adds over the generated stub: one channel set up with explicit message size limits (and an
// optional load-balancing policy), a deadline on every call, retries with exponential backoff and jitter
// on UNAVAILABLE (honouring the server's RetryInfo hint, never past the call's deadline), statuses as
// absl::Status with the server's details kept as payloads (BadRequest field violations, RetryInfo), the
// long-running-operation helpers (watch or wait until done), the standard health check, and TLS / mutual
// TLS plus a bearer token (ClientOptions::tls, ::token).
//
// Retries: every RPC here is safe to retry on UNAVAILABLE: Place, Evaluate and the operation reads are
// idempotent, CancelOperation is too, and SubmitPlacement is deduplicated by the server when the request
// carries a request_id (without one, a retry may create a second operation for the same computation,
// which the server still computes once).
//
// Example:
//   PlacementClient client({.target = "localhost:50051"});
//   absl::StatusOr<v1::PlaceResponse> placed = client.Place(request);
//   if (!placed.ok()) std::cerr << StatusLine(placed.status());   // "INVALID_ARGUMENT: ..."
//
//   absl::StatusOr<v1::Operation> op = client.Submit(request);
//   absl::StatusOr<v1::Operation> done = client.WaitUntilDone(op->name(), absl::Now() + absl::Minutes(5),
//       [](const v1::Operation& update) { ShowProgress(update.metadata()); });
#ifndef PLACEMENT_CLIENT_PLACEMENT_CLIENT_H_
#define PLACEMENT_CLIENT_PLACEMENT_CLIENT_H_

#include <functional>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "placement/v1/placement_service.grpc.pb.h"
#include "service/status_payloads/status_payloads.h"

namespace placement::client {

struct RetryOptions {
  // Tries per call, the first included (1 = no retries).
  int max_attempts = 5;
  absl::Duration initial_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(5);
  double multiplier = 2.0;
  // Each delay is scaled by a random factor in [1 - jitter, 1 + jitter].
  double jitter = 0.2;
};

// Metadata key carrying the routing key (routing_digest.h), for cache-affine routing by a hashing proxy
// (deploy/nginx/placement.conf hashes on it; deploy/README.md shows the Envoy equivalent).
inline constexpr char kDigestHeader[] = "x-placement-digest";

// Transport security of the channel. PEM contents, not paths (see LoadTlsFiles).
struct TlsOptions {
  // TLS; with an empty ca_pem the system's root CAs verify the server.
  bool enabled = false;
  // The CA(s) that signed the server's certificate.
  std::string ca_pem;
  // The client's certificate chain and private key, for servers that require mutual TLS.
  std::string cert_pem;
  std::string key_pem;
  // Name checked against the server's certificate instead of the target's host ("" = the host).
  std::string server_name_override;
};

struct ClientOptions {
  // "host:port", or any gRPC target ("dns:///placement-headless:50051", "unix:/path").
  std::string target = "localhost:50051";
  // Deadline of a call that does not pass its own timeout.
  absl::Duration default_timeout = absl::Minutes(5);
  // Largest message received or sent; match the server's --max_message_bytes.
  int max_message_bytes = 256 << 20;
  // "" = gRPC's default (pick_first); "round_robin" spreads calls over all resolved addresses.
  std::string load_balancing_policy = "";
  TlsOptions tls = {};
  // Bearer token sent as `authorization: Bearer <token>` on every call ("" = none). Over TLS it travels
  // as gRPC call credentials; on a plaintext channel (where gRPC refuses call credentials) it is added
  // to each call's metadata, readable by anyone on the path — use TLS beyond the local host.
  // Never logged.
  std::string token = "";
  RetryOptions retry;
  // Cache-affine routing: when set, Place and Submit send its result as `x-placement-digest`, so that
  // a proxy hashing on that header sends identical requests to the same replica (whose cache has the
  // answer); later calls about an operation this client submitted carry the same header, so they
  // reach the replica that holds the operation. Use RoutingDigestOf (client/routing_digest.h,
  // library placement_routing): a digest of the request's content, the same in any op order. An
  // error result sends no header (the proxy then balances the call like any other).
  std::function<absl::StatusOr<std::string>(const v1::PlaceRequest&)> routing_digest = nullptr;
};

// Reads PEM files into `tls` and enables TLS when any path is non-empty; `cert_file` and `key_file` go
// together. NOT_FOUND / INVALID_ARGUMENT naming the file.
absl::Status LoadTlsFiles(const std::string& ca_file, const std::string& cert_file,
                          const std::string& key_file, TlsOptions* tls);
// The token in `path`: its first line, without surrounding whitespace. NOT_FOUND / INVALID_ARGUMENT
// (empty). The error never contains the token.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

enum class ServingStatus { kUnknown, kServing, kNotServing, kServiceUnknown };
const char* ServingStatusName(ServingStatus status);

class PlacementClient {
 public:
  explicit PlacementClient(ClientOptions options);
  // Uses an existing channel (e.g. an in-process one); options.tls is ignored and a token goes into each
  // call's metadata.
  PlacementClient(ClientOptions options, std::shared_ptr<grpc::Channel> channel);

  // Waits until the channel is connected. UNAVAILABLE when it is not within `timeout`.
  absl::Status WaitForConnected(absl::Duration timeout);

  // `timeout` = zero → options.default_timeout. The server caps the algorithm's time limit by it.
  absl::StatusOr<v1::PlaceResponse> Place(const v1::PlaceRequest& request,
                                          absl::Duration timeout = absl::ZeroDuration());
  absl::StatusOr<v1::Operation> Submit(const v1::PlaceRequest& request,
                                       absl::Duration timeout = absl::ZeroDuration());
  absl::StatusOr<v1::Operation> GetOperation(const std::string& name);
  // Returns when the operation is done or `wait` passed (then done may be false).
  absl::StatusOr<v1::Operation> WaitOperation(const std::string& name, absl::Duration wait);
  absl::StatusOr<v1::Operation> CancelOperation(const std::string& name);
  // Streams the operation until done; every message goes to `on_update`. Returns the last one.
  absl::StatusOr<v1::Operation> WatchOperation(
      const std::string& name, const std::function<void(const v1::Operation&)>& on_update,
      absl::Time deadline);
  // Until the operation is done or `deadline` passes (DEADLINE_EXCEEDED): watches it, and falls back
  // to repeated WaitOperation calls if the stream breaks.
  absl::StatusOr<v1::Operation> WaitUntilDone(
      const std::string& name, absl::Time deadline,
      const std::function<void(const v1::Operation&)>& on_update = nullptr);
  absl::StatusOr<v1::EvaluateResponse> Evaluate(const v1::EvaluateRequest& request,
                                                absl::Duration timeout = absl::ZeroDuration());
  absl::StatusOr<v1::ListAlgorithmsResponse> ListAlgorithms();
  // How many devices: every candidate of the pool placed (or, with submit_only, started), the table and
  // the recommendation. Safe to retry like Place (every candidate is an ordinary cached request).
  absl::StatusOr<v1::RecommendResponse> Recommend(const v1::RecommendRequest& request,
                                                  absl::Duration timeout = absl::ZeroDuration());
  // grpc.health.v1 Check; "" = the server as a whole. NOT_FOUND from the server → kServiceUnknown.
  absl::StatusOr<ServingStatus> CheckHealth(const std::string& service,
                                            absl::Duration timeout = absl::Seconds(5));

  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }
  v1::PlacementService::Stub& stub() { return *stub_; }
  const ClientOptions& options() const { return options_; }

 private:
  // Runs `attempt` (one RPC with the given context) until it succeeds, fails with a non-retryable
  // status, runs out of attempts or the deadline passes.
  absl::Status CallWithRetries(absl::Time deadline,
                               const std::function<grpc::Status(grpc::ClientContext&)>& attempt);
  // One unary RPC of the stub (`rpc`), retried as above, routed with `digest` (the x-placement-digest
  // header; "" = none).
  template <typename Request, typename Response>
  absl::Status Call(grpc::Status (v1::PlacementService::Stub::*rpc)(grpc::ClientContext*,
                                                                     const Request&, Response*),
                    const Request& request, Response* response, absl::Time deadline,
                    const std::string& digest);
  // Get, Wait, Cancel: `rpc` on the operation `name`, routed to the replica it was submitted to.
  template <typename Request, typename Response>
  absl::StatusOr<v1::Operation> CallOnOperation(
      grpc::Status (v1::PlacementService::Stub::*rpc)(grpc::ClientContext*, const Request&,
                                                      Response*),
      const std::string& name, Request request, absl::Time deadline);
  absl::Time DeadlineFor(absl::Duration timeout) const;
  // Adds the token to `context` unless the channel's call credentials carry it.
  void Authorize(grpc::ClientContext& context) const;
  // options_.routing_digest(request), or "" (no header).
  std::string RoutingDigest(const v1::PlaceRequest& request) const;

  class OperationRoutes;
  // Operation name → the digest it was submitted with (see ClientOptions::routing_digest).
  std::shared_ptr<OperationRoutes> operation_routes_;

  const ClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::PlacementService::Stub> stub_;
  // The channel was made with the token as call credentials (TLS).
  bool token_in_channel_ = false;
};

// A channel with the options' message size limits, load-balancing policy and transport security (TLS
// channels carry the token as call credentials).
std::shared_ptr<grpc::Channel> MakeChannel(const ClientOptions& options);

// grpc::Status → absl::Status (same code); each detail of the grpc-status-details-bin trailer becomes a
// payload keyed by its type URL.
absl::Status FromGrpcStatus(const grpc::Status& status);
// An operation's error as an absl::Status (OK when it has none).
absl::Status FromStatusProto(const v1::Status& status);

// The server's retry hint and field violations (INVALID_ARGUMENT, as (field, description) pairs), read
// from the payloads FromGrpcStatus keeps, by the functions the server wrote them with.
using status_payloads::FieldViolationsOf;
using status_payloads::RetryDelayOf;

// Re-placement after the cluster changed: `request` (the job on its new cluster) with the answer it had,
// `previous_answer` to `previous_request`, as options.previous_placement (op name -> device name), the
// previous cluster's devices that the new one lacks as options.departed_devices, and the price of a
// moved byte (ns of step; 0 = moves are free but the previous placement still seeds the solve).
// INVALID_ARGUMENT when the answer does not fit `previous_request` (one device in range per op).
//   auto again = client::ReplacementRequest(on_seven_gpus, on_eight_gpus, answer.placement(), 1e-3);
//   if (again.ok()) auto replaced = client.Place(*again);  // metrics.ops_moved / bytes_moved
absl::StatusOr<v1::PlaceRequest> ReplacementRequest(v1::PlaceRequest request,
                                                    const v1::PlaceRequest& previous_request,
                                                    const v1::Placement& previous_answer,
                                                    double move_weight_ns_per_byte);

// "CODE_NAME: message" — how placementctl prints errors.
std::string StatusLine(const absl::Status& status);

// Delay before retry number `retry` (0 = first retry), before jitter.
absl::Duration BackoffDelay(const RetryOptions& options, int retry);

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_PLACEMENT_CLIENT_H_
