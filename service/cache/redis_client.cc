#include "service/cache/redis_client.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <hiredis/hiredis.h>
#include <openssl/sha.h>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
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

// The connection was closed by the other side (end of file, reset, broken pipe), as opposed to a
// timeout: what a pooled connection looks like after Redis restarted.
bool ClosedByPeer(const redisContext& context) {
  if (context.err == REDIS_ERR_EOF) return true;
  if (context.err != REDIS_ERR_IO) return false;
  const absl::string_view why = context.errstr;
  return why == std::strerror(ECONNRESET) || why == std::strerror(EPIPE);
}

constexpr absl::string_view kErrorPrefixes[] = {"redis error: ", "redis script error: "};

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

void RedisClient::Close() {
  std::vector<Connection> idle;
  absl::MutexLock lock(&mu_);
  closed_ = true;
  idle.swap(idle_);
  // The thread using each of these reads end-of-file at once and frees its context itself.
  for (int fd : busy_sockets_) shutdown(fd, SHUT_RDWR);
}

bool RedisClient::backing_off() const {
  absl::MutexLock lock(&mu_);
  return absl::Now() < paused_until_;
}

int64_t RedisClient::connections_open() const {
  absl::MutexLock lock(&mu_);
  return checked_out_ + static_cast<int64_t>(idle_.size());
}

