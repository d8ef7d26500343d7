#include "service/shared_ops/operation_store.h"

#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace placement::shared_ops {
namespace {

// Lua helpers shared by the scripts that read an operation back.
constexpr char kReadOperation[] = R"lua(
local function fields(flat)
  local map = {}
  for i = 1, #flat, 2 do map[flat[i]] = flat[i + 1] end
  return map
end
-- {op hash, job hash, value or false} for the op at `op_key`, or false when it is gone.
local function read_operation(op_key, prefix)
  local op = redis.call('HGETALL', op_key)
  if #op == 0 then return false end
  local f = fields(op)
  local job = {}
  local result_key = f['result']
  if f['job'] and f['job'] ~= '' then
    job = redis.call('HGETALL', prefix .. 'job:' .. f['job'])
    local jf = fields(job)
    if (not result_key or result_key == '') and jf['state'] == 'done' then result_key = jf['result'] end
  end
  local value = false
  if result_key and result_key ~= '' then value = redis.call('GET', result_key) end
  return {op, job, value}
end
)lua";

// KEYS: job, req, op, stream, jobops. ARGV: consumer, group, request, job lifetime ms, job key,
// tenant, the cache result of a joining submit, then the op's field/value pairs.
constexpr char kSubmitScript[] = R"lua(
local state = redis.call('HGET', KEYS[1], 'state')
local cancelled = redis.call('HGET', KEYS[1], 'cancel') == '1'
local joined = 0
local owner = ARGV[1]
local entry = ''
if (state == 'queued' or state == 'running') and not cancelled then
  joined = 1
  redis.call('HINCRBY', KEYS[1], 'waiters', 1)
  owner = redis.call('HGET', KEYS[1], 'owner') or ''
else
  -- No live job (or one that everybody left): a fresh one, owned by this replica.
  redis.call('DEL', KEYS[1], KEYS[5])
  redis.call('HSET', KEYS[1], 'state', 'queued', 'owner', ARGV[1], 'waiters', 1, 'cancel', 0,
             'stage', 'queued', 'fraction', '0', 'best_makespan_ns', 0, 'tenant', ARGV[6])
  redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
  -- '$': only entries added from now on are undelivered, so the read below returns ours.
  redis.pcall('XGROUP', 'CREATE', KEYS[4], ARGV[2], '$', 'MKSTREAM')
  entry = redis.call('XADD', KEYS[4], '*', 'job', ARGV[5])
  for _ = 1, 1000 do
    local read = redis.call('XREADGROUP', 'GROUP', ARGV[2], ARGV[1], 'COUNT', 1, 'STREAMS', KEYS[4], '>')
    if not read or read[1][2][1][1] == entry then break end
  end
  redis.call('HSET', KEYS[1], 'entry', entry)
end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('DEL', KEYS[3])
redis.call('HSET', KEYS[3], unpack(ARGV, 8))
if joined == 1 then redis.call('HSET', KEYS[3], 'cache', ARGV[7]) end
redis.call('PEXPIRE', KEYS[3], ARGV[4])
redis.call('SADD', KEYS[5], KEYS[3])
redis.call('PEXPIRE', KEYS[5], ARGV[4])
return {joined, owner, entry}
)lua";

// KEYS: op, job, req, stream, jobops. ARGV: group, entry.
constexpr char kAbandonScript[] = R"lua(
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[5])
if ARGV[2] ~= '' then
  redis.pcall('XACK', KEYS[4], ARGV[1], ARGV[2])
  redis.call('XDEL', KEYS[4], ARGV[2])
end
return 1
)lua";

// KEYS: op. ARGV: prefix.
constexpr char kLookupScript[] = "return read_operation(KEYS[1], ARGV[1])";

// ARGV: prefix, op keys. read_operation per op (false when gone).
constexpr char kLookupManyScript[] = R"lua(
local out = {}
for i = 2, #ARGV do out[i - 1] = read_operation(ARGV[i], ARGV[1]) end
return out
)lua";

