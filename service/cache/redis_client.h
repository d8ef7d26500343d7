// redis_client.h — a small pool of hiredis connections: the one Redis connection layer of the
// service, used by the shared result tier (redis_result_cache.h) and the shared operations
// (service/shared_ops).
//
// Every call is one round trip (a command, a pipeline of commands, or a Lua script by its SHA1 with a
// fallback to sending the script when Redis does not know it), bounded as a whole by `timeout`
// (waiting for a connection, connecting, sending and receiving). Replies are copied into RedisValue,
// so callers never touch hiredis. A failed call closes its connection and the pool backs off (the
// next calls fail at once with UNAVAILABLE) for a delay that doubles per consecutive failure: a dead
// Redis costs each caller at most one timeout per backoff period, never one per request.
//
// A pooled connection that Redis closed while it sat idle (Redis restarted, or its `timeout` closed
// idle clients) fails on its first use with end-of-file before any reply: Redis never saw that
// command, so the call is sent again once on a fresh connection (within the same timeout) instead of
// failing. A timeout is never retried: Redis may run the command later.
//
// Errors are absl::Status: UNAVAILABLE for connection trouble, INTERNAL for an error reply ("redis
// error: " or "redis script error: " + the reply; ErrorReplyCode() reads its first word: OOM, NOAUTH,
// WRONGTYPE, ...). A caller that counts failures by stage (the result tier's metrics) asks Command for
// the RedisFailure too; a caller that reads an answer as trouble although the connection works
// (LOADING while Redis restarts) calls BackOff() so the pool pauses as after a failed round trip.
// CheckRedisServer() is the start-up check: is the address Redis at all, and may we use it.
//
// Example:
//   RedisClient redis({.host = "127.0.0.1", .port = 6379});
//   absl::StatusOr<RedisValue> pong = redis.Command({"PING"});
//   absl::StatusOr<RedisValue> got = redis.Script(kMyLuaSource, {"key"}, {"arg"});
#ifndef PLACEMENT_SERVICE_CACHE_REDIS_CLIENT_H_
#define PLACEMENT_SERVICE_CACHE_REDIS_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

struct redisContext;

namespace placement::cache {

// One reply, copied out of hiredis.
struct RedisValue {
  enum class Type { kNil, kString, kInteger, kArray, kStatus, kError };
  Type type = Type::kNil;
  std::string str;  // kString, kStatus, kError
  int64_t integer = 0;
  std::vector<RedisValue> elements;  // kArray

  bool is_nil() const { return type == Type::kNil; }
};

struct RedisClientOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  // Bound of one call as a whole.
  absl::Duration timeout = absl::Milliseconds(50);
  int connections = 4;
  // Pause after a failure: initial_backoff, doubled per consecutive failure, at most max_backoff.
  absl::Duration initial_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(2);
};

// Where a round trip failed; RedisFailure::kNone when it did not fail (an error reply is an answer).
enum class RedisFailure {
  kNone,
  kNotTried,  // backing off after a failure, or every connection busy for the whole timeout
  kConnect,   // connecting, or setting the socket timeouts, failed
  kExchange,  // sending or receiving failed (I/O error, socket timeout, connection closed)
};

class RedisClient {
 public:
  // Connects lazily; construction never blocks.
  explicit RedisClient(RedisClientOptions options);
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // One command. An error reply is INTERNAL (the connection stays usable). `failure`, when given,
  // says where a failed round trip failed.
  absl::StatusOr<RedisValue> Command(const std::vector<std::string>& args,
                                     RedisFailure* failure = nullptr);
  // Several commands in one round trip; the replies in order (error replies are kError values).
  absl::StatusOr<std::vector<RedisValue>> Pipeline(const std::vector<std::vector<std::string>>& commands,
                                                   absl::Duration extra = absl::ZeroDuration());
  // EVALSHA of `source` (EVAL when Redis answers NOSCRIPT, e.g. after a restart). An error reply is
  // INTERNAL. `extra` is added to the timeout (a script that carries megabytes needs longer).
  absl::StatusOr<RedisValue> Script(absl::string_view source, const std::vector<std::string>& keys,
                                    const std::vector<std::string>& args,
                                    absl::Duration extra = absl::ZeroDuration());
  // Time to add to the timeout for sending `bytes` (at a conservative 50 MB/s).
  static absl::Duration TransferAllowance(size_t bytes);

  // Pauses as after a failed round trip (counted in failures): for answers that mean Redis is in
  // trouble although the connection works, e.g. an error reply while it loads its data set.
  void BackOff() ABSL_LOCKS_EXCLUDED(mu_);

