#include "service/shared_ops/operation_store.h"

#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace placement::shared_ops {
namespace {

// Lua helpers shared by the scripts. `bounded` cuts every field but the op order to one byte over
// kMaxFieldBytes (the reader refuses it then): a forged megabyte never leaves Redis.
constexpr char kLuaHelpers[] = R"lua(
local function fields(flat)
  local map = {}
  for i = 1, #flat, 2 do map[flat[i]] = flat[i + 1] end
  return map
end
local function bounded(flat)
  for i = 2, #flat, 2 do
    if flat[i - 1] ~= 'request_index' and #flat[i] > 4097 then flat[i] = string.sub(flat[i], 1, 4097) end
  end
  return flat
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
  return {bounded(op), bounded(job), value}
end
-- Forgets a job's stored request; its bytes leave its tenant's budget.
local function drop_request(prefix, job_hash, job_key)
  redis.call('DEL', prefix .. 'req:' .. job_key)
  local tenant = redis.call('HGET', job_hash, 'tenant')
  if not tenant then return end
  local budget = prefix .. 'reqbytes:' .. tenant
  local size = tonumber(redis.call('HGET', budget, job_key))
  if size then
    redis.call('HDEL', budget, job_key)
    if redis.call('HINCRBY', budget, '~total', -size) < 0 then redis.call('HSET', budget, '~total', 0) end
  end
end
-- Ends a job that will never run (cancelled, or lost with its request): its ops learn why.
local function end_job(prefix, job_hash, job_key, code, message, stage)
  drop_request(prefix, job_hash, job_key)
  redis.call('HSET', job_hash, 'state', 'failed', 'error_code', code, 'error_message', message,
             'stage', stage)
end
local function drop_entry(stream, group, id)
  redis.pcall('XACK', stream, group, id)
  redis.call('XDEL', stream, id)
end
)lua";

// KEYS: job, req, op, stream, jobops. ARGV: consumer, group, request ('' unless stored), job lifetime
// ms, job key, tenant, the cache result of a joining submit, lease ms, time limit ns, request storage
// wanted ('stored' | 'too_large'), tenant budget bytes (0 = none), prefix, then the op's field/value
// pairs. Returns {0 created | 1 joined | 2 existed, owner, entry, request storage}.
constexpr char kSubmitScript[] = R"lua(
if redis.call('EXISTS', KEYS[3]) == 1 then
  local job = redis.call('HGET', KEYS[3], 'job')
  if job ~= ARGV[5] then return {2, '', '', ''} end
  return {2, redis.call('HGET', KEYS[1], 'owner') or '', redis.call('HGET', KEYS[1], 'entry') or '',
          redis.call('HGET', KEYS[1], 'request') or ''}
end
local state = redis.call('HGET', KEYS[1], 'state')
local cancelled = redis.call('HGET', KEYS[1], 'cancel') == '1'
local joined = 0
local owner = ARGV[1]
local entry = ''
local storage = ARGV[10]
if (state == 'queued' or state == 'running') and not cancelled then
  joined = 1
  redis.call('HINCRBY', KEYS[1], 'waiters', 1)
  owner = redis.call('HGET', KEYS[1], 'owner') or ''
  entry = redis.call('HGET', KEYS[1], 'entry') or ''
  storage = redis.call('HGET', KEYS[1], 'request') or ''
