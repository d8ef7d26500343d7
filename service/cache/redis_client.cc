#include "service/cache/redis_client.h"

#include <sys/time.h>

#include <algorithm>
#include <utility>

#include <hiredis/hiredis.h>
#include <openssl/sha.h>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace placement::cache {
namespace {

RedisValue CopyReply(const redisReply& reply) {
  RedisValue value;
  switch (reply.type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
      value.type = reply.type == REDIS_REPLY_STRING   ? RedisValue::Type::kString
                   : reply.type == REDIS_REPLY_STATUS ? RedisValue::Type::kStatus
                                                      : RedisValue::Type::kError;
      value.str.assign(reply.str, reply.len);
      break;
    case REDIS_REPLY_INTEGER:
      value.type = RedisValue::Type::kInteger;
      value.integer = reply.integer;
      break;
    case REDIS_REPLY_ARRAY:
      value.type = RedisValue::Type::kArray;
      value.elements.reserve(reply.elements);
      for (size_t i = 0; i < reply.elements; ++i) value.elements.push_back(CopyReply(*reply.element[i]));
      break;
    default:
      value.type = RedisValue::Type::kNil;
  }
  return value;
}

timeval TimevalOf(absl::Duration duration) {
  return absl::ToTimeval(std::max(duration, absl::Milliseconds(1)));
}

}  // namespace

std::string ScriptSha1(absl::string_view source) {
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(source.data()), source.size(), digest);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
}

void RedisClient::ContextDeleter::operator()(redisContext* context) const { redisFree(context); }

RedisClient::RedisClient(RedisClientOptions options) : options_(std::move(options)) {
  absl::MutexLock lock(&mu_);
  next_backoff_ = options_.initial_backoff;
}

RedisClient::~RedisClient() = default;

absl::Status RedisClient::Fail(absl::string_view what) {
  failures_.fetch_add(1, std::memory_order_relaxed);
  std::vector<Connection> stale;
  absl::MutexLock lock(&mu_);
  paused_until_ = absl::Now() + next_backoff_;
  next_backoff_ = std::min(next_backoff_ * 2, options_.max_backoff);
  // A failure usually means the server went away: the idle connections are as dead as this one.
  stale.swap(idle_);
  return absl::UnavailableError(absl::StrCat("redis ", options_.host, ":", options_.port, ": ", what));
}

void RedisClient::BackOff() { Fail("backing off").IgnoreError(); }

bool RedisClient::backing_off() const {
  absl::MutexLock lock(&mu_);
  return absl::Now() < paused_until_;
}

int64_t RedisClient::connections_open() const {
  absl::MutexLock lock(&mu_);
  return checked_out_ + static_cast<int64_t>(idle_.size());
}

absl::StatusOr<RedisClient::Connection> RedisClient::Acquire(absl::Time deadline,
                                                             RedisFailure* failure) {
  *failure = RedisFailure::kNotTried;
  bool connect = false;
  Connection connection;
  {
    absl::MutexLock lock(&mu_);
    if (absl::Now() < paused_until_) {
      return absl::UnavailableError(absl::StrCat("redis ", options_.host, ":", options_.port,
                                                 ": backing off after a failure"));
    }
    auto available = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !idle_.empty() || checked_out_ + static_cast<int>(idle_.size()) < options_.connections;
    };
    if (!mu_.AwaitWithDeadline(absl::Condition(&available), deadline)) {
      return absl::UnavailableError("redis: every connection stayed busy for a whole timeout");
    }
    ++checked_out_;
    if (!idle_.empty()) {
      connection = std::move(idle_.back());
      idle_.pop_back();
    } else {
      connect = true;
    }
  }
  // The socket timeouts bound each send and receive by what is left of this call's budget.
  *failure = RedisFailure::kConnect;
  const timeval remaining = TimevalOf(deadline - absl::Now());
  if (connect) {
    connection.reset(redisConnectWithTimeout(options_.host.c_str(), options_.port, remaining));
    if (connection == nullptr || connection->err != 0) {
      connection.reset();
      {
        absl::MutexLock lock(&mu_);
        --checked_out_;
      }
      return Fail("connect failed");
    }
    redisEnableKeepAlive(connection.get());
  }
  if (redisSetTimeout(connection.get(), remaining) != REDIS_OK) {
    Release(std::move(connection), /*healthy=*/false);
    return Fail("setting the socket timeout failed");
  }
  *failure = RedisFailure::kNone;
  return connection;
}