absl::StatusOr<RedisClient::Connection> RedisClient::Acquire(absl::Time deadline,
                                                             RedisFailure* failure, bool* reused,
                                                             bool fresh) {
  *failure = RedisFailure::kNotTried;
  *reused = false;
  bool connect = false;
  Connection connection;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) {
      return absl::UnavailableError(
          absl::StrCat("redis ", options_.host, ":", options_.port, ": closed (shutting down)"));
    }
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
    if (!idle_.empty() && !fresh) {
      connection = std::move(idle_.back());
      idle_.pop_back();
      *reused = true;
      busy_sockets_.push_back(connection->fd);
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
    absl::MutexLock lock(&mu_);
    if (closed_) {
      --checked_out_;
      return absl::UnavailableError(
          absl::StrCat("redis ", options_.host, ":", options_.port, ": closed (shutting down)"));
    }
    busy_sockets_.push_back(connection->fd);
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
  if (connection != nullptr) {
    auto it = std::find(busy_sockets_.begin(), busy_sockets_.end(), connection->fd);
    if (it != busy_sockets_.end()) busy_sockets_.erase(it);
  }
  if (healthy && !closed_ && connection != nullptr && connection->err == 0) {
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
  const absl::Time deadline = absl::Now() + options_.timeout + extra;
  bool stale = false;
  absl::StatusOr<std::vector<RedisValue>> replies =
      Exchange(commands, deadline, failure, /*fresh=*/false, &stale);
  if (stale) {
    // Redis closed that connection before it read anything from it: it never saw the commands.
    stale_retries_.fetch_add(1, std::memory_order_relaxed);
    replies = Exchange(commands, deadline, failure, /*fresh=*/true, &stale);
  }
  return replies;
}

absl::StatusOr<std::vector<RedisValue>> RedisClient::Exchange(
    const std::vector<std::vector<std::string>>& commands, absl::Time deadline,
    RedisFailure* failure, bool fresh, bool* stale) {
  *stale = false;
  bool reused = false;
  absl::StatusOr<Connection> connection = Acquire(deadline, failure, &reused, fresh);
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
      const bool closed_while_idle = reused && i == 0 && ClosedByPeer(*context);
      Release(*std::move(connection), /*healthy=*/false);
      if (closed_while_idle) {
        *stale = true;
        // The other pooled connections most likely went with the same restart.
        std::vector<Connection> dropped;
        absl::MutexLock lock(&mu_);
        dropped.swap(idle_);
        return absl::UnavailableError(absl::StrCat("redis: the pooled connection was closed: ", why));
      }
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

std::string ErrorReplyCode(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kInternal) return "";
  absl::string_view message = status.message();
  for (absl::string_view prefix : kErrorPrefixes) {
    if (absl::ConsumePrefix(&message, prefix)) {
      return std::string(message.substr(0, message.find(' ')));
    }
  }
  return "";
}

bool IsPassingErrorReply(const absl::Status& status) {
  const std::string code = ErrorReplyCode(status);
  return code == "OOM" || code == "LOADING" || code == "BUSY" || code == "TRYAGAIN" ||
         code == "MASTERDOWN" || code == "CLUSTERDOWN";
}

absl::Status CheckRedisServer(const std::string& host, int port, absl::Duration timeout) {
  const std::string where = absl::StrCat(host, ":", port);
  const timeval budget = TimevalOf(timeout);
  std::unique_ptr<redisContext, void (*)(redisContext*)> context(
      redisConnectWithTimeout(host.c_str(), port, budget), [](redisContext* c) {
        if (c != nullptr) redisFree(c);
      });
  if (context == nullptr || context->err != 0) {
    return absl::UnavailableError(absl::StrCat(
        "nothing answers at ", where, " (",
        context == nullptr ? "out of memory" : context->errstr, ")"));
  }
  redisSetTimeout(context.get(), budget);
  auto command = [&](const char* text) {
    return std::unique_ptr<redisReply, void (*)(void*)>(
        static_cast<redisReply*>(redisCommand(context.get(), text)), freeReplyObject);
  };
  // PING in Redis's inline form, then an empty line (which Redis ignores): an HTTP server reads that
  // as a complete request and answers it, where a properly framed command would leave it waiting
  // for the rest of its headers.
  constexpr absl::string_view kPing = "PING\r\n\r\n";
  void* raw = nullptr;
  if (redisAppendFormattedCommand(context.get(), kPing.data(), kPing.size()) != REDIS_OK ||
      redisGetReply(context.get(), &raw) != REDIS_OK) {
    raw = nullptr;
  }
  std::unique_ptr<redisReply, void (*)(void*)> pong(static_cast<redisReply*>(raw),
                                                    freeReplyObject);
  if (pong == nullptr) {
    if (context->err == REDIS_ERR_PROTOCOL || context->err == REDIS_ERR_EOF) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, " is not a Redis server: it answered PING with ",
          context->err == REDIS_ERR_EOF ? std::string("a closed connection")
                                        : absl::StrCat("something else (", context->errstr, ")")));
    }
    return absl::UnavailableError(
        absl::StrCat(where, " accepted the connection but did not answer PING (",
                     context->errstr, ")"));
  }
  const absl::string_view reply(pong->str != nullptr ? pong->str : "", pong->len);
  if (pong->type == REDIS_REPLY_ERROR) {
    if (absl::StartsWith(reply, "NOAUTH") || absl::StartsWith(reply, "WRONGPASS")) {
      return absl::FailedPreconditionError(absl::StrCat(
          "Redis at ", where,
          " requires a password (NOAUTH); placement_server sends none: run Redis without "
          "requirepass on a private network (see deploy/README.md)"));
    }
    if (absl::StartsWith(reply, "LOADING")) {
      return absl::UnavailableError(absl::StrCat("Redis at ", where, " is loading its data"));
    }
    return absl::FailedPreconditionError(
        absl::StrCat("Redis at ", where, " refused PING: ", reply.substr(0, 200)));
  }
  if (pong->type != REDIS_REPLY_STATUS || reply != "PONG") {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " is not a Redis server: it answered PING with something else"));
  }
  auto info = command("INFO server");
  if (info == nullptr) {
    return absl::UnavailableError(absl::StrCat("Redis at ", where, " did not answer INFO (",
                                               context->errstr, ")"));
  }
  if (info->type != REDIS_REPLY_STRING) return absl::OkStatus();  // INFO renamed away: no check
  for (absl::string_view line : absl::StrSplit(absl::string_view(info->str, info->len), '\n')) {
    if (!absl::ConsumePrefix(&line, "redis_version:")) continue;
    line = absl::StripAsciiWhitespace(line);
    int major = 0;
    if (absl::SimpleAtoi(line.substr(0, line.find('.')), &major) && major < 7) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Redis at ", where, " is version ", line,
          "; shared operations need Redis 7.0 or newer (script flags)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace placement::cache
