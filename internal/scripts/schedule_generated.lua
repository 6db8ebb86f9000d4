-- schedule_generated.lua: add messages with generated ids to a lane's delayed
-- set (one transition: -> scheduled). The fast path of schedule.lua for calls
-- in which no message has a caller-chosen id: a generated id is new, so there
-- is nothing to look up, and its packed member (see ids.lua) needs no hash
-- entry. Same reply as schedule.lua.
--
-- KEYS[1]  ZSET  delayed set
-- ARGV[1]  wake channel: PUBLISHed the earliest new due time when it is
--          earlier than the current head and within the wake horizon
--          (wake.lua; "" = never publish)
-- ARGV[2..] pairs per message: packed member, when ("r<ms>" due <ms> after
--          Redis TIME, "a<ms>" due at absolute Unix ms)
--
-- With a call token (one more key and ARGV, last): see once.lua.
--
-- Returns a flat array, two items per message, in order: status (always 1,
-- created), due ms.
--
-- Commands, for any number of messages: TIME, ZCOUNT (ZCARD instead with
-- a call token when the earliest message is due beyond the wake horizon,
-- none without one: see wake.lua), ZADD (once per slice of 2000 values),
-- maybe PUBLISH; with a call token (once.lua) one SET (NX GET).
local nargv = once_args(1)
local t = redis.call('TIME')
-- "now" rounded up to the next ms, so "r<ms>" is never due sooner than
-- <ms> after this script ran.
local now = tonumber(t[1]) * 1000 + math.ceil(tonumber(t[2]) / 1000)
local n = (nargv - 1) / 2

-- plan returns the reply for a run at now, the ZADD arguments and the
-- earliest due time (nil without messages) with its score string.
local function plan(now)
  local out, zargs = {}, {}
  local lastWhen, due, score, earliest, first
  for k = 1, n do
    local when = ARGV[2 * k + 1]
    if when ~= lastWhen then -- a batch usually shares its whens
      due = tonumber(string.sub(when, 2))
      if string.byte(when) == 114 then -- "r": relative to now
        due = now + due
      end
      lastWhen, score = when, string.format('%d', due)
      if earliest == nil or due < earliest then
        earliest, first = due, score
      end
    end
    zargs[2 * k - 1] = score
    zargs[2 * k] = ARGV[2 * k]
    out[2 * k - 1] = 1
    out[2 * k] = due
  end
  return out, zargs, earliest, first
end

local out, zargs, earliest, first = plan(now)
-- Whether a member is due no later than the earliest new message, before
-- anything is written (the mover is woken when none is; see wake.lua). A
-- delayed set of the wrong type fails the call here, with nothing stored;
-- when no check is made (no channel, or every new message due beyond the
-- wake horizon), a call with a token checks the type before its claim
-- with ZCARD, and one without fails at the ZADD, with nothing stored
-- either.
local sooner
if first and ARGV[1] ~= '' then
  sooner = wake_sooner(KEYS[1], earliest, first, now)
end
if sooner == nil and (ONCE_KEY or not first) then
  redis.call('ZCARD', KEYS[1])
end
-- With a call token, the first run stores its "now" (every message is
-- created, so that is the whole reply); a later run rebuilds the reply
-- from it and writes nothing.
local seen = once_claim('^%d+$', string.format('%d', now))
if seen then
  return (plan(tonumber(seen)))
end
-- unpack is bounded by Lua's C stack (about 8000 values): slices of 2000.
for i = 1, 2 * n, 2000 do
  redis.call('ZADD', KEYS[1], unpack(zargs, i, math.min(i + 1999, 2 * n)))
end
if ARGV[1] ~= '' and sooner == 0 then
  publish(ARGV[1], first)
end
return out