else
  -- No live job (or one that everybody left): a fresh one, owned by this replica.
  if state then drop_request(ARGV[12], KEYS[1], ARGV[5]) end
  redis.call('DEL', KEYS[1], KEYS[5])
  if storage == 'stored' then
    local size = #ARGV[3]
    local budget = ARGV[12] .. 'reqbytes:' .. ARGV[6]
    local limit = tonumber(ARGV[11])
    if limit > 0 then
      local total = tonumber(redis.call('HGET', budget, '~total') or '0') or 0
      local now = redis.call('TIME')
      local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
      local recounted = tonumber(redis.call('HGET', budget, '~recounted') or '0') or 0
      if total + size > limit and now_ms - recounted >= 1000 then
        -- Requests whose jobs ended without saying so (expired, evicted) still count: recount, at
        -- most once a second.
        total = 0
        local flat = redis.call('HGETALL', budget)
        for i = 1, #flat, 2 do
          if string.sub(flat[i], 1, 1) ~= '~' then
            if redis.call('EXISTS', ARGV[12] .. 'req:' .. flat[i]) == 1 then
              total = total + (tonumber(flat[i + 1]) or 0)
            else
              redis.call('HDEL', budget, flat[i])
            end
          end
        end
        redis.call('HSET', budget, '~total', total, '~recounted', now_ms)
      end
      if total + size > limit then storage = 'over_budget' end
    end
    if storage == 'stored' then
      redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
      redis.call('HSET', budget, ARGV[5], size)
      redis.call('HINCRBY', budget, '~total', size)
      redis.call('PEXPIRE', budget, ARGV[4])
    end
  end
  redis.call('HSET', KEYS[1], 'state', 'queued', 'owner', ARGV[1], 'waiters', 1, 'cancel', 0,
             'stage', 'queued', 'fraction', '0', 'best_makespan_ns', 0, 'tenant', ARGV[6],
             'lease_ms', ARGV[8], 'time_limit_ns', ARGV[9], 'request', storage)
  -- '$': only entries added from now on are undelivered, so the read below returns ours.
  redis.pcall('XGROUP', 'CREATE', KEYS[4], ARGV[2], '$', 'MKSTREAM')
  entry = redis.call('XADD', KEYS[4], '*', 'job', ARGV[5])
  for _ = 1, 1000 do
    local read = redis.call('XREADGROUP', 'GROUP', ARGV[2], ARGV[1], 'COUNT', 1, 'STREAMS', KEYS[4], '>')
    if not read then break end
    local id = read[1][2][1][1]
    if id == entry then break end
    -- Every entry is read by the script that adds it: one still undelivered was not added by us.
    drop_entry(KEYS[4], ARGV[2], id)
  end
  redis.call('HSET', KEYS[1], 'entry', entry)
end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('HSET', KEYS[3], unpack(ARGV, 13))
if joined == 1 then redis.call('HSET', KEYS[3], 'cache', ARGV[7]) end
redis.call('PEXPIRE', KEYS[3], ARGV[4])
redis.call('SADD', KEYS[5], KEYS[3])
redis.call('PEXPIRE', KEYS[5], ARGV[4])
return {joined, owner, entry, storage}
)lua";

// KEYS: op, job, stream, jobops. ARGV: group, entry, prefix, job key.
constexpr char kAbandonScript[] = R"lua(
if redis.call('EXISTS', KEYS[2]) == 1 then drop_request(ARGV[3], KEYS[2], ARGV[4]) end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[4])
if ARGV[2] ~= '' then drop_entry(KEYS[3], ARGV[1], ARGV[2]) end
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

// KEYS: stream. ARGV: group, consumer, our lease ms, entries wanted, prefix, entries to look at.
// Returns {{{id, job key}...}, dropped, waiting for a longer lease, longest lease ms}.
constexpr char kClaimExpiredScript[] = R"lua(
local ok, pending = pcall(redis.call, 'XPENDING', KEYS[1], ARGV[1], 'IDLE', ARGV[3], '-', '+', ARGV[6])
if not ok then return {{}, 0, 0, 0} end  -- no stream or group yet: nothing was ever submitted
local claimed, dropped, waiting, longest = {}, 0, 0, 0
local wanted = tonumber(ARGV[4])
for _, p in ipairs(pending) do
  local id, idle = p[1], tonumber(p[3])
  local job_key = false
  local range = redis.call('XRANGE', KEYS[1], id, id)
  if #range == 1 then job_key = fields(range[1][2])['job'] end
  local live = false
  if job_key and job_key ~= '' then
    local job = ARGV[5] .. 'job:' .. job_key
    local state = redis.call('HGET', job, 'state')
    if (state == 'queued' or state == 'running') and redis.call('HGET', job, 'entry') == id then
      if redis.call('HGET', job, 'cancel') == '1' then
        end_job(ARGV[5], job, job_key, 1, 'the operation was cancelled', 'cancelled')
      else
        live = true
        local lease = tonumber(redis.call('HGET', job, 'lease_ms') or '0') or 0
        if lease > longest then longest = lease end
        if idle < lease then
          waiting = waiting + 1
        elseif #claimed < wanted then
          local got = redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[3], id, 'JUSTID')
          if #got == 1 then claimed[#claimed + 1] = {id, job_key} end
        end
      end
    end
  end
  if not live then
    drop_entry(KEYS[1], ARGV[1], id)
    dropped = dropped + 1
  end
