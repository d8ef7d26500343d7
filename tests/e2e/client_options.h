// client_options.h — the client options end-to-end tests use to talk to one server directly.
//
// One attempt (a retry would hide the failure a test looks for), a 30 s deadline (generous for
// sanitizer builds, short enough that a hang fails the test) and an optional bearer token.
//
// Example:
//   PlacementClient team_a(OneAttemptOptions(*server, "team-a-token"));
#ifndef PLACEMENT_TESTS_E2E_CLIENT_OPTIONS_H_
#define PLACEMENT_TESTS_E2E_CLIENT_OPTIONS_H_

#include <string>

#include "absl/time/time.h"
#include "client/placement_client.h"
#include "tests/e2e/server_process.h"

namespace placement::e2e {

inline client::ClientOptions OneAttemptOptions(const ServerProcess& server, const std::string& token = "") {
  client::ClientOptions options;
  options.target = server.address();
  options.default_timeout = absl::Seconds(30);
  options.retry.max_attempts = 1;
  options.token = token;
  return options;
}

}  // namespace placement::e2e

#endif  // PLACEMENT_TESTS_E2E_CLIENT_OPTIONS_H_
