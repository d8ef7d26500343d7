// nginx_process.h — a throw-away nginx in front of placement_server replicas, for routing tests.
//
// It runs the shipped site config, deploy/nginx/placement.conf (hash on x-placement-digest,
// consistent; grpc_pass; failover to the next replica), with its `server` lines replaced by the
// test's replicas and its `listen` by a free port on 127.0.0.1, inside a generated nginx.conf that
// keeps the pid file, logs and temp paths in a temp directory — so it runs without root and without
// touching /etc/nginx or /var. Tests skip (GTEST_SKIP) when Start says NOT_FOUND.
//
// Example:
//   absl::StatusOr<std::unique_ptr<NginxProcess>> router = NginxProcess::Start({a->port(), b->port()});
//   if (absl::IsNotFound(router.status())) GTEST_SKIP() << router.status();
//   PlacementClient client({.target = (*router)->address(), .routing_digest = RoutingDigestOf});
#ifndef PLACEMENT_TESTS_E2E_NGINX_PROCESS_H_
#define PLACEMENT_TESTS_E2E_NGINX_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace placement::e2e {

// The nginx binary ($PLACEMENT_NGINX, else /usr/sbin/nginx, else nginx on PATH), or "".
std::string FindNginxBinary();

// The nginx.conf routing gRPC on `listen_port` to the replicas on 127.0.0.1:`replica_ports` with
// deploy/nginx/placement.conf, every writable path under `dir`.
absl::StatusOr<std::string> NginxConfig(const std::string& dir, int listen_port,
                                        const std::vector<int>& replica_ports);

class NginxProcess {
 public:
  // NOT_FOUND without nginx; FAILED_PRECONDITION (with its error log) when it does not come up.
  static absl::StatusOr<std::unique_ptr<NginxProcess>> Start(
      const std::vector<int>& replica_ports, absl::Duration timeout = absl::Seconds(10));
  // Stops nginx (SIGQUIT, then SIGKILL) and removes its directory.
  ~NginxProcess();

  int port() const { return port_; }
  std::string address() const;
  std::string ErrorLog() const;

 private:
  NginxProcess() = default;

  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace placement::e2e

#endif  // PLACEMENT_TESTS_E2E_NGINX_PROCESS_H_
