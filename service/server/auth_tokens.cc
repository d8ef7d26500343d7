#include "service/server/auth_tokens.h"

#include <fcntl.h>
#include <openssl/sha.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "service/server/request_log.h"

namespace placement::server {
namespace {

constexpr size_t kMinTokenBytes = 16;
constexpr size_t kMaxTokenBytes = 512;
constexpr size_t kMaxTenantBytes = 64;

bool IsTokenChar(char c) { return c > ' ' && c < 0x7f; }

bool IsTenantChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
}

absl::Status LineError(int line, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("tokens file line ", line, ": ", what));
}

// key=value → the field of `overrides`.
absl::Status ParseOverride(int line, absl::string_view field, TenantOverrides* overrides) {
  std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(field, absl::MaxSplits('=', 1));
  const absl::string_view key = kv.first;
  const absl::string_view value = kv.second;
  if (key == "max_running" || key == "max_queued") {
    int n = 0;
    if (!absl::SimpleAtoi(value, &n) || n < 0) {
      return LineError(line, absl::StrCat(key, " must be a count ≥ 0 (0 = unlimited)"));
    }
    (key == "max_running" ? overrides->max_running : overrides->max_queued) = n;
    return absl::OkStatus();
  }
  if (key == "rate_qps" || key == "burst") {
    double x = 0;
    if (!absl::SimpleAtod(value, &x) || !(x >= 0) || x > 1e9) {
      return LineError(line, absl::StrCat(key, " must be a number ≥ 0 (0 = unlimited / default)"));
    }
    (key == "rate_qps" ? overrides->rate_qps : overrides->burst) = x;
    return absl::OkStatus();
  }
  return LineError(line, absl::StrCat("unknown field \"", key.substr(0, 32),
                                      "\" (expected max_running, max_queued, rate_qps, burst)"));
}

}  // namespace

TenantLimits TenantOverrides::ApplyTo(TenantLimits defaults) const {
  if (max_running.has_value()) defaults.jobs.max_running = *max_running;
  if (max_queued.has_value()) defaults.jobs.max_queued = *max_queued;
  if (rate_qps.has_value()) defaults.rate_qps = *rate_qps;
  if (burst.has_value()) defaults.burst = *burst;
  return defaults;
}

std::string TokenSha256(absl::string_view token) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), digest);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
}

absl::StatusOr<TokenTable> ParseTokenFile(absl::string_view text) {
  TokenTable table;
  absl::flat_hash_map<std::string, bool> tenants;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    // A field starting with '#' starts a comment (tokens may not start with '#').
    for (size_t i = 0; i < fields.size(); ++i) {
      if (absl::StartsWith(fields[i], "#")) {
        fields.resize(i);
        break;
      }
    }
    if (fields.empty()) continue;
    if (fields.size() < 2) {
      return LineError(line_number, "expected `TOKEN TENANT [key=value ...]`");
    }
    const absl::string_view token = fields[0];
    const absl::string_view tenant = fields[1];
    if (token.size() < kMinTokenBytes || token.size() > kMaxTokenBytes) {
      return LineError(line_number, absl::StrCat("the token must have ", kMinTokenBytes, " to ",
                                                 kMaxTokenBytes, " characters"));
    }
    for (char c : token) {
      if (!IsTokenChar(c)) return LineError(line_number, "the token must be printable ASCII");
    }
    if (tenant.empty() || tenant.size() > kMaxTenantBytes) {
      return LineError(line_number,
                       absl::StrCat("the tenant must have 1 to ", kMaxTenantBytes, " characters"));
    }
    for (char c : tenant) {
      if (!IsTenantChar(c)) {
        return LineError(line_number, "the tenant may only use letters, digits, '.', '_', '-'");
      }
    }
    std::string hash = TokenSha256(token);
    if (table.tenant_by_token_sha256.contains(hash)) {
      return LineError(line_number, "this token appears on an earlier line too");
    }
    table.tenant_by_token_sha256.emplace(std::move(hash), std::string(tenant));
    tenants.emplace(std::string(tenant), true);
    if (fields.size() > 2) {
      TenantOverrides& overrides = table.overrides[std::string(tenant)];
      for (size_t i = 2; i < fields.size(); ++i) {
        if (absl::Status parsed = ParseOverride(line_number, fields[i], &overrides); !parsed.ok()) {
          return parsed;
        }
      }
    }
  }
  table.tenants = static_cast<int64_t>(tenants.size());
  return table;
}

absl::StatusOr<absl::string_view> BearerToken(absl::string_view authorization) {
  if (authorization.empty()) {
    return absl::UnauthenticatedError(
        "missing credentials: send the metadata `authorization: Bearer <token>`");
  }
  constexpr absl::string_view kScheme = "bearer ";
  if (authorization.size() <= kScheme.size() ||
      !absl::EqualsIgnoreCase(authorization.substr(0, kScheme.size()), kScheme)) {
    return absl::UnauthenticatedError(
        "malformed credentials: the authorization metadata must be `Bearer <token>`");
  }
  return absl::StripAsciiWhitespace(authorization.substr(kScheme.size()));
}

