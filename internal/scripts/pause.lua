-- pause.lua: pause or resume what one field of a shard's pause record
-- holds (the queue's promotion on this shard, or a group's consumers), and
-- tell the processes concerned.
--
-- KEYS[1]  HASH    the shard's pause record (field -> Unix ms the pause began)
-- ARGV[1]  the field ("queue", or "group:<name>")
-- ARGV[2]  "1" to pause, "0" to resume
-- ARGV[3]  optional: a channel on which ARGV[4] is published when the state
--          changed (a leading space names a shard channel: see publish.lua)
--
-- Returns the Unix ms (Redis clock) the pause began, for a pause (that of
-- the pause already in place, if any: pausing twice keeps the first time),
-- and, for a resume, the ms of the pause it ended or 0 if there was none.
local since = redis.call('HGET', KEYS[1], ARGV[1])
local changed = false
if ARGV[2] == '1' then
  if not since then
    local t = redis.call('TIME')
    since = tostring(tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
    redis.call('HSET', KEYS[1], ARGV[1], since)
    changed = true
  end
elseif since then
  redis.call('HDEL', KEYS[1], ARGV[1])
  changed = true
else
  since = '0'
end
if changed and ARGV[3] and ARGV[3] ~= '' then
  publish(ARGV[3], ARGV[4])
end
return tonumber(since) or 0