void RedisClient::Release(Connection connection, bool healthy) {
  absl::MutexLock lock(&mu_);
  --checked_out_;
  if (healthy && connection != nullptr && connection->err == 0) {
    idle_.push_back(std::move(connection));
    next_backoff_ = options_.initial_backoff;
  }
}

absl::Duration RedisClient::TransferAllowance(size_t bytes) {
  return absl::Milliseconds(static_cast<double>(bytes) / 50e3);
}

absl::StatusOr<std::vector<RedisValue>> RedisClient::RoundTrip(
    const std::vector<std::vector<std::string>>& commands, absl::Duration extra,
    RedisFailure* failure) {
  RedisFailure ignored = RedisFailure::kNone;
  if (failure == nullptr) failure = &ignored;
  round_trips_.fetch_add(1, std::memory_order_relaxed);
  absl::StatusOr<Connection> connection =
      Acquire(absl::Now() + options_.timeout + extra, failure);
  if (!connection.ok()) return connection.status();
  *failure = RedisFailure::kExchange;
  redisContext* context = connection->get();
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  for (const std::vector<std::string>& command : commands) {
    argv.clear();
    lengths.clear();
    for (const std::string& arg : command) {
      argv.push_back(arg.data());
      lengths.push_back(arg.size());
    }
    if (redisAppendCommandArgv(context, static_cast<int>(argv.size()), argv.data(),
                               lengths.data()) != REDIS_OK) {
      Release(*std::move(connection), /*healthy=*/false);
      return Fail("could not queue a command");
    }
  }
  std::vector<RedisValue> replies;
  replies.reserve(commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(context, &raw) != REDIS_OK || raw == nullptr) {
      const std::string why = context->err != 0 ? std::string(context->errstr) : "no reply";
      Release(*std::move(connection), /*healthy=*/false);
      return Fail(why);
    }
    redisReply* reply = static_cast<redisReply*>(raw);
    replies.push_back(CopyReply(*reply));
    freeReplyObject(reply);
  }
  Release(*std::move(connection), /*healthy=*/true);
  *failure = RedisFailure::kNone;
  return replies;
}

absl::StatusOr<std::vector<RedisValue>> RedisClient::Pipeline(
    const std::vector<std::vector<std::string>>& commands, absl::Duration extra) {
  if (commands.empty()) return std::vector<RedisValue>();
  return RoundTrip(commands, extra);
}

absl::StatusOr<RedisValue> RedisClient::Command(const std::vector<std::string>& args,
                                                RedisFailure* failure) {
  absl::StatusOr<std::vector<RedisValue>> replies = RoundTrip({args}, absl::ZeroDuration(), failure);
  if (!replies.ok()) return replies.status();
  RedisValue& reply = replies->front();
  if (reply.type == RedisValue::Type::kError) {
    return absl::InternalError(absl::StrCat("redis error: ", reply.str));
  }
  return std::move(reply);
}

absl::StatusOr<RedisValue> RedisClient::Script(absl::string_view source,
                                               const std::vector<std::string>& keys,
                                               const std::vector<std::string>& args,
                                               absl::Duration extra) {
  std::vector<std::string> command = {"EVALSHA", ScriptSha1(source), absl::StrCat(keys.size())};
  command.insert(command.end(), keys.begin(), keys.end());
  command.insert(command.end(), args.begin(), args.end());
  absl::StatusOr<std::vector<RedisValue>> replies = RoundTrip({command}, extra);
  if (!replies.ok()) return replies.status();
  if (replies->front().type == RedisValue::Type::kError &&
      absl::StartsWith(replies->front().str, "NOSCRIPT")) {
    // Redis restarted (or flushed its script cache): send the source once; it is cached again.
    command[0] = "EVAL";
    command[1] = std::string(source);
    replies = RoundTrip({command}, extra);
    if (!replies.ok()) return replies.status();
  }
  RedisValue& reply = replies->front();
  if (reply.type == RedisValue::Type::kError) {
    return absl::InternalError(absl::StrCat("redis script error: ", reply.str));
  }
  return std::move(reply);
}

}  // namespace placement::cache