end
return {claimed, dropped, waiting, longest}
)lua";

// KEYS: job, req, stream. ARGV: group, consumer, entry, our lease ms, prefix, job key.
constexpr char kTakeOverScript[] = R"lua(
local state = redis.call('HGET', KEYS[1], 'state')
if (state ~= 'queued' and state ~= 'running') or redis.call('HGET', KEYS[1], 'entry') ~= ARGV[3] then
  drop_entry(KEYS[3], ARGV[1], ARGV[3])
  return false
end
if redis.call('HGET', KEYS[1], 'cancel') == '1' then
  end_job(ARGV[5], KEYS[1], ARGV[6], 1, 'the operation was cancelled', 'cancelled')
  drop_entry(KEYS[3], ARGV[1], ARGV[3])
  return false
end
local request = redis.call('GET', KEYS[2])
if not request then
  local storage = redis.call('HGET', KEYS[1], 'request')
  local why = 'its request expired'
  if storage == 'too_large' then
    why = 'its request was larger than --operation_max_request_bytes, so it was not stored for another replica'
  elseif storage == 'over_budget' then
    why = "its request was not stored for another replica (its tenant's --operation_tenant_request_bytes were in use)"
  end
  end_job(ARGV[5], KEYS[1], ARGV[6], 10, 'the job was lost with its replica and ' .. why ..
          '; submit the request again', 'failed')
  drop_entry(KEYS[3], ARGV[1], ARGV[3])
  return false
end
redis.call('HSET', KEYS[1], 'owner', ARGV[2], 'state', 'queued', 'stage', 'queued', 'lease_ms', ARGV[4])
return {request, redis.call('HGET', KEYS[1], 'tenant') or '', redis.call('HGET', KEYS[1], 'time_limit_ns') or ''}
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

// KEYS: job, stream, result, jobops. ARGV: group, consumer, entry, state, value, value ttl ms, ttl
// after done ms, error code, error message, queue ns, solve ns, prefix, job key.
constexpr char kCompleteScript[] = R"lua(
local state = redis.call('HGET', KEYS[1], 'state')
local owner = redis.call('HGET', KEYS[1], 'owner')
local entry = redis.call('HGET', KEYS[1], 'entry')
if state == 'done' or state == 'failed' or (owner and owner ~= ARGV[2]) or
   (entry and entry ~= ARGV[3]) then
  -- Another replica took the job over (or finished it): its answer stands. Our entry, if it is
  -- not the job's, is stale.
  if entry ~= ARGV[3] and ARGV[3] ~= '' then drop_entry(KEYS[2], ARGV[1], ARGV[3]) end
  return 0
end
if ARGV[4] == 'done' then
  redis.call('SET', KEYS[3], ARGV[5], 'PX', ARGV[6])
end
drop_request(ARGV[12], KEYS[1], ARGV[13])
redis.call('HSET', KEYS[1], 'state', ARGV[4], 'owner', ARGV[2], 'result', KEYS[3],
           'error_code', ARGV[8], 'error_message', ARGV[9], 'queue_ns', ARGV[10],
           'solve_ns', ARGV[11], 'stage', ARGV[4] == 'done' and 'done' or 'failed',
           'fraction', ARGV[4] == 'done' and '1' or redis.call('HGET', KEYS[1], 'fraction') or '0')
