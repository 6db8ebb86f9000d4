-- retry.lua: a handler failed; acknowledge the entry for this group and
-- schedule the message in the group's retry lane (one transition: pending ->
-- scheduled in the retry lane). If the entry is no longer pending (another
-- consumer reclaimed and finished it), nothing is done.
--
-- KEYS[1]  STREAM  the stream the entry was read from
-- KEYS[2]  ZSET    the group's retry lane delayed set
-- KEYS[3]  HASH    the group's retry lane envelopes
-- KEYS[4..6] HASH optional: the shard's history keys (totals, minute,
--                  hour; see history.lua), in which the retry is counted
--                  ("retried:<group>")
-- ARGV[1]  group name
-- ARGV[2]  stream entry id
-- ARGV[3]  retry-lane member (message id, 0x1F, failed entry id)
-- ARGV[4]  envelope for the next attempt
-- ARGV[5]  backoff in ms, added to Redis TIME
-- ARGV[6]  the retry lane's wake channel: PUBLISHed the due time when it is
--          earlier than the lane's head and within the wake horizon
--
-- Returns the due ms of the retry, or -1 if the entry was not pending.
--
-- The entry is acknowledged last: a command that fails midway (refused by
-- the caller's ACL, a key of the wrong type) stops the script with what it
-- wrote kept, so the message must then still be pending (delivered again:
-- at worst a duplicate), never acknowledged without its retry (lost).
if #redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1) == 0 then
  return -1
end
local t = redis.call('TIME') -- now rounded up to the ms: the delay is never cut short
local now = tonumber(t[1]) * 1000 + math.ceil(tonumber(t[2]) / 1000)
local due = now + tonumber(ARGV[5])
-- The score as a string made once: Redis would format the number with a
-- double's printf for each command it is passed to.
local score = string.format('%d', due)
-- Whether a member is due no later (the mover is woken when none is; see
-- wake.lua).
local sooner = wake_sooner(KEYS[2], due, score, now)
-- A full server (maxmemory with noeviction) refuses a script's write that
-- may add memory while the script has written nothing yet; a retry moves
-- the message rather than adding one. So when the envelope's HSET is
-- refused, its field is deleted first (a write that only frees) and the
-- HSET made again. The entry is acknowledged last, once the retry is
-- written: any refusal before leaves it pending, nothing lost.
local ok = redis.pcall('HSET', KEYS[3], ARGV[3], ARGV[4])
if type(ok) == 'table' and ok.err then
  redis.call('HDEL', KEYS[3], ARGV[3])
  redis.call('HSET', KEYS[3], ARGV[3], ARGV[4])
end
redis.call('ZADD', KEYS[2], score, ARGV[3])
if sooner == 0 then
  publish(ARGV[6], score)
end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
tally(4, 'retried:' .. ARGV[1], 1)
return due
