#include "service/cache/redis_result_cache.h"

#include <cstdio>

#include <algorithm>
#include <utility>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace placement::cache {

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

RedisResultCache::RedisResultCache(RedisCacheOptions options)
    : options_(std::move(options)),
      redis_({.host = options_.host,
              .port = options_.port,
              .timeout = options_.timeout,
              .connections = options_.connections,
              .initial_backoff = options_.initial_backoff,
              .max_backoff = options_.max_backoff}) {
  writer_ = std::thread([this] { WriterLoop(); });
}

RedisResultCache::~RedisResultCache() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  writer_.join();
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

void RedisResultCache::RecordFailure(Op op, RedisFailure failure) {
  // Answered, but not with what GET or SET answer (e.g. LOADING while Redis restarts): the
  // connection works, yet Redis is in trouble, so the tier backs off all the same.
  if (failure == RedisFailure::kNone) redis_.BackOff();
  absl::MutexLock lock(&mu_);
  if (failure == RedisFailure::kConnect) {
    ++stats_.connect_errors;
  } else if (failure != RedisFailure::kNotTried) {
    ++(op == Op::kGet ? stats_.get_errors : stats_.set_errors);
  }
}

CachedPlacement RedisResultCache::Lookup(absl::string_view request_digest) {
  // One budget for the whole lookup (the client's timeout): waiting for a connection, connecting,
  // and the GET.
  RedisFailure failure = RedisFailure::kNone;
  absl::StatusOr<RedisValue> reply = redis_.Command({"GET", KeyOf(request_digest)}, &failure);
  if (failure == RedisFailure::kNotTried) {  // backing off, or every connection busy: not tried
    absl::MutexLock lock(&mu_);
    ++stats_.lookups_skipped;
    return nullptr;
  }
  if (!reply.ok() || (!reply->is_nil() && reply->type != RedisValue::Type::kString)) {
    RecordFailure(Op::kGet, failure);
    absl::MutexLock lock(&mu_);
    ++stats_.lookup_errors;
    return nullptr;
  }
  if (reply->is_nil()) {
    absl::MutexLock lock(&mu_);
    ++stats_.misses;
    return nullptr;
  }
  absl::StatusOr<CachedPlacement> decoded = DecodeValue(reply->str);
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
  const bool backing_off = redis_.backing_off();
  absl::MutexLock lock(&mu_);
  if (static_cast<int64_t>(value.size()) > options_.max_value_bytes) {
    ++stats_.writes_too_large;
    return;
  }
  // While backing off, queueing would only replay stale writes into a Redis that just came back.
  if (stopping_ || backing_off ||
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
    std::vector<std::string> set;
    set.reserve(5);
    set.push_back("SET");
    set.push_back(std::move(write.first));
    set.push_back(std::move(write.second));
    if (ttl_ms > 0) {
      set.push_back("PX");
      set.push_back(absl::StrCat(ttl_ms));
    }
    RedisFailure failure = RedisFailure::kNone;
    absl::StatusOr<RedisValue> reply = redis_.Command(set, &failure);
    const bool stored = reply.ok() && reply->type == RedisValue::Type::kStatus;
    if (!stored) RecordFailure(Op::kSet, failure);
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
  const int64_t connections_open = redis_.connections_open();
  absl::MutexLock lock(&mu_);
  RedisCacheStats stats = stats_;
  stats.connections_open = connections_open;
  stats.pending_writes = static_cast<int64_t>(pending_.size());
  return stats;
}

}  // namespace placement::cache