redis.call('PEXPIRE', KEYS[1], ARGV[7])
if ARGV[3] ~= '' then drop_entry(KEYS[2], ARGV[1], ARGV[3]) end
for _, op in ipairs(redis.call('SMEMBERS', KEYS[4])) do redis.call('PEXPIRE', op, ARGV[7]) end
redis.call('PEXPIRE', KEYS[4], ARGV[7])
return 1
)lua";

// Allowed to run while Redis is over maxmemory (noeviction refuses every other write): it frees the
// request first and writes a few small fields. KEYS: job, stream, jobops. ARGV: group, consumer,
// entry, ttl after done ms, error code, error message, queue ns, solve ns, prefix, job key.
constexpr char kUnstoredShebang[] = "#!lua flags=allow-oom\n";
constexpr char kUnstoredScript[] = R"lua(
local state = redis.call('HGET', KEYS[1], 'state')
if (state ~= 'queued' and state ~= 'running') or redis.call('HGET', KEYS[1], 'owner') ~= ARGV[2] or
   redis.call('HGET', KEYS[1], 'entry') ~= ARGV[3] then
  return 0
end
end_job(ARGV[9], KEYS[1], ARGV[10], ARGV[5], ARGV[6], 'failed')
redis.call('HSET', KEYS[1], 'queue_ns', ARGV[7], 'solve_ns', ARGV[8])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
drop_entry(KEYS[2], ARGV[1], ARGV[3])
for _, op in ipairs(redis.call('SMEMBERS', KEYS[3])) do redis.call('PEXPIRE', op, ARGV[4]) end
redis.call('PEXPIRE', KEYS[3], ARGV[4])
return 1
)lua";

// KEYS: job, stream, jobops. ARGV: group, consumer, entry, ttl after done ms, prefix, job key.
constexpr char kFinishCancelledScript[] = R"lua(
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[2] then return 0 end  -- taken over: not ours
if redis.call('HGET', KEYS[1], 'entry') ~= ARGV[3] then
  drop_entry(KEYS[2], ARGV[1], ARGV[3])  -- a stale entry of ours; the job's is someone else's
  return 0
end
local state = redis.call('HGET', KEYS[1], 'state')
if (state == 'queued' or state == 'running') and redis.call('HGET', KEYS[1], 'cancel') == '1' then
  end_job(ARGV[5], KEYS[1], ARGV[6], 1, 'the operation was cancelled', 'cancelled')
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
  for _, op in ipairs(redis.call('SMEMBERS', KEYS[3])) do redis.call('PEXPIRE', op, ARGV[4]) end
  redis.call('PEXPIRE', KEYS[3], ARGV[4])
end
drop_entry(KEYS[2], ARGV[1], ARGV[3])
return 1
)lua";

std::string WithHelpers(absl::string_view script) { return absl::StrCat(kLuaHelpers, script); }

std::string Ms(absl::Duration duration) {
  return absl::StrCat(std::max<int64_t>(1, absl::ToInt64Milliseconds(duration)));
}

// The message of a status as it is stored: cut to what a reader accepts.
std::string StoredMessage(const absl::Status& status) {
  std::string message(status.message());
  if (message.size() > kMaxFieldBytes) {
    message.resize(kMaxFieldBytes - 3);
    message += "...";
  }
  return message;
}

using FieldMap = absl::flat_hash_map<std::string, std::string>;

FieldMap FieldsOf(const RedisValue& flat) {
  FieldMap map;
  for (size_t i = 0; i + 1 < flat.elements.size(); i += 2) {
    map[flat.elements[i].str] = flat.elements[i + 1].str;
  }
  return map;
}

// Reads fields of a record from Redis, each checked: the first violation is kept, and the record is
// then refused as a whole (DATA_LOSS) instead of passing anything odd on.
class FieldReader {
 public:
  FieldReader(const FieldMap& map, absl::string_view what) : map_(map), what_(what) {}

