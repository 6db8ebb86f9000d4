-- keyrate.lua: take a permit of one key's rate limit for one message (a
-- group's per-key limit: GCRA on the key's state). Called once per
-- delivery, only by groups with a per-key limit.
--
-- KEYS[1]  STRING  the key's state: the GCRA theoretical arrival time, µs
--                  (Redis clock); it expires once the key is idle
-- KEYS[2]  STRING  the message's reservation: the µs its permit is due,
--                  made when the message had to wait for it
-- ARGV[1]  µs between permits of one key
-- ARGV[2]  burst: permits of one key that may be taken at once (>= 1)
-- ARGV[3]  ms a reservation is kept (longer than the wait it stands for)
--
-- Returns 0 when the message may start now (a permit was taken, or its
-- reservation is due), or the µs until its permit is due: the permit is
-- reserved for the message, which comes back then (a snooze) and finds it.
-- So each message takes one permit however often it is snoozed.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local r = tonumber(redis.call('GET', KEYS[2]))
if r then
  if r <= now then
    redis.call('DEL', KEYS[2])
    return 0
  end
  return math.ceil(r - now)
end
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1])) or 0
local base = math.max(tat, now)
local at = math.max(now, base - (burst - 1) * interval)
local nxt = base + interval
-- A full server (maxmemory with noeviction) refuses a script's write that
-- may add memory while the script has written nothing yet. The key's state
-- replaces itself and expires once the key is idle, so when its SET is
-- refused the state is deleted first and set again: a group with a
-- per-key limit keeps delivering at the limit. (Any other error is raised
-- by the second SET.)
local state, ttl = string.format('%.0f', nxt), math.ceil((nxt - now) / 1000) + 1000
local ok = redis.pcall('SET', KEYS[1], state, 'PX', ttl)
if type(ok) == 'table' and ok.err then
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[1], state, 'PX', ttl)
end
if at <= now then
  return 0
end
redis.call('SET', KEYS[2], string.format('%.0f', at), 'PX', math.ceil((at - now) / 1000) + tonumber(ARGV[3]))
return math.ceil(at - now)
