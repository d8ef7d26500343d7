// auth_tokens.h — bearer-token authentication from a tokens file, reloaded when the file changes.
//
// The file maps tokens to tenants, one per line; `#` starts a comment, blank lines are ignored:
//
//   # token                           tenant     optional per-tenant limits (override the flags)
//   3f9c0d7e61a24b8e9d51c2aa7f04b6e1  team-a
//   0b7e44c1d2f3a4b5c6d7e8f9a0b1c2d3  team-b     max_running=2 max_queued=8 rate_qps=5 burst=20
//
// Tokens are 16 to 512 printable ASCII characters without spaces; several tokens may name one tenant
// (rotation). Tenants are 1 to 64 of [A-Za-z0-9._-] (they become metric labels and log fields). Only
// the SHA-256 of each token is kept in memory; a presented token is hashed and looked up by its hash,
// so the lookup's timing depends on the hash, never on how many leading characters of a real token an
// attacker guessed. Errors name the line, never the token.
//
// TokenAuthenticator answers "which tenant is this `authorization: Bearer <token>` value?". It checks
// the file's identity (mtime, size, inode) at most once per `poll_interval`, on the calls themselves (no
// thread), and reloads it when it changed; Reload() forces it (SIGHUP). A file that fails to load keeps
// the previous tokens in force (and is logged) — a half-written file must not lock everyone out.
//
// Example:
//   absl::StatusOr<std::unique_ptr<TokenAuthenticator>> auth =
//       TokenAuthenticator::Create({.path = "/etc/placement/tokens"});
//   absl::StatusOr<std::string> tenant = (*auth)->Authenticate("Bearer 3f9c0d7e61a24b8e9d51c2aa7f04b6e1");
//   // "team-a"; UNAUTHENTICATED for a missing, malformed or unknown token.
#ifndef PLACEMENT_SERVICE_SERVER_AUTH_TOKENS_H_
#define PLACEMENT_SERVICE_SERVER_AUTH_TOKENS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "service/clock/clock.h"
#include "service/server/tenant_limits.h"

namespace placement::server {

// Per-tenant limits from the tokens file; unset fields fall back to the server's flags.
struct TenantOverrides {
  std::optional<int> max_running;
  std::optional<int> max_queued;
  std::optional<double> rate_qps;
  std::optional<double> burst;

  TenantLimits ApplyTo(TenantLimits defaults) const;
};

struct TokenTable {
  // Hex SHA-256 of a token → its tenant.
  absl::flat_hash_map<std::string, std::string> tenant_by_token_sha256;
  // Tenants with overrides (a later line's value for the same field wins).
  absl::flat_hash_map<std::string, TenantOverrides> overrides;
  int64_t tenants = 0;
};

// Parses a tokens file's contents. INVALID_ARGUMENT naming the first bad line (never its token).
absl::StatusOr<TokenTable> ParseTokenFile(absl::string_view text);

// Hex SHA-256 of `token`.
std::string TokenSha256(absl::string_view token);

// What the caller sent as `authorization` (absent = empty), or UNAUTHENTICATED: "Bearer <token>"
// (the scheme is case-insensitive, per RFC 7235) → the token.
absl::StatusOr<absl::string_view> BearerToken(absl::string_view authorization);

class TokenAuthenticator {
 public:
  struct Options {
    std::string path;
    // The file's mtime/size/inode are checked at most this often (0 = on every call).
    absl::Duration poll_interval = absl::Seconds(1);
    // Null = Clock::Real().
    const Clock* clock = nullptr;
  };

  // Loads the file: INVALID_ARGUMENT (bad contents) or NOT_FOUND / PERMISSION_DENIED (unreadable).
  static absl::StatusOr<std::unique_ptr<TokenAuthenticator>> Create(Options options);

  // The tenant of the `authorization` metadata value, or UNAUTHENTICATED. Reloads the file first when
  // it changed and the poll interval has passed.
  absl::StatusOr<std::string> Authenticate(absl::string_view authorization)
      ABSL_LOCKS_EXCLUDED(mu_, reload_mu_);

  // Re-reads the file now. On failure the previous tokens stay in force and the error is returned.
  absl::Status Reload() ABSL_LOCKS_EXCLUDED(mu_, reload_mu_);

  // The tenant's limits: `defaults` with the file's overrides for it applied.
  TenantLimits LimitsFor(const std::string& tenant, const TenantLimits& defaults) const
      ABSL_LOCKS_EXCLUDED(mu_);

  int64_t token_count() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t tenant_count() const ABSL_LOCKS_EXCLUDED(mu_);
  const std::string& path() const { return options_.path; }

 private:
  struct FileIdentity {
    int64_t mtime_ns = 0;
    int64_t size = -1;
    uint64_t inode = 0;
    bool operator==(const FileIdentity& o) const {
      return mtime_ns == o.mtime_ns && size == o.size && inode == o.inode;
    }
  };

  explicit TokenAuthenticator(Options options);
  // Loads the file when its identity differs from the last load's (or `force`); logs the outcome.
  absl::Status LoadLocked(bool force) ABSL_EXCLUSIVE_LOCKS_REQUIRED(reload_mu_);
  void MaybeReload() ABSL_LOCKS_EXCLUDED(reload_mu_);

  const Options options_;
  const Clock* const clock_;

  // Serialises reloads; taken before mu_.
  absl::Mutex reload_mu_;
  FileIdentity loaded_identity_ ABSL_GUARDED_BY(reload_mu_);
  absl::Time next_check_ ABSL_GUARDED_BY(reload_mu_) = absl::InfinitePast();
  bool loaded_once_ ABSL_GUARDED_BY(reload_mu_) = false;

  mutable absl::Mutex mu_;
  std::shared_ptr<const TokenTable> table_ ABSL_GUARDED_BY(mu_);
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVICE_SERVER_AUTH_TOKENS_H_