  std::string Text(const char* field, size_t max_bytes = kMaxFieldBytes) {
    auto it = map_.find(field);
    if (it == map_.end()) return "";
    if (it->second.size() > max_bytes) {
      Violate(field, absl::StrCat("longer than ", max_bytes, " bytes"));
      return "";
    }
    return it->second;
  }
  // Printable ASCII only (what goes into a status message, a log line or a progress stage).
  std::string PrintableText(const char* field, size_t max_bytes) {
    std::string text = Text(field, max_bytes);
    for (char c : text) {
      if (!absl::ascii_isprint(static_cast<unsigned char>(c))) {
        Violate(field, "not printable text");
        return "";
      }
    }
    return text;
  }
  int64_t Int(const char* field, int64_t lo, int64_t hi) {
    auto it = map_.find(field);
    if (it == map_.end() || it->second.empty()) return std::max<int64_t>(lo, 0);
    int64_t value = 0;
    if (!absl::SimpleAtoi(it->second, &value) || value < lo || value > hi) {
      Violate(field, absl::StrCat("not an integer in [", lo, ", ", hi, "]"));
      return std::max<int64_t>(lo, 0);
    }
    return value;
  }
  double Fraction(const char* field) {
    auto it = map_.find(field);
    if (it == map_.end() || it->second.empty()) return 0;
    double value = 0;
    if (!absl::SimpleAtod(it->second, &value) || !std::isfinite(value) || value < 0 || value > 1) {
      Violate(field, "not a fraction in [0, 1]");
      return 0;
    }
    return value;
  }
  template <typename Enum>
  Enum State(const char* field, std::initializer_list<Enum> values, Enum fallback) {
    const std::string text = Text(field, 16);
    for (Enum value : values) {
      if (text == NameOf(value)) return value;
    }
    Violate(field, "not a known state");
    return fallback;
  }
  void Violate(absl::string_view field, absl::string_view why) {
    if (error_.ok()) {
      error_ = absl::DataLossError(absl::StrCat("the shared store holds a corrupt ", what_,
                                                " record (", field, ": ", why, ")"));
    }
  }
  const absl::Status& error() const { return error_; }

 private:
  const FieldMap& map_;
  const absl::string_view what_;
  absl::Status error_;
};

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

absl::StatusOr<std::optional<JobRecord>> JobOf(const RedisValue& flat) {
  if (flat.type != RedisValue::Type::kArray || flat.elements.empty()) {
    return std::optional<JobRecord>();
  }
  const FieldMap map = FieldsOf(flat);
  FieldReader read(map, "job");
  JobRecord job;
  job.state = read.State("state",
                         {JobRecordState::kQueued, JobRecordState::kRunning, JobRecordState::kDone,
                          JobRecordState::kFailed},
                         JobRecordState::kFailed);
  job.owner = read.PrintableText("owner", 256);
  job.entry_id = read.PrintableText("entry", 64);
  job.waiters = read.Int("waiters", -kInt32Max, kInt32Max);
  job.cancel = read.Int("cancel", 0, 1) != 0;
  job.stage = read.PrintableText("stage", kMaxStageBytes);
  job.fraction = read.Fraction("fraction");
  job.best_makespan_ns = read.Int("best_makespan_ns", 0, kInt64Max);
  job.error_code = static_cast<int>(
      read.Int("error_code", 0, static_cast<int64_t>(absl::StatusCode::kUnauthenticated)));
  job.error_message = read.Text("error_message");
  job.result_key = read.Text("result");
  job.queue_ns = read.Int("queue_ns", 0, kInt64Max);
  job.solve_ns = read.Int("solve_ns", 0, kInt64Max);
  if (!read.error().ok()) return read.error();
  return std::optional<JobRecord>(std::move(job));
}