// KEYS: op. ARGV: tenant, prefix.
constexpr char kCancelScript[] = R"lua(
local tenant = redis.call('HGET', KEYS[1], 'tenant')
if not tenant or tenant ~= ARGV[1] then return false end
if redis.call('HGET', KEYS[1], 'state') == 'pending' then
  local job_key = ARGV[2] .. 'job:' .. (redis.call('HGET', KEYS[1], 'job') or '')
  local job_state = redis.call('HGET', job_key, 'state')
  if job_state ~= 'done' and job_state ~= 'failed' then
    redis.call('HSET', KEYS[1], 'state', 'cancelled')
    if job_state then
      if redis.call('HINCRBY', job_key, 'waiters', -1) <= 0 then
        redis.call('HSET', job_key, 'cancel', 1)
      end
    end
  end
end
return read_operation(KEYS[1], ARGV[2])
)lua";

// KEYS: stream. ARGV: group, consumer, idle ms ('' = renew), entry ids. Claims only the entries still
// in this consumer's pending list: XCLAIM alone would take a job back from whoever took it over.
constexpr char kClaimMineScript[] = R"lua(
local mine = {}
for _, e in ipairs(redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1000000, ARGV[2])) do
  mine[e[1]] = true
end
local ids = {}
for i = 4, #ARGV do
  if mine[ARGV[i]] then ids[#ids + 1] = ARGV[i] end
end
if #ids == 0 then return {} end
if ARGV[3] == '' then
  return redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, unpack(ids), 'JUSTID')
end
return redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, unpack(ids), 'IDLE', ARGV[3], 'JUSTID')
)lua";

// KEYS: job, req, stream. ARGV: group, consumer, entry.
constexpr char kTakeOverScript[] = R"lua(
local state = redis.call('HGET', KEYS[1], 'state')
local function drop()
  redis.call('XACK', KEYS[3], ARGV[1], ARGV[3])
  redis.call('XDEL', KEYS[3], ARGV[3])
  return false
end
if (state ~= 'queued' and state ~= 'running') or redis.call('HGET', KEYS[1], 'entry') ~= ARGV[3] then
  return drop()
end
if redis.call('HGET', KEYS[1], 'cancel') == '1' then
  redis.call('HSET', KEYS[1], 'state', 'failed', 'error_code', 1, 'error_message',
             'the operation was cancelled', 'stage', 'cancelled')
  return drop()
end
local request = redis.call('GET', KEYS[2])
if not request then
  redis.call('HSET', KEYS[1], 'state', 'failed', 'error_code', 10, 'error_message',
             'the job was lost with its replica and its request expired', 'stage', 'failed')
  return drop()
end
redis.call('HSET', KEYS[1], 'owner', ARGV[2], 'state', 'queued', 'stage', 'queued')
return {request, redis.call('HGET', KEYS[1], 'tenant') or ''}
)lua";

// KEYS: stream. ARGV: group, consumer (kept), idle ms.
constexpr char kForgetConsumersScript[] = R"lua(
local ok, consumers = pcall(redis.call, 'XINFO', 'CONSUMERS', KEYS[1], ARGV[1])
if not ok then return 0 end
local removed = 0
for _, consumer in ipairs(consumers) do
  local info = {}
  for i = 1, #consumer, 2 do info[consumer[i]] = consumer[i + 1] end
  if info['name'] ~= ARGV[2] and tonumber(info['pending']) == 0 and
     tonumber(info['idle']) >= tonumber(ARGV[3]) then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], info['name'])
    removed = removed + 1
  end
end
return removed
)lua";

// ARGV: consumer, then (job key, state, stage, fraction, best) per job.
constexpr char kProgressScript[] = R"lua(
for i = 2, #ARGV, 5 do
  if redis.call('HGET', ARGV[i], 'owner') == ARGV[1] then
    local state = redis.call('HGET', ARGV[i], 'state')
    if state == 'queued' or state == 'running' then
      redis.call('HSET', ARGV[i], 'state', ARGV[i + 1], 'stage', ARGV[i + 2], 'fraction', ARGV[i + 3],
                 'best_makespan_ns', ARGV[i + 4])
    end
  end
end
return 1
)lua";

// KEYS: job, req, stream, result, jobops. ARGV: group, consumer, entry, state, value, value ttl ms,
// ttl after done ms, error code, error message, queue ns, solve ns.
constexpr char kCompleteScript[] = R"lua(
local state = redis.call('HGET', KEYS[1], 'state')
local owner = redis.call('HGET', KEYS[1], 'owner')
local entry = redis.call('HGET', KEYS[1], 'entry')
local function drop_entry()
  if ARGV[3] ~= '' then
    redis.pcall('XACK', KEYS[3], ARGV[1], ARGV[3])
    redis.call('XDEL', KEYS[3], ARGV[3])
  end
