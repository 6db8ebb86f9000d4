-- history.lua: the prelude of every script that counts what it does in the
-- queue's history (see internal/history). tally(first, field, n) adds n to
-- field in KEYS[first] (the shard's totals, kept as long as the queue),
-- KEYS[first + 1] (the bucket of the minute) and KEYS[first + 2] (the
-- bucket of the hour), when the caller passed those keys and n > 0. A
-- bucket gets its time to live when a field is first counted in it, so it
-- lives at most that long after the last field it gained. Counting never
-- stops the transition it counts: its refusals (a full server before the
-- script wrote anything, a key of another type, the caller's ACL) are
-- ignored, and the count is lost.
local HISTORY_MINUTE_TTL = 7200 -- history.MinuteLife, in seconds
local HISTORY_HOUR_TTL = 691200 -- history.HourLife, in seconds
local function tally(first, field, n)
  if n <= 0 or not KEYS[first + 2] then
    return
  end
  redis.pcall('HINCRBY', KEYS[first], field, n)
  if redis.pcall('HINCRBY', KEYS[first + 1], field, n) == n then
    redis.pcall('EXPIRE', KEYS[first + 1], HISTORY_MINUTE_TTL)
  end
  if redis.pcall('HINCRBY', KEYS[first + 2], field, n) == n then
    redis.pcall('EXPIRE', KEYS[first + 2], HISTORY_HOUR_TTL)
  end
end