ViewOrGone ViewOf(const RedisValue& reply) {
  if (reply.type != RedisValue::Type::kArray) return std::optional<OperationView>();  // gone
  if (reply.elements.size() != 3) {
    return absl::DataLossError("the shared store answered a lookup with an unexpected reply");
  }
  const FieldMap map = FieldsOf(reply.elements[0]);
  FieldReader read(map, "operation");
  OperationView view;
  OperationRecord& op = view.operation;
  op.name = read.Text("name", 64);
  op.tenant = read.PrintableText("tenant", 256);
  op.request_id = read.Text("request_id");
  op.request_digest = read.PrintableText("request_digest", 256);
  op.algorithm = read.PrintableText("algorithm", 256);
  op.job_key = read.PrintableText("job", 512);
  op.num_devices = static_cast<int32_t>(read.Int("num_devices", 1, kInt32Max));
  op.state = read.State("state",
                        {OperationState::kPending, OperationState::kDone, OperationState::kCancelled},
                        OperationState::kPending);
  op.result_key = read.Text("result");
  op.created_at_ns = read.Int("created_at_ns", 0, kInt64Max);
  op.cache = static_cast<int>(read.Int("cache", 0, 3));
  std::optional<std::vector<int32_t>> index = UnpackRequestIndex(map.contains("request_index")
                                                                     ? map.at("request_index")
                                                                     : std::string());
  if (!index.has_value()) {
    read.Violate("request_index", "not a permutation of the op order");
  } else {
    op.request_index = *std::move(index);
  }
  if (!read.error().ok()) return read.error();
  absl::StatusOr<std::optional<JobRecord>> job = JobOf(reply.elements[1]);
  if (!job.ok()) return job.status();
  view.job = *std::move(job);
  if (reply.elements[2].type == RedisValue::Type::kString) view.result_value = reply.elements[2].str;
  return std::optional<OperationView>(std::move(view));
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
          "state",         std::string(NameOf(op.state)),
          "result",        op.result_key,
          "cache",         absl::StrCat(op.cache),
          "created_at_ns", absl::StrCat(op.created_at_ns)};
}

std::optional<RequestStorage> StorageNamed(absl::string_view name) {
  for (RequestStorage storage :
       {RequestStorage::kStored, RequestStorage::kTooLarge, RequestStorage::kOverBudget}) {
    if (name == NameOf(storage)) return storage;
  }
  return std::nullopt;
}

}  // namespace

absl::string_view NameOf(OperationState state) {
  switch (state) {
    case OperationState::kPending: return "pending";
    case OperationState::kDone: return "done";
    case OperationState::kCancelled: return "cancelled";
  }
  return "pending";
}

absl::string_view NameOf(JobRecordState state) {
  switch (state) {
    case JobRecordState::kQueued: return "queued";
    case JobRecordState::kRunning: return "running";
    case JobRecordState::kDone: return "done";
    case JobRecordState::kFailed: return "failed";
  }
  return "failed";
}

absl::string_view NameOf(RequestStorage storage) {
  switch (storage) {
    case RequestStorage::kStored: return "stored";
    case RequestStorage::kTooLarge: return "too_large";
    case RequestStorage::kOverBudget: return "over_budget";
  }
  return "stored";
}

