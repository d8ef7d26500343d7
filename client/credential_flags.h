// credential_flags.h — the command-line flags every client binary shares for TLS and tokens.
//
//   --token=TOKEN | --token_file=FILE     bearer token (the file's first line); never printed
//   --tls_ca=FILE                         TLS, verifying the server with this CA (PEM)
//   --tls                                 TLS, verifying the server with the system's CAs
//   --tls_cert=FILE --tls_key=FILE        client certificate for servers that require mutual TLS
//   --tls_server_name=NAME                name to check in the server's certificate
//
// Example (in main, after absl::ParseCommandLine):
//   ClientOptions options;
//   if (absl::Status applied = ApplyCredentialFlags(&options); !applied.ok()) { ... exit 64/66 ... }
#ifndef PLACEMENT_CLIENT_CREDENTIAL_FLAGS_H_
#define PLACEMENT_CLIENT_CREDENTIAL_FLAGS_H_

#include "absl/status/status.h"
#include "client/placement_client.h"

namespace placement::client {

// Fills options->tls and options->token from the flags. INVALID_ARGUMENT for contradictory flags,
// NOT_FOUND for unreadable files (the message names the flag, never the token).
absl::Status ApplyCredentialFlags(ClientOptions* options);

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_CREDENTIAL_FLAGS_H_