  // From now on every call fails at once (UNAVAILABLE), and calls blocked on Redis return now (their
  // sockets are shut down): for a process that is shutting down and must not wait for a Redis that
  // does not answer. Irreversible.
  void Close() ABSL_LOCKS_EXCLUDED(mu_);

  // True while the pool pauses after a failure (calls fail at once with UNAVAILABLE).
  bool backing_off() const ABSL_LOCKS_EXCLUDED(mu_);
  // Connections checked out or idle in the pool.
  int64_t connections_open() const ABSL_LOCKS_EXCLUDED(mu_);
  // Round trips tried (successful or not), for the metric and the benchmark's figure.
  int64_t round_trips() const { return round_trips_.load(std::memory_order_relaxed); }
  int64_t failures() const { return failures_.load(std::memory_order_relaxed); }
  // Calls sent again on a fresh connection because their pooled one had been closed by Redis.
  int64_t stale_retries() const { return stale_retries_.load(std::memory_order_relaxed); }

 private:
  struct ContextDeleter {
    void operator()(redisContext* context) const;
  };
  using Connection = std::unique_ptr<redisContext, ContextDeleter>;

  // A connected context whose socket timeouts end at `deadline`; give it back with Release.
  // `*reused` says whether it came from the pool; `fresh` = never from the pool.
  absl::StatusOr<Connection> Acquire(absl::Time deadline, RedisFailure* failure, bool* reused,
                                     bool fresh = false);
  // `healthy` = false closes the connection; true returns it to the pool and ends the backoff.
  void Release(Connection connection, bool healthy);
  // Starts (or extends) the backoff and drops the idle connections; UNAVAILABLE saying `what`.
  absl::Status Fail(absl::string_view what) ABSL_LOCKS_EXCLUDED(mu_);
  // Sends `commands` on one connection and reads as many replies; once more on a fresh connection
  // when a pooled one turns out to have been closed by Redis.
  absl::StatusOr<std::vector<RedisValue>> RoundTrip(
      const std::vector<std::vector<std::string>>& commands, absl::Duration extra,
      RedisFailure* failure = nullptr);
  // One attempt of RoundTrip. `*stale` = the pooled connection had been closed before any reply.
  absl::StatusOr<std::vector<RedisValue>> Exchange(
      const std::vector<std::vector<std::string>>& commands, absl::Time deadline,
      RedisFailure* failure, bool fresh, bool* stale);

  const RedisClientOptions options_;
  mutable absl::Mutex mu_;
  std::vector<Connection> idle_ ABSL_GUARDED_BY(mu_);
  int checked_out_ ABSL_GUARDED_BY(mu_) = 0;
  // Sockets of the checked-out connections (Close() shuts them down); a context is removed before
  // it is freed, so a descriptor here is never one the kernel gave to something else.
  std::vector<int> busy_sockets_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time paused_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Duration next_backoff_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> round_trips_{0};
  std::atomic<int64_t> failures_{0};
  std::atomic<int64_t> stale_retries_{0};
};

// The first word of an error reply carried by an INTERNAL status of this client ("OOM", "NOAUTH",
// "WRONGTYPE", "BUSY", "LOADING", ...); "" for any other status.
std::string ErrorReplyCode(const absl::Status& status);
// Error replies that say Redis is in a passing state (out of memory, loading, busy with a script,
// a replica without its primary): worth retrying later, unlike WRONGTYPE or NOAUTH.
bool IsPassingErrorReply(const absl::Status& status);

// The start-up check of `--redis`: connects once (bounded by `timeout`) and asks PING and INFO.
//   OK: a Redis this service can use (7.0 or newer: its scripts use script flags).
//   UNAVAILABLE: nothing answered (refused, unreachable, or silent until the timeout); a Redis that
//     is down now may be up later, so the caller serves without it meanwhile.
//   INVALID_ARGUMENT: something answered that is not Redis (HTTP, gRPC, ...), or a Redis too old.
//   FAILED_PRECONDITION: Redis wants a password (NOAUTH; this client sends none) or refuses the
//     commands the service needs.
absl::Status CheckRedisServer(const std::string& host, int port, absl::Duration timeout);

// Lower-case hex SHA1 of a script, as EVALSHA wants it.
std::string ScriptSha1(absl::string_view source);

}  // namespace placement::cache

#endif  // PLACEMENT_SERVICE_CACHE_REDIS_CLIENT_H_