bool IsOperationName(absl::string_view name) {
  constexpr absl::string_view kPrefix = "operations/";
  if (name.size() != kPrefix.size() + 32 || !absl::StartsWith(name, kPrefix)) return false;
  for (size_t i = kPrefix.size(); i < name.size(); ++i) {
    const char c = name[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

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
std::string OperationStore::RequestBudgetKey(const std::string& tenant) const {
  return absl::StrCat(Prefix(), "reqbytes:", tenant);
}
std::string OperationStore::ResultKey(const std::string& job_key) const {
  return absl::StrCat(Prefix(), "result:", job_key);
}

absl::StatusOr<SubmitOutcome> OperationStore::Submit(const OperationRecord& operation,
                                                     const NewJob& job) {
  const bool store_request = job.storage == RequestStorage::kStored;
  std::vector<std::string> args = {
      options_.consumer,
      kGroup,
      store_request ? job.serialized_request : std::string(),
      Ms(job.lifetime),
      job.job_key,
      job.tenant,
      absl::StrCat(kCoalesced),
      Ms(job.lease),
      absl::StrCat(absl::ToInt64Nanoseconds(job.time_limit)),
      std::string(NameOf(job.storage)),
      absl::StrCat(std::max<int64_t>(0, job.tenant_request_budget_bytes)),
      Prefix()};
  for (std::string& field : FieldArgs(operation)) args.push_back(std::move(field));
  absl::StatusOr<RedisValue> reply = redis_->Script(
      WithHelpers(kSubmitScript),
      {JobKey(job.job_key), RequestKey(job.job_key), OperationKey(operation.name), StreamKey(),
       absl::StrCat(Prefix(), "jobops:", job.job_key)},
      args, RedisClient::TransferAllowance(args[2].size()));
  if (!reply.ok()) return reply.status();
  if (reply->type != RedisValue::Type::kArray || reply->elements.size() != 4 ||
      reply->elements[0].integer < 0 || reply->elements[0].integer > 2) {
    return absl::InternalError("redis: unexpected reply to the submit script");
  }
  SubmitOutcome outcome;
  outcome.result = static_cast<SubmitResult>(reply->elements[0].integer);
  outcome.owner = reply->elements[1].str;
  outcome.entry_id = reply->elements[2].str;
  outcome.storage = StorageNamed(reply->elements[3].str).value_or(RequestStorage::kStored);
  return outcome;
}

absl::Status OperationStore::Abandon(const std::string& operation_name, const std::string& job_key,
                                     const std::string& entry_id) {
  return redis_
      ->Script(WithHelpers(kAbandonScript),
               {OperationKey(operation_name), JobKey(job_key), StreamKey(),
                absl::StrCat(Prefix(), "jobops:", job_key)},
               {kGroup, entry_id, Prefix(), job_key})
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

ViewOrGone OperationStore::Lookup(const std::string& operation_name) {
  absl::StatusOr<RedisValue> reply =
      redis_->Script(WithHelpers(kLookupScript), {OperationKey(operation_name)}, {Prefix()});
  if (!reply.ok()) return reply.status();
  return ViewOf(*reply);
}

absl::StatusOr<std::vector<ViewOrGone>> OperationStore::LookupMany(
    const std::vector<std::string>& operation_names) {
  std::vector<ViewOrGone> views;
  if (operation_names.empty()) return views;
  std::vector<std::string> args = {Prefix()};
  for (const std::string& name : operation_names) args.push_back(OperationKey(name));
  absl::StatusOr<RedisValue> reply = redis_->Script(WithHelpers(kLookupManyScript), {}, args);
  if (!reply.ok()) return reply.status();
  views.reserve(operation_names.size());
  for (size_t i = 0; i < operation_names.size(); ++i) {
    views.push_back(i < reply->elements.size() ? ViewOf(reply->elements[i])
                                               : ViewOrGone(std::optional<OperationView>()));
  }
  return views;
}

ViewOrGone OperationStore::Cancel(const std::string& operation_name, const std::string& tenant) {
  absl::StatusOr<RedisValue> reply = redis_->Script(
      WithHelpers(kCancelScript), {OperationKey(operation_name)}, {tenant, Prefix()});
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

absl::StatusOr<ClaimOutcome> OperationStore::ClaimExpired(absl::Duration lease, int count,
                                                          int scan) {
  absl::StatusOr<RedisValue> reply = redis_->Script(
      WithHelpers(kClaimExpiredScript), {StreamKey()},
      {kGroup, options_.consumer, Ms(lease), absl::StrCat(std::max(count, 0)), Prefix(),
       absl::StrCat(std::max(scan, 1))});
  if (!reply.ok()) return reply.status();
  ClaimOutcome outcome;
  if (reply->type != RedisValue::Type::kArray || reply->elements.size() != 4) {
    return absl::InternalError("redis: unexpected reply to the claim script");
  }
  for (const RedisValue& entry : reply->elements[0].elements) {
    if (entry.elements.size() != 2) continue;
    outcome.claimed.push_back({entry.elements[0].str, entry.elements[1].str});
  }
  outcome.dropped = reply->elements[1].integer;
  outcome.waiting_for_longer_lease = reply->elements[2].integer;
  outcome.longest_lease = absl::Milliseconds(reply->elements[3].integer);
  return outcome;
}

absl::StatusOr<std::optional<TakenJob>> OperationStore::TakeOver(const ClaimedEntry& entry,
                                                                 absl::Duration lease) {
  absl::StatusOr<RedisValue> reply = redis_->Script(
      WithHelpers(kTakeOverScript),
      {JobKey(entry.job_key), RequestKey(entry.job_key), StreamKey()},
      {kGroup, options_.consumer, entry.entry_id, Ms(lease), Prefix(), entry.job_key});
  if (!reply.ok()) return reply.status();
  if (reply->type != RedisValue::Type::kArray || reply->elements.size() != 3) {
    return std::optional<TakenJob>();
  }
  TakenJob taken{std::move(reply->elements[0].str), std::move(reply->elements[1].str),
                 absl::ZeroDuration()};
  int64_t time_limit_ns = 0;
  if (absl::SimpleAtoi(reply->elements[2].str, &time_limit_ns) && time_limit_ns > 0) {
    taken.time_limit = absl::Nanoseconds(time_limit_ns);
  }
  return std::optional<TakenJob>(std::move(taken));
}

absl::StatusOr<absl::Duration> OperationStore::RedisUptime() {
  absl::StatusOr<RedisValue> reply = redis_->Command({"INFO", "server"});
  if (!reply.ok()) return reply.status();
  for (absl::string_view line : absl::StrSplit(reply->str, '\n')) {
    int64_t seconds = 0;
    if (absl::ConsumePrefix(&line, "uptime_in_seconds:") &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &seconds)) {
      return absl::Seconds(seconds);
    }
  }
  return absl::InternalError("redis: INFO server does not say uptime_in_seconds");
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
    args.push_back(std::string(NameOf(update.state)));
    args.push_back(update.stage.substr(0, kMaxStageBytes));
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
      WithHelpers(kCompleteScript),
      {JobKey(completion.job_key), StreamKey(), completion.result_key,
       absl::StrCat(Prefix(), "jobops:", completion.job_key)},
      {kGroup, options_.consumer, completion.entry_id, ok ? "done" : "failed",
       ok ? completion.result_value : std::string(), Ms(completion.result_ttl),
       Ms(completion.ttl_after_done), absl::StrCat(static_cast<int>(completion.error.code())),
       StoredMessage(completion.error),
       absl::StrCat(absl::ToInt64Nanoseconds(completion.queue_time)),
       absl::StrCat(absl::ToInt64Nanoseconds(completion.solve_time)), Prefix(),
       completion.job_key},
      RedisClient::TransferAllowance(completion.result_value.size()));
  if (!reply.ok()) return reply.status();
  return reply->integer == 1;
}

absl::StatusOr<bool> OperationStore::RecordUnstoredResult(const Completion& completion) {
  absl::StatusOr<RedisValue> reply = redis_->Script(
      absl::StrCat(kUnstoredShebang, kLuaHelpers, kUnstoredScript),
      {JobKey(completion.job_key), StreamKey(),
       absl::StrCat(Prefix(), "jobops:", completion.job_key)},
      {kGroup, options_.consumer, completion.entry_id, Ms(completion.ttl_after_done),
       absl::StrCat(static_cast<int>(completion.error.code())), StoredMessage(completion.error),
       absl::StrCat(absl::ToInt64Nanoseconds(completion.queue_time)),
       absl::StrCat(absl::ToInt64Nanoseconds(completion.solve_time)), Prefix(),
       completion.job_key});
  if (!reply.ok()) return reply.status();
  return reply->integer == 1;
}

absl::StatusOr<bool> OperationStore::FinishCancelled(const std::string& job_key,
                                                     const std::string& entry_id,
                                                     absl::Duration ttl_after_done) {
  absl::StatusOr<RedisValue> reply = redis_->Script(
      WithHelpers(kFinishCancelledScript),
      {JobKey(job_key), StreamKey(), absl::StrCat(Prefix(), "jobops:", job_key)},
      {kGroup, options_.consumer, entry_id, Ms(ttl_after_done), Prefix(), job_key});
  if (!reply.ok()) return reply.status();
  return reply->integer == 1;
}

}  // namespace placement::shared_ops