end
if state == 'done' or state == 'failed' or (owner and owner ~= ARGV[2]) or
   (entry and entry ~= ARGV[3]) then
  -- Another replica took the job over (or finished it): its answer stands. Our entry, if it is
  -- not the job's, is stale.
  if entry ~= ARGV[3] then drop_entry() end
  return 0
end
if ARGV[4] == 'done' then
  redis.call('SET', KEYS[4], ARGV[5], 'PX', ARGV[6])
end
redis.call('HSET', KEYS[1], 'state', ARGV[4], 'owner', ARGV[2], 'result', KEYS[4],
           'error_code', ARGV[8], 'error_message', ARGV[9], 'queue_ns', ARGV[10],
           'solve_ns', ARGV[11], 'stage', ARGV[4] == 'done' and 'done' or 'failed',
           'fraction', ARGV[4] == 'done' and '1' or redis.call('HGET', KEYS[1], 'fraction') or '0')
redis.call('PEXPIRE', KEYS[1], ARGV[7])
redis.call('DEL', KEYS[2])
drop_entry()
for _, op in ipairs(redis.call('SMEMBERS', KEYS[5])) do redis.call('PEXPIRE', op, ARGV[7]) end
redis.call('PEXPIRE', KEYS[5], ARGV[7])
return 1
)lua";

std::string Ms(absl::Duration duration) {
  return absl::StrCat(std::max<int64_t>(1, absl::ToInt64Milliseconds(duration)));
}

absl::flat_hash_map<std::string, std::string> FieldsOf(const RedisValue& flat) {
  absl::flat_hash_map<std::string, std::string> map;
  for (size_t i = 0; i + 1 < flat.elements.size(); i += 2) {
    map[flat.elements[i].str] = flat.elements[i + 1].str;
  }
  return map;
}

int64_t IntOf(const absl::flat_hash_map<std::string, std::string>& map, const char* field) {
  auto it = map.find(field);
  int64_t value = 0;
  if (it == map.end() || !absl::SimpleAtoi(it->second, &value)) return 0;
  return value;
}

std::string StrOf(const absl::flat_hash_map<std::string, std::string>& map, const char* field) {
  auto it = map.find(field);
  return it == map.end() ? std::string() : it->second;
}

std::optional<JobRecord> JobOf(const RedisValue& flat) {
  if (flat.type != RedisValue::Type::kArray || flat.elements.empty()) return std::nullopt;
  const auto map = FieldsOf(flat);
  JobRecord job;
  job.state = StrOf(map, "state");
  job.owner = StrOf(map, "owner");
  job.entry_id = StrOf(map, "entry");
  job.waiters = IntOf(map, "waiters");
  job.cancel = IntOf(map, "cancel") != 0;
  job.stage = StrOf(map, "stage");
  double fraction = 0;
  if (absl::SimpleAtod(StrOf(map, "fraction"), &fraction) && fraction >= 0 && fraction <= 1) {
    job.fraction = fraction;
  }
  job.best_makespan_ns = IntOf(map, "best_makespan_ns");
  job.error_code = static_cast<int>(IntOf(map, "error_code"));
  job.error_message = StrOf(map, "error_message");
  job.result_key = StrOf(map, "result");
  job.queue_ns = IntOf(map, "queue_ns");
  job.solve_ns = IntOf(map, "solve_ns");
  return job;
}

std::optional<OperationView> ViewOf(const RedisValue& reply) {
  if (reply.type != RedisValue::Type::kArray || reply.elements.size() != 3) return std::nullopt;
  const auto map = FieldsOf(reply.elements[0]);
  OperationView view;
  OperationRecord& op = view.operation;
  op.name = StrOf(map, "name");
  op.tenant = StrOf(map, "tenant");
  op.request_id = StrOf(map, "request_id");
  op.request_digest = StrOf(map, "request_digest");
  op.algorithm = StrOf(map, "algorithm");
  op.job_key = StrOf(map, "job");
  op.num_devices = static_cast<int32_t>(IntOf(map, "num_devices"));
  op.state = StrOf(map, "state");
  op.result_key = StrOf(map, "result");
  op.created_at_ns = IntOf(map, "created_at_ns");
  op.cache = static_cast<int>(IntOf(map, "cache"));
  std::optional<std::vector<int32_t>> index = UnpackRequestIndex(StrOf(map, "request_index"));
  if (index.has_value()) op.request_index = *std::move(index);
  view.job = JobOf(reply.elements[1]);
  if (reply.elements[2].type == RedisValue::Type::kString) view.result_value = reply.elements[2].str;
  return view;
}

