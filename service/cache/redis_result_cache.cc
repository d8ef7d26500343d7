#include "service/cache/redis_result_cache.h"

#include <cstdio>

#include <sys/time.h>

#include <algorithm>
#include <utility>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <hiredis/hiredis.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace placement::cache {
namespace {

struct ReplyDeleter {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

timeval TimevalOf(absl::Duration duration) {
  duration = std::max(duration, absl::Milliseconds(1));
  return absl::ToTimeval(duration);
}

}  // namespace

absl::StatusOr<std::pair<std::string, int>> ParseRedisAddress(absl::string_view address) {
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("redis address \"", address, "\": expected HOST:PORT"));
  }
  absl::string_view host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  int port = 0;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &port) || port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("redis address \"", address, "\": port must be 1..65535"));
  }
  return std::make_pair(std::string(host), port);
}

void RedisResultCache::ContextDeleter::operator()(redisContext* context) const {
  redisFree(context);
}

RedisResultCache::RedisResultCache(RedisCacheOptions options) : options_(std::move(options)) {
  {
    absl::MutexLock lock(&mu_);
    next_backoff_ = options_.initial_backoff;
  }
  writer_ = std::thread([this] { WriterLoop(); });
}

RedisResultCache::~RedisResultCache() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  writer_.join();
  std::vector<Connection> idle;
  absl::MutexLock lock(&mu_);
  idle.swap(idle_);
}

std::string RedisResultCache::KeyOf(absl::string_view request_digest) const {
  return absl::StrCat(options_.key_prefix, kKeyVersion, request_digest);
}

std::string RedisResultCache::EncodeValue(const v1::Placement& placement) {
  std::string value(1, static_cast<char>(kValueFormat));
  // Deterministic bytes: replicas writing the same placement write the same value.
  {
    google::protobuf::io::StringOutputStream stream(&value);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    placement.SerializeToCodedStream(&coded);
  }
  return value;
}

absl::StatusOr<CachedPlacement> RedisResultCache::DecodeValue(absl::string_view value) {
  if (value.empty() || static_cast<uint8_t>(value[0]) != kValueFormat) {
    return absl::InvalidArgumentError(
        value.empty() ? std::string("empty value")
                      : absl::StrCat("unknown value format ", static_cast<uint8_t>(value[0])));
  }
  auto placement = std::make_shared<v1::Placement>();
  if (!placement->ParseFromArray(value.data() + 1, static_cast<int>(value.size() - 1))) {
    return absl::InvalidArgumentError("value does not parse as a placement");
  }
  return CachedPlacement(std::move(placement));
}

RedisResultCache::Connection RedisResultCache::Acquire(absl::Time deadline, bool* skipped) {
  *skipped = false;
  bool connect = false;
  Connection connection;
  {
    absl::MutexLock lock(&mu_);
    if (absl::Now() < paused_until_ || stopping_) {
      *skipped = true;
      return nullptr;
    }
    auto available = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || !idle_.empty() ||
             checked_out_ + static_cast<int>(idle_.size()) < options_.connections;
    };
    if (!mu_.AwaitWithDeadline(absl::Condition(&available), deadline) || stopping_) {
      *skipped = true;  // every connection busy for a whole timeout: Redis is not keeping up
      return nullptr;
    }
    ++checked_out_;
    if (!idle_.empty()) {
      connection = std::move(idle_.back());
      idle_.pop_back();
    } else {
      connect = true;
    }
  }
  // The socket timeouts bound each send and receive by what is left of this operation's budget.
  const timeval remaining = TimevalOf(deadline - absl::Now());
  if (!connect) {
    if (redisSetTimeout(connection.get(), remaining) == REDIS_OK) return connection;
    Release(std::move(connection), /*healthy=*/false);
    RecordFailure(Op::kConnect);
    return nullptr;
  }
  connection.reset(redisConnectWithTimeout(options_.host.c_str(), options_.port, remaining));
  if (connection == nullptr || connection->err != 0 ||
      redisSetTimeout(connection.get(), remaining) != REDIS_OK) {
    connection.reset();
    {
      absl::MutexLock lock(&mu_);
      --checked_out_;
    }
    RecordFailure(Op::kConnect);
    return nullptr;
  }
  redisEnableKeepAlive(connection.get());
  return connection;
}

void RedisResultCache::Release(Connection connection, bool healthy) {
  absl::MutexLock lock(&mu_);
  --checked_out_;
  if (healthy && connection != nullptr && connection->err == 0 && !stopping_) {
    idle_.push_back(std::move(connection));
    next_backoff_ = options_.initial_backoff;
  }
  // Otherwise `connection` is closed when it goes out of scope (redisFree only frees memory and the
  // socket; it does not talk to the server).
}

void RedisResultCache::RecordFailure(Op op) {
  std::vector<Connection> stale;
  absl::MutexLock lock(&mu_);
  switch (op) {
    case Op::kConnect: ++stats_.connect_errors; break;
    case Op::kGet: ++stats_.get_errors; break;
    case Op::kSet: ++stats_.set_errors; break;
  }
  paused_until_ = absl::Now() + next_backoff_;
  next_backoff_ = std::min(next_backoff_ * 2, options_.max_backoff);
  // A failure usually means the server went away: the idle connections are as dead as this one.
  stale.swap(idle_);
}