TokenAuthenticator::TokenAuthenticator(Options options)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : Clock::Real()) {}

absl::StatusOr<std::unique_ptr<TokenAuthenticator>> TokenAuthenticator::Create(Options options) {
  std::unique_ptr<TokenAuthenticator> auth(new TokenAuthenticator(std::move(options)));
  absl::MutexLock lock(&auth->reload_mu_);
  if (absl::Status loaded = auth->LoadLocked(/*force=*/true); !loaded.ok()) return loaded;
  auth->next_check_ = auth->clock_->Now() + auth->options_.poll_interval;
  return auth;
}

absl::Status TokenAuthenticator::LoadLocked(bool force) {
  const int fd = open(options_.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const std::string message =
        absl::StrCat("cannot read the tokens file ", options_.path, ": ", std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(message)
           : err == EACCES ? absl::PermissionDeniedError(message)
                           : absl::UnavailableError(message);
  }
  struct stat st {};
  fstat(fd, &st);
  const FileIdentity identity{
      .mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec,
      .size = static_cast<int64_t>(st.st_size),
      .inode = static_cast<uint64_t>(st.st_ino)};
  if (!force && identity == loaded_identity_) {
    close(fd);
    return absl::OkStatus();
  }
  std::string text;
  char buffer[8192];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
    if (text.size() > (size_t{64} << 20)) break;  // not a tokens file; the parser will say so
  }
  close(fd);
  // Remembered even when parsing fails, so a broken file is reported once, not on every poll.
  loaded_identity_ = identity;
  absl::StatusOr<TokenTable> table = ParseTokenFile(text);
  if (table.ok() && table->tenant_by_token_sha256.empty()) {
    // At start-up as on a reload: a file without tokens would refuse every caller (a reload keeps
    // the previous tokens, a start fails).
    table = absl::InvalidArgumentError(
        "the file holds no tokens (emptied, or being written?); an empty file would refuse every "
        "caller");
  } else if (table.ok() && loaded_once_) {
    // A file caught while it is being written (its last line may be cut: "TOKEN te" would load the
    // tenant "te") is not applied; once the writer is done the file changes again and is reloaded.
    if (!text.empty() && text.back() != '\n') {
      table = absl::InvalidArgumentError(
          "the file does not end with a newline: it is probably being written (write it to a "
          "temporary file and rename it into place)");
    }
  }
  if (!table.ok()) {
    LogLine(absl::StrCat("auth tokens: ", options_.path, " not loaded, ",
                         loaded_once_ ? "keeping the previous tokens: " : "",
                         table.status().message()));
    return table.status();
  }
  LogLine(absl::StrCat("auth tokens loaded from ", options_.path, ": ",
                       table->tenant_by_token_sha256.size(), " tokens, ", table->tenants,
                       " tenants"));
  loaded_once_ = true;
  auto shared = std::make_shared<const TokenTable>(*std::move(table));
  absl::MutexLock lock(&mu_);
  table_ = std::move(shared);
  return absl::OkStatus();
}

void TokenAuthenticator::MaybeReload() {
  // A caller that finds another reloading goes on with the current tokens.
  if (!reload_mu_.TryLock()) return;
  const absl::Time now = clock_->Now();
  if (now >= next_check_) {
    next_check_ = now + options_.poll_interval;
    LoadLocked(/*force=*/false).IgnoreError();
  }
  reload_mu_.Unlock();
}

absl::Status TokenAuthenticator::Reload() {
  absl::MutexLock lock(&reload_mu_);
  next_check_ = clock_->Now() + options_.poll_interval;
  return LoadLocked(/*force=*/true);
}

absl::StatusOr<std::string> TokenAuthenticator::Authenticate(absl::string_view authorization) {
  absl::StatusOr<absl::string_view> token = BearerToken(authorization);
  if (!token.ok()) return token.status();
  MaybeReload();
  const std::string hash = TokenSha256(*token);
  absl::MutexLock lock(&mu_);
  auto it = table_->tenant_by_token_sha256.find(hash);
  if (it == table_->tenant_by_token_sha256.end()) {
    return absl::UnauthenticatedError("invalid credentials: unknown or revoked token");
  }
  return it->second;
}

TenantLimits TokenAuthenticator::LimitsFor(const std::string& tenant,
                                                 const TenantLimits& defaults) const {
  absl::MutexLock lock(&mu_);
  auto it = table_->overrides.find(tenant);
  return it == table_->overrides.end() ? defaults : it->second.ApplyTo(defaults);
}

int64_t TokenAuthenticator::token_count() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(table_->tenant_by_token_sha256.size());
}

int64_t TokenAuthenticator::tenant_count() const {
  absl::MutexLock lock(&mu_);
  return table_->tenants;
}

}  // namespace placement::server
