-- movers.lua: keep the registry of the live movers of a sharded queue (one
-- transition: a mover joins or renews its registration, or leaves), so that
-- the movers divide the queue's shards between them.
--
-- KEYS[1]  ZSET    the registry: mover token -> Unix ms (Redis clock) at
--                  which its registration lapses unless renewed
-- ARGV[1]  the caller's token
-- ARGV[2]  registration time to live in ms (1..600000); used by "beat"
-- ARGV[3]  "beat": register the caller, or renew its registration, until
--          now + ARGV[2]; "leave": remove its registration
-- ARGV[4]  the movers channel: the caller's token is published there when
--          the membership changed (the caller is new, or its registration
--          had lapsed; it left; lapsed registrations were removed)
--
-- Returns the tokens of the live movers, unordered: the caller included
-- after "beat", excluded after "leave".
--
-- Registrations scored at or before now have lapsed and are removed. Anything
-- may have been written into the registry, so a member whose score is not a
-- registration (more than 11 minutes ahead: no mover's time to live exceeds
-- 10) is removed too: it would otherwise take a share of the shards that no
-- mover promotes. A steady beat costs TIME, ZRANGE and ZADD; the registry
-- holds one member per live mover.
local op = ARGV[3]
if op ~= 'beat' and op ~= 'leave' then
  return redis.error_reply('ERR movers.lua: unknown op ' .. tostring(op))
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local horizon = now + 660000
local me = ARGV[1]
local all = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
local live, stale = {}, {}
local present = false
for k = 1, #all, 2 do
  local m, s = all[k], tonumber(all[k + 1])
  if not s or s <= now or s > horizon then
    stale[#stale + 1] = m
  elseif m == me then
    present = true
  else
    live[#live + 1] = m
  end
end
local changed = #stale > 0
for k = 1, #stale, 1000 do
  redis.call('ZREM', KEYS[1], unpack(stale, k, math.min(k + 999, #stale)))
end
if op == 'beat' then
  -- A full server (maxmemory with noeviction) refuses a script's write
  -- that may add memory while the script has written nothing yet. A beat
  -- replaces the mover's entry, so when its ZADD is refused the entry is
  -- removed first and written again: the registry is kept at the limit.
  -- (Any other error is raised by the ZREM or the second ZADD.)
  local score = now + tonumber(ARGV[2])
  local r = redis.pcall('ZADD', KEYS[1], score, me)
  if type(r) == 'table' and r.err then
    redis.call('ZREM', KEYS[1], me)
    redis.call('ZADD', KEYS[1], score, me)
  end
  if not present then
    changed = true
  end
  live[#live + 1] = me
elseif present then
  redis.call('ZREM', KEYS[1], me)
  changed = true
end
if changed then
  redis.call('PUBLISH', ARGV[4], me)
end
return live