CachedPlacement RedisResultCache::Lookup(absl::string_view request_digest) {
  bool skipped = false;
  // One budget for the whole lookup: waiting for a connection, connecting, and the GET.
  Connection connection = Acquire(absl::Now() + options_.timeout, &skipped);
  if (connection == nullptr) {
    absl::MutexLock lock(&mu_);
    ++(skipped ? stats_.lookups_skipped : stats_.lookup_errors);
    return nullptr;
  }
  const std::string key = KeyOf(request_digest);
  Reply reply(static_cast<redisReply*>(
      redisCommand(connection.get(), "GET %b", key.data(), key.size())));
  // No reply: I/O error or timeout — the connection is unusable. An error reply (e.g. LOADING while
  // Redis restarts) leaves it usable but still means "back off".
  const bool io_ok = reply != nullptr;
  const bool answered = io_ok && (reply->type == REDIS_REPLY_STRING || reply->type == REDIS_REPLY_NIL);
  Release(std::move(connection), io_ok);
  if (!answered) {
    RecordFailure(Op::kGet);
    absl::MutexLock lock(&mu_);
    ++stats_.lookup_errors;
    return nullptr;
  }
  if (reply->type == REDIS_REPLY_NIL) {
    absl::MutexLock lock(&mu_);
    ++stats_.misses;
    return nullptr;
  }
  absl::StatusOr<CachedPlacement> decoded =
      DecodeValue(absl::string_view(reply->str, reply->len));
  if (!decoded.ok()) {
    // Written by an incompatible build or corrupted: a miss; the fresh result will overwrite it.
    // Logged once per process (a poisoned Redis must not flood the log); counted in decode_errors.
    if (!decode_error_logged_.exchange(true)) {
      const std::string line = absl::StrCat(
          absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()),
          " redis: ignoring an undecodable value (", decoded.status().message(),
          "); treated as a miss and overwritten (logged once; counted in "
          "placement_redis_errors_total{op=\"decode\"})\n");
      std::fwrite(line.data(), 1, line.size(), stderr);
    }
    absl::MutexLock lock(&mu_);
    ++stats_.decode_errors;
    ++stats_.lookup_errors;
    return nullptr;
  }
  absl::MutexLock lock(&mu_);
  ++stats_.hits;
  return *std::move(decoded);
}

void RedisResultCache::Insert(absl::string_view request_digest, CachedPlacement placement) {
  if (placement == nullptr) return;
  std::string value = EncodeValue(*placement);
  absl::MutexLock lock(&mu_);
  if (static_cast<int64_t>(value.size()) > options_.max_value_bytes) {
    ++stats_.writes_too_large;
    return;
  }
  // While backing off, queueing would only replay stale writes into a Redis that just came back.
  if (stopping_ || absl::Now() < paused_until_ ||
      static_cast<int>(pending_.size()) >= options_.max_pending_writes) {
    ++stats_.writes_dropped;
    return;
  }
  pending_.emplace_back(KeyOf(request_digest), std::move(value));
}

void RedisResultCache::WriterLoop() {
  const int64_t ttl_ms = (options_.ttl > absl::ZeroDuration() && options_.ttl != absl::InfiniteDuration())
                             ? std::max<int64_t>(1, absl::ToInt64Milliseconds(options_.ttl))
                             : 0;
  while (true) {
    std::pair<std::string, std::string> write;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !pending_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (stopping_) return;
      write = std::move(pending_.front());
      pending_.pop_front();
      writing_ = true;
    }
    bool stored = false;
    bool skipped = false;
    if (Connection connection = Acquire(absl::Now() + options_.timeout, &skipped)) {
      const std::string& key = write.first;
      const std::string& value = write.second;
      Reply reply(static_cast<redisReply*>(
          ttl_ms > 0 ? redisCommand(connection.get(), "SET %b %b PX %lld", key.data(), key.size(),
                                    value.data(), value.size(), static_cast<long long>(ttl_ms))
                     : redisCommand(connection.get(), "SET %b %b", key.data(), key.size(),
                                    value.data(), value.size())));
      stored = reply != nullptr && reply->type == REDIS_REPLY_STATUS;
      Release(std::move(connection), reply != nullptr);
      if (!stored) RecordFailure(Op::kSet);
    }
    absl::MutexLock lock(&mu_);
    ++(stored ? stats_.writes_stored : stats_.writes_dropped);
    writing_ = false;
  }
}

bool RedisResultCache::Flush(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return pending_.empty() && !writing_;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&drained), timeout);
}

CacheStats RedisResultCache::Stats() const {
  absl::MutexLock lock(&mu_);
  CacheStats stats;
  stats.hits = stats_.hits;
  stats.misses = stats_.misses + stats_.lookup_errors + stats_.lookups_skipped;
  stats.insertions = stats_.writes_stored;
  stats.rejected = stats_.writes_too_large;
  return stats;
}

RedisCacheStats RedisResultCache::RedisStats() const {
  absl::MutexLock lock(&mu_);
  RedisCacheStats stats = stats_;
  stats.connections_open = checked_out_ + static_cast<int64_t>(idle_.size());
  stats.pending_writes = static_cast<int64_t>(pending_.size());
  return stats;
}

}  // namespace placement::cache
