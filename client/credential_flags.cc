#include "client/credential_flags.h"

#include <string>

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, token, "",
          "Bearer token sent as `authorization: Bearer TOKEN` (prefer --token_file: command lines "
          "are visible to other users).");
ABSL_FLAG(std::string, token_file, "", "File whose first line is the bearer token.");
ABSL_FLAG(bool, tls, false, "Use TLS, verifying the server with the system's root CAs.");
ABSL_FLAG(std::string, tls_ca, "", "Use TLS, verifying the server with this CA (PEM file).");
ABSL_FLAG(std::string, tls_cert, "",
          "Client certificate chain (PEM) for servers that require mutual TLS; needs --tls_key.");
ABSL_FLAG(std::string, tls_key, "", "Private key (PEM) of --tls_cert.");
ABSL_FLAG(std::string, tls_server_name, "",
          "Name to check in the server's certificate instead of the --server host.");

namespace placement::client {

absl::Status ApplyCredentialFlags(ClientOptions* options) {
  const std::string token = absl::GetFlag(FLAGS_token);
  const std::string token_file = absl::GetFlag(FLAGS_token_file);
  if (!token.empty() && !token_file.empty()) {
    return absl::InvalidArgumentError("give --token or --token_file, not both");
  }
  if (!token_file.empty()) {
    absl::StatusOr<std::string> read = ReadTokenFile(token_file);
    if (!read.ok()) return read.status();
    options->token = *std::move(read);
  } else {
    options->token = token;
  }
  if (absl::Status loaded = LoadTlsFiles(absl::GetFlag(FLAGS_tls_ca), absl::GetFlag(FLAGS_tls_cert),
                                         absl::GetFlag(FLAGS_tls_key), &options->tls);
      !loaded.ok()) {
    return loaded;
  }
  if (absl::GetFlag(FLAGS_tls)) options->tls.enabled = true;
  options->tls.server_name_override = absl::GetFlag(FLAGS_tls_server_name);
  if (!options->tls.server_name_override.empty() && !options->tls.enabled) {
    return absl::InvalidArgumentError("--tls_server_name needs TLS (--tls or --tls_ca)");
  }
  return absl::OkStatus();
}

}  // namespace placement::client