std::vector<std::string> FieldArgs(const OperationRecord& op) {
  return {"name",          op.name,
          "tenant",        op.tenant,
          "request_id",    op.request_id,
          "request_digest", op.request_digest,
          "algorithm",     op.algorithm,
          "job",           op.job_key,
          "request_index", PackRequestIndex(op.request_index),
          "num_devices",   absl::StrCat(op.num_devices),
          "state",         op.state,
          "result",        op.result_key,
          "cache",         absl::StrCat(op.cache),
          "created_at_ns", absl::StrCat(op.created_at_ns)};
}

}  // namespace

std::string PackRequestIndex(const std::vector<int32_t>& index) {
  std::string bytes(index.size() * 4, '\0');
  for (size_t i = 0; i < index.size(); ++i) {
    const uint32_t v = static_cast<uint32_t>(index[i]);
    for (int b = 0; b < 4; ++b) bytes[i * 4 + b] = static_cast<char>((v >> (8 * b)) & 0xff);
  }
  return bytes;
}

std::optional<std::vector<int32_t>> UnpackRequestIndex(absl::string_view bytes) {
  if (bytes.size() % 4 != 0) return std::nullopt;
  std::vector<int32_t> index(bytes.size() / 4);
  // The index maps a result back by writing result[index[i]]: anything but a permutation of
  // 0..n-1 (a value from outside the process) would write out of bounds or leave holes.
  std::vector<bool> seen(index.size(), false);
  for (size_t i = 0; i < index.size(); ++i) {
    uint32_t v = 0;
    for (int b = 0; b < 4; ++b) {
      v |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[i * 4 + b])) << (8 * b);
    }
    if (v >= index.size() || seen[v]) return std::nullopt;
    seen[v] = true;
    index[i] = static_cast<int32_t>(v);
  }
  return index;
}

std::string NewReplicaId() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "unknown");
  unsigned char bytes[6] = {};
  size_t filled = 0;
  while (filled < sizeof(bytes)) {
    const ssize_t got = getrandom(bytes + filled, sizeof(bytes) - filled, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) break;
    filled += static_cast<size_t>(got);
  }
  return absl::StrCat(host, ":", getpid(), ":",
                      absl::BytesToHexString(absl::string_view(
                          reinterpret_cast<const char*>(bytes), sizeof(bytes))));
}

OperationStore::OperationStore(RedisClient* redis, OperationStoreOptions options)
    : redis_(redis), options_(std::move(options)) {}

std::string OperationStore::Prefix() const { return absl::StrCat(options_.key_prefix, "o1:"); }
std::string OperationStore::OperationKey(const std::string& name) const {
  return absl::StrCat(Prefix(), "op:", name);
}
std::string OperationStore::JobKey(const std::string& job_key) const {
  return absl::StrCat(Prefix(), "job:", job_key);
}
std::string OperationStore::RequestKey(const std::string& job_key) const {
  return absl::StrCat(Prefix(), "req:", job_key);
}
std::string OperationStore::StreamKey() const { return absl::StrCat(Prefix(), "jobs"); }
std::string OperationStore::ResultKey(const std::string& job_key) const {
  return absl::StrCat(Prefix(), "result:", job_key);
}

absl::StatusOr<SubmitOutcome> OperationStore::Submit(const OperationRecord& operation,
                                                     const NewJob& job) {
  std::vector<std::string> args = {options_.consumer, kGroup, job.serialized_request,
                                   Ms(job.lifetime), job.job_key, job.tenant,
                                   absl::StrCat(kCoalesced)};
  for (std::string& field : FieldArgs(operation)) args.push_back(std::move(field));
  absl::StatusOr<RedisValue> reply = redis_->Script(
      kSubmitScript,
      {JobKey(job.job_key), RequestKey(job.job_key), OperationKey(operation.name), StreamKey(),
       absl::StrCat(Prefix(), "jobops:", job.job_key)},
      args, RedisClient::TransferAllowance(job.serialized_request.size()));
  if (!reply.ok()) return reply.status();
  if (reply->type != RedisValue::Type::kArray || reply->elements.size() != 3) {
    return absl::InternalError("redis: unexpected reply to the submit script");
  }
  SubmitOutcome outcome;
  outcome.joined = reply->elements[0].integer == 1;
  outcome.owner = reply->elements[1].str;
  outcome.entry_id = reply->elements[2].str;
  return outcome;
}

