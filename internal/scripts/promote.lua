-- promote.lua: move due messages of one lane into its stream (one transition:
-- scheduled -> in stream, or scheduled -> quarantined). Bounded: at most
-- ARGV[1] messages per call; the caller loops while a batch is full.
--
-- KEYS[1]  ZSET    delayed set (member -> due ms; member kinds: see ids.lua)
-- KEYS[2]  HASH    envelopes of plain members (message id -> encoded envelope)
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
--          quarantined  entries appended to the quarantine (missing or foreign
--                       envelope, unknown member kind)
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
  -- One HMGET for the plain members of the batch: their envelopes, false
  -- where missing. Packed members carry theirs (see ids.lua).
  local plain, np = {}, 0
  for k = 1, n do
    if string.byte(due[2 * k - 1]) ~= 1 then
      np = np + 1
      plain[np] = due[2 * k - 1]
    end
  end
  local envs = {}
  if np > 0 then
    envs = redis.call('HMGET', KEYS[2], unpack(plain))
  end
  local hdr = ARGV[4]
  local h1, h2 = string.byte(hdr, 1, 2)
  local j = 0
  for k = 1, n do
    local m, score = due[2 * k - 1], due[2 * k]
    local kind = string.byte(m)
    if kind == 1 and string.byte(m, 18) == h1 and string.byte(m, 19) == h2 then
      -- A packed member goes into the stream as is (field "p"): the
      -- consumer splits it (stream.Unpack), which costs Lua no strings.
      redis.call('XADD', KEYS[3], '*', 'd', score, 'p', m)
      moved = moved + 1
    else
      local id, env, reason
      if kind == 1 then -- packed, with a foreign envelope: quarantined below
        id, env = idtime(tonumber(score)) .. string.sub(m, 2, 17), string.sub(m, 18)
      elseif kind < 32 then
        id, env, reason = '', m, 'unknown member format'
      else
        j = j + 1
        id, env = m, envs[j]
      end
      if reason then
        redis.call('XADD', KEYS[4], '*', 'i', id, 'd', score, 'r', reason, 'e', env)
        bad = bad + 1
      elseif not env then
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
  end
  -- The batch is the set's first n members by rank (the script is atomic).
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, n - 1)
  if np > 0 then
    redis.call('HDEL', KEYS[2], unpack(plain))
  end
end
local nxt = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local nextDue = -1
if nxt[2] then
  nextDue = tonumber(nxt[2])
end
return {moved, bad, nextDue, nowus, lease}
