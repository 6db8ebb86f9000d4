-- reschedule.lua: change the due time of a waiting message. A packed member
-- (generated id, see ids.lua) becomes a plain one, since its id no longer
-- tells its due time.
--
-- KEYS[1]  ZSET  delayed set
-- KEYS[2]  HASH  envelopes of plain members
-- ARGV[1]  message id
-- ARGV[2]  when: "r<ms>" after Redis TIME, "a<ms>" absolute Unix ms
-- ARGV[3]  wake channel, published the new due time when it becomes the head ("" = never)
--
-- Returns the new due ms, or -1 if the message is not waiting. With a call
-- token: see once.lua.
once_args(2)
local seen = once_seen('^%-?%d+$') -- the first run's reply
if seen then
  return tonumber(seen)
end
local id = ARGV[1]
local m, _, packed = locate(KEYS[1], id)
if not m then
  once_store(-1)
  return -1
end
local due = tonumber(string.sub(ARGV[2], 2))
if string.sub(ARGV[2], 1, 1) == 'r' then
  local t = redis.call('TIME') -- now rounded up to the ms: the delay is never cut short
  due = tonumber(t[1]) * 1000 + math.ceil(tonumber(t[2]) / 1000) + due
end
local score = string.format('%d', due)
-- The packed member is removed last: a command that fails midway (refused
-- by the caller's ACL) leaves the message waiting as it was, never gone.
if packed then
  redis.call('HSET', KEYS[2], id, string.sub(m, 18))
end
redis.call('ZADD', KEYS[1], score, id)
if packed then
  redis.call('ZREM', KEYS[1], m)
end
if ARGV[3] ~= '' then
  local head = redis.call('ZRANGE', KEYS[1], 0, 0)
  if head[1] == id then
    publish(ARGV[3], score)
  end
end
once_store(score)
return due
