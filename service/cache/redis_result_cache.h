// redis_result_cache.h — the shared result cache tier: placements in Redis, keyed by request_digest.
//
// Several replicas share one Redis so that a placement computed by one is a cache hit on the others
// (behind each replica's in-process LRU, see tiered_result_cache.h). Redis is an optimisation, never a
// dependency: every failure (refused, slow, garbage) turns into a miss or a skipped write, is counted
// in RedisCacheStats, and never reaches the caller.
//
//   key   = key_prefix + "r1:" + request_digest          ("r1" = version of the key and value layout)
//   value = one format byte (kValueFormat) + serialized v1::Placement (canonical op order)
//   SET key value PX ttl   (values over max_value_bytes are not stored)
//
// Lookups run on the caller's thread and take at most about `timeout` (pool, connect and command).
// Inserts are queued and written by one background thread, so solver workers never wait for Redis;
// the queue is bounded and drops writes when full. Connections come from a small pool (redis_client.h,
// the same one the shared operations use); a connection that fails is closed, and after a failure the
// tier pauses (lookups miss at once, writes are dropped) for a backoff that doubles per consecutive
// failure up to `max_backoff`, so a dead or slow Redis costs each request at most one timeout per
// backoff period, not one per request.
//
// hiredis 0.14 (Debian 12) has no TLS: keep Redis on a private network (see deploy/README.md).
//
// Example:
//   RedisResultCache redis({.host = "redis", .port = 6379, .ttl = absl::Hours(24)});
//   redis.Insert(digest, canonical_placement);     // queued; written in the background
//   CachedPlacement hit = redis.Lookup(digest);    // null on a miss or any Redis trouble
#ifndef PLACEMENT_SERVICE_CACHE_REDIS_RESULT_CACHE_H_
#define PLACEMENT_SERVICE_CACHE_REDIS_RESULT_CACHE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "service/cache/redis_client.h"
#include "service/cache/result_cache.h"

namespace placement::cache {

struct RedisCacheOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  // Prepended to every key, so several deployments (or tests) can share one Redis.
  std::string key_prefix = "placement:";
  // Expiry of stored values; zero or InfiniteDuration = no expiry (Redis's maxmemory policy evicts).
  absl::Duration ttl = absl::Hours(24);
  // Serialized values larger than this are not stored (counted in writes_too_large).
  int64_t max_value_bytes = int64_t{8} << 20;
  // Bound of one lookup or write as a whole: waiting for a free connection, connecting, and the
  // command (each socket send and receive gets what is left).
  absl::Duration timeout = absl::Milliseconds(50);
  // Connections in the pool (lookups beyond this many at once wait, at most `timeout`).
  int connections = 4;
  // Writes queued for the background writer; more are dropped (counted in writes_dropped).
  int max_pending_writes = 256;
  // Pause after a failure: initial_backoff, doubled per consecutive failure, at most max_backoff.
  absl::Duration initial_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(5);
};

// "HOST:PORT" (or "[V6]:PORT") → host and port. INVALID_ARGUMENT when malformed.
absl::StatusOr<std::pair<std::string, int>> ParseRedisAddress(absl::string_view address);

// Counters since construction (all monotonic except connections_open and pending_writes).
struct RedisCacheStats {
  int64_t hits = 0;
  int64_t misses = 0;           // the key was absent (or expired)
  int64_t lookup_errors = 0;    // a lookup failed (connect, command, timeout or undecodable value)
  int64_t lookups_skipped = 0;  // not tried: the tier was backing off or every connection was busy
  int64_t writes_stored = 0;
  int64_t writes_too_large = 0;
  int64_t writes_dropped = 0;  // queue full, backing off, or a failed SET
  // Failures by operation.
  int64_t connect_errors = 0;
  int64_t get_errors = 0;
  int64_t set_errors = 0;
  int64_t decode_errors = 0;
  int64_t connections_open = 0;
  int64_t pending_writes = 0;
};

class RedisResultCache : public ResultCache {
 public:
  // Format byte that starts every stored value; bump it (and the "r1" in the key) when the layout
  // changes, so that old and new replicas never misread each other's values.
  static constexpr uint8_t kValueFormat = 1;
  static constexpr char kKeyVersion[] = "r1:";

  // Connects lazily (the first lookup or write), so construction never blocks or fails.
  explicit RedisResultCache(RedisCacheOptions options);
  // Stops the writer (queued writes still pending are dropped) and closes the connections.
  ~RedisResultCache() override;
  RedisResultCache(const RedisResultCache&) = delete;
  RedisResultCache& operator=(const RedisResultCache&) = delete;

  CachedPlacement Lookup(absl::string_view request_digest) override;
  void Insert(absl::string_view request_digest, CachedPlacement placement) override;
  // ResultCache's view: hits, misses (absent, failed and skipped lookups) and insertions.
  CacheStats Stats() const override;
  RedisCacheStats RedisStats() const;

  // Blocks until the write queue is empty and no write is in progress, or `timeout` passes (false).
  bool Flush(absl::Duration timeout);

  // The Redis key of a digest, and the value layout (exposed for tests and tools).
  std::string KeyOf(absl::string_view request_digest) const;
  static std::string EncodeValue(const v1::Placement& placement);
  // INVALID_ARGUMENT when the format byte is unknown or the placement does not parse.
  static absl::StatusOr<CachedPlacement> DecodeValue(absl::string_view value);

 private:
  enum class Op { kGet, kSet };

  // Counts a failed GET or SET by where it failed; one that Redis answered with an error (or an
  // unexpected reply) also pauses the pool, as a failed round trip does.
  void RecordFailure(Op op, RedisFailure failure) ABSL_LOCKS_EXCLUDED(mu_);
  void WriterLoop();

  const RedisCacheOptions options_;
  RedisClient redis_;
  mutable absl::Mutex mu_;
  std::deque<std::pair<std::string, std::string>> pending_ ABSL_GUARDED_BY(mu_);  // key, value
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  RedisCacheStats stats_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> decode_error_logged_{false};
  std::thread writer_;
};

}  // namespace placement::cache

#endif  // PLACEMENT_SERVICE_CACHE_REDIS_RESULT_CACHE_H_