absl::Status OperationStore::Abandon(const std::string& operation_name, const std::string& job_key,
                                     const std::string& entry_id) {
  return redis_
      ->Script(kAbandonScript,
               {OperationKey(operation_name), JobKey(job_key), RequestKey(job_key), StreamKey(),
                absl::StrCat(Prefix(), "jobops:", job_key)},
               {kGroup, entry_id})
      .status();
}

absl::Status OperationStore::RecordDone(const OperationRecord& operation,
                                        const std::string& result_value, absl::Duration value_ttl,
                                        absl::Duration ttl) {
  std::vector<std::string> hset = {"HSET", OperationKey(operation.name)};
  for (std::string& field : FieldArgs(operation)) hset.push_back(std::move(field));
  absl::StatusOr<std::vector<RedisValue>> replies =
      redis_->Pipeline({{"SET", operation.result_key, result_value, "PX", Ms(value_ttl)},
                        std::move(hset),
                        {"PEXPIRE", OperationKey(operation.name), Ms(ttl)}},
                       RedisClient::TransferAllowance(result_value.size()));
  if (!replies.ok()) return replies.status();
  for (const RedisValue& reply : *replies) {
    if (reply.type == RedisValue::Type::kError) {
      return absl::InternalError(absl::StrCat("redis error: ", reply.str));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<OperationView>> OperationStore::Lookup(
    const std::string& operation_name) {
  absl::StatusOr<RedisValue> reply =
      redis_->Script(absl::StrCat(kReadOperation, kLookupScript), {OperationKey(operation_name)},
                     {Prefix()});
  if (!reply.ok()) return reply.status();
  return ViewOf(*reply);
}

absl::StatusOr<std::vector<std::optional<OperationView>>> OperationStore::LookupMany(
    const std::vector<std::string>& operation_names) {
  std::vector<std::optional<OperationView>> views(operation_names.size());
  if (operation_names.empty()) return views;
  std::vector<std::string> args = {Prefix()};
  for (const std::string& name : operation_names) args.push_back(OperationKey(name));
  absl::StatusOr<RedisValue> reply =
      redis_->Script(absl::StrCat(kReadOperation, kLookupManyScript), {}, args);
  if (!reply.ok()) return reply.status();
  for (size_t i = 0; i < views.size() && i < reply->elements.size(); ++i) {
    views[i] = ViewOf(reply->elements[i]);
  }
  return views;
}

absl::StatusOr<std::optional<OperationView>> OperationStore::Cancel(
    const std::string& operation_name, const std::string& tenant) {
  absl::StatusOr<RedisValue> reply =
      redis_->Script(absl::StrCat(kReadOperation, kCancelScript), {OperationKey(operation_name)},
                     {tenant, Prefix()});
  if (!reply.ok()) return reply.status();
  return ViewOf(*reply);
}

absl::StatusOr<std::vector<std::string>> OperationStore::Renew(
    const std::vector<std::string>& entry_ids) {
  if (entry_ids.empty()) return std::vector<std::string>();
  std::vector<std::string> args = {kGroup, options_.consumer, ""};
  args.insert(args.end(), entry_ids.begin(), entry_ids.end());
  absl::StatusOr<RedisValue> reply = redis_->Script(kClaimMineScript, {StreamKey()}, args);
  if (!reply.ok()) return reply.status();
  std::vector<std::string> kept;
  for (const RedisValue& id : reply->elements) kept.push_back(id.str);
  return kept;
}

absl::Status OperationStore::HandBack(const std::vector<std::string>& entry_ids,
                                      absl::Duration idle) {
  if (entry_ids.empty()) return absl::OkStatus();
  std::vector<std::string> args = {kGroup, options_.consumer, Ms(idle)};
  args.insert(args.end(), entry_ids.begin(), entry_ids.end());
  return redis_->Script(kClaimMineScript, {StreamKey()}, args).status();
}

absl::StatusOr<std::vector<ClaimedEntry>> OperationStore::ClaimExpired(absl::Duration lease,
                                                                       int count) {
  absl::StatusOr<RedisValue> reply =
      redis_->Command({"XAUTOCLAIM", StreamKey(), kGroup, options_.consumer, Ms(lease), "0-0",
                       "COUNT", absl::StrCat(std::max(count, 1))});
  if (!reply.ok()) {
    // No stream or group yet: nobody ever submitted, so there is nothing to take over.
    if (absl::IsInternal(reply.status()) &&
        absl::StrContains(reply.status().message(), "NOGROUP")) {
      return std::vector<ClaimedEntry>();
    }
    return reply.status();
  }
  std::vector<ClaimedEntry> claimed;
  if (reply->elements.size() < 2) return claimed;
  for (const RedisValue& entry : reply->elements[1].elements) {
    if (entry.elements.size() != 2) continue;
    const auto fields = FieldsOf(entry.elements[1]);
    claimed.push_back({entry.elements[0].str, StrOf(fields, "job")});
  }
  return claimed;
}

absl::StatusOr<std::optional<TakenJob>> OperationStore::TakeOver(const ClaimedEntry& entry) {
  absl::StatusOr<RedisValue> reply =
      redis_->Script(kTakeOverScript,
                     {JobKey(entry.job_key), RequestKey(entry.job_key), StreamKey()},
                     {kGroup, options_.consumer, entry.entry_id});
  if (!reply.ok()) return reply.status();
  if (reply->type != RedisValue::Type::kArray || reply->elements.size() != 2) {
    return std::optional<TakenJob>();
  }
  return std::optional<TakenJob>(
      TakenJob{std::move(reply->elements[0].str), std::move(reply->elements[1].str)});
}

absl::StatusOr<int64_t> OperationStore::ForgetIdleConsumers(absl::Duration idle) {
  absl::StatusOr<RedisValue> reply =
      redis_->Script(kForgetConsumersScript, {StreamKey()},
                     {kGroup, options_.consumer,
                      absl::StrCat(std::max<int64_t>(0, absl::ToInt64Milliseconds(idle)))});
  if (!reply.ok()) return reply.status();
  return reply->integer;
}

absl::Status OperationStore::WriteProgress(const std::vector<ProgressUpdate>& updates) {
  if (updates.empty()) return absl::OkStatus();
  std::vector<std::string> args = {options_.consumer};
  for (const ProgressUpdate& update : updates) {
    args.push_back(JobKey(update.job_key));
    args.push_back(update.state);
    args.push_back(update.stage);
    args.push_back(absl::StrCat(update.fraction));
    args.push_back(absl::StrCat(update.best_makespan_ns));
  }
  return redis_->Script(kProgressScript, {}, args).status();
}

absl::StatusOr<std::vector<bool>> OperationStore::CancelFlags(
    const std::vector<std::string>& job_keys) {
  std::vector<std::vector<std::string>> commands;
  commands.reserve(job_keys.size());
  for (const std::string& key : job_keys) commands.push_back({"HGET", JobKey(key), "cancel"});
  absl::StatusOr<std::vector<RedisValue>> replies = redis_->Pipeline(commands);
  if (!replies.ok()) return replies.status();
  std::vector<bool> flags;
  flags.reserve(replies->size());
  for (const RedisValue& reply : *replies) flags.push_back(reply.str == "1");
  return flags;
}

absl::StatusOr<bool> OperationStore::Complete(const Completion& completion) {
  const bool ok = completion.error.ok();
  absl::StatusOr<RedisValue> reply = redis_->Script(
      kCompleteScript,
      {JobKey(completion.job_key), RequestKey(completion.job_key), StreamKey(),
       completion.result_key, absl::StrCat(Prefix(), "jobops:", completion.job_key)},
      {kGroup, options_.consumer, completion.entry_id, ok ? "done" : "failed",
       ok ? completion.result_value : std::string(), Ms(completion.result_ttl),
       Ms(completion.ttl_after_done), absl::StrCat(static_cast<int>(completion.error.code())),
       std::string(completion.error.message()),
       absl::StrCat(absl::ToInt64Nanoseconds(completion.queue_time)),
       absl::StrCat(absl::ToInt64Nanoseconds(completion.solve_time))},
      RedisClient::TransferAllowance(completion.result_value.size()));
  if (!reply.ok()) return reply.status();
  return reply->integer == 1;
}

}  // namespace placement::shared_ops
