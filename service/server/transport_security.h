// transport_security.h — the gRPC port's credentials: TLS, mutual TLS, or plaintext on request only.
//
// The server never falls back to plaintext by itself: with neither certificate files nor an explicit
// `insecure` it refuses to start, so a forgotten flag in a deployment is a failed start, not an open
// port. Certificate and key are parsed here (OpenSSL) and must match, so a wrong file is a clear error
// at start-up instead of failing handshakes later. Rotating certificates needs a restart (rolling).
//
// Example:
//   absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
//       ServerCredentialsFor({.cert_file = "server.pem", .key_file = "server.key",
//                             .client_ca_file = "clients-ca.pem"});
//   builder.AddListeningPort(address, *credentials, &port);
#ifndef PLACEMENT_SERVICE_SERVER_TRANSPORT_SECURITY_H_
#define PLACEMENT_SERVICE_SERVER_TRANSPORT_SECURITY_H_

#include <memory>
#include <string>

#include <grpcpp/security/server_credentials.h>

#include "absl/status/statusor.h"

namespace placement::server {

// Transport security of the gRPC port. Plaintext only when `insecure` is set explicitly.
struct TransportSecurityOptions {
  // PEM files of the server's certificate chain and private key: TLS.
  std::string cert_file;
  std::string key_file;
  // PEM file of the CA(s) that sign client certificates: mutual TLS (a client without a certificate
  // this CA verifies cannot connect). Needs cert_file and key_file.
  std::string client_ca_file;
  // Plaintext (local use and tests). Exclusive with the files above.
  bool insecure = false;
};

// INVALID_ARGUMENT for a contradictory or missing choice, or for files that are not a matching PEM
// certificate chain / private key / CA bundle; NOT_FOUND for unreadable files.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFor(
    const TransportSecurityOptions& security);

// "TLS", "mutual TLS" or "plaintext (--insecure)": for the start-up log.
std::string DescribeTransportSecurity(const TransportSecurityOptions& security);

}  // namespace placement::server

#endif  // PLACEMENT_SERVICE_SERVER_TRANSPORT_SECURITY_H_
