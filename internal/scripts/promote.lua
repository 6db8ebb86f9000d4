-- promote.lua: move due messages of one lane into its stream (one transition:
-- scheduled -> in stream, or scheduled -> quarantined). Bounded: at most
-- ARGV[1] messages per call; the caller loops while a batch is full.
--
-- KEYS[1]  ZSET    delayed set (message id -> due ms)
-- KEYS[2]  HASH    envelopes (message id -> encoded envelope)
-- KEYS[3]  STREAM  the lane's stream
-- KEYS[4]  STREAM  the lane's quarantine
-- KEYS[5]  STRING  the lane's mover lease
-- ARGV[1]  limit: most messages to take (1..1000)
-- ARGV[2]  lease token of the caller ("" = no lease: always promote)
-- ARGV[3]  lease time to live in ms (ignored without a token)
-- ARGV[4]  the envelope header every valid envelope starts with (magic, version)
--
-- Returns {moved, quarantined, next, now_us, lease_ttl_ms}
--          moved        entries appended to the stream
--          quarantined  entries appended to the quarantine (missing or foreign envelope)
--          next         due ms of the earliest remaining message, -1 if none
--          now_us       Redis TIME in microseconds
--          lease_ttl_ms -1 when the caller holds (or needs no) lease; -2 when
--                       nothing was due and nobody holds the lease (it is
--                       taken only for work: an idle lane has no holder);
--                       otherwise the remaining ms of another mover's lease,
--                       and nothing was done
local t = redis.call('TIME')
local nowus = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = math.floor(nowus / 1000)
local lease = -1
local holder = nil
if ARGV[2] ~= '' then
  holder = redis.call('GET', KEYS[5])
  if holder and holder ~= ARGV[2] then
    return {0, 0, -1, nowus, redis.call('PTTL', KEYS[5])}
  end
end
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[1]))
if ARGV[2] ~= '' then
  if #due > 0 then
    redis.call('SET', KEYS[5], ARGV[2], 'PX', ARGV[3])
  elseif not holder then
    lease = -2
  end
end
local moved, bad = 0, 0
local n = #due / 2
if n > 0 then
  local ids = {}
  for k = 1, n do
    ids[k] = due[2 * k - 1]
  end
  -- One HMGET for the batch: the envelopes, false where missing.
  local envs = redis.call('HMGET', KEYS[2], unpack(ids))
  local hdr = ARGV[4]
  for k = 1, n do
    local id, score, env = ids[k], due[2 * k], envs[k]
    if not env then
      redis.call('XADD', KEYS[4], '*', 'i', id, 'd', score, 'r', 'missing envelope')
      bad = bad + 1
    elseif string.sub(env, 1, 2) ~= hdr then
      redis.call('XADD', KEYS[4], '*', 'i', id, 'd', score, 'r', 'unknown envelope format', 'e', env)
      bad = bad + 1
    else
      redis.call('XADD', KEYS[3], '*', 'i', id, 'd', score, 'e', env)
      moved = moved + 1
    end
  end
  -- The batch is the set's first n members by rank (the script is atomic).
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, n - 1)
  redis.call('HDEL', KEYS[2], unpack(ids))
end
local nxt = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local nextDue = -1
if nxt[2] then
  nextDue = tonumber(nxt[2])
end
return {moved, bad, nextDue, nowus, lease}
