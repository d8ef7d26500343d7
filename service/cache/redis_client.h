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
// Errors are absl::Status: UNAVAILABLE for connection trouble, INTERNAL for an error reply. A caller
// that counts failures by stage (the result tier's metrics) asks Command for the RedisFailure too; a
// caller that reads an answer as trouble although the connection works (LOADING while Redis
// restarts) calls BackOff() so the pool pauses as after a failed round trip.
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

  // True while the pool pauses after a failure (calls fail at once with UNAVAILABLE).
  bool backing_off() const ABSL_LOCKS_EXCLUDED(mu_);
  // Connections checked out or idle in the pool.
  int64_t connections_open() const ABSL_LOCKS_EXCLUDED(mu_);
  // Round trips tried (successful or not), for the metric and the benchmark's figure.
  int64_t round_trips() const { return round_trips_.load(std::memory_order_relaxed); }
  int64_t failures() const { return failures_.load(std::memory_order_relaxed); }

 private:
  struct ContextDeleter {
    void operator()(redisContext* context) const;
  };
  using Connection = std::unique_ptr<redisContext, ContextDeleter>;

  // A connected context whose socket timeouts end at `deadline`; give it back with Release.
  absl::StatusOr<Connection> Acquire(absl::Time deadline, RedisFailure* failure);
  // `healthy` = false closes the connection; true returns it to the pool and ends the backoff.
  void Release(Connection connection, bool healthy);
  // Starts (or extends) the backoff and drops the idle connections; UNAVAILABLE saying `what`.
  absl::Status Fail(absl::string_view what) ABSL_LOCKS_EXCLUDED(mu_);
  // Sends `commands` on one connection and reads as many replies.
  absl::StatusOr<std::vector<RedisValue>> RoundTrip(
      const std::vector<std::vector<std::string>>& commands, absl::Duration extra,
      RedisFailure* failure = nullptr);

  const RedisClientOptions options_;
  mutable absl::Mutex mu_;
  std::vector<Connection> idle_ ABSL_GUARDED_BY(mu_);
  int checked_out_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time paused_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Duration next_backoff_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> round_trips_{0};
  std::atomic<int64_t> failures_{0};
};

// Lower-case hex SHA1 of a script, as EVALSHA wants it.
std::string ScriptSha1(absl::string_view source);

}  // namespace placement::cache

#endif  // PLACEMENT_SERVICE_CACHE_REDIS_CLIENT_H_
