-- reschedule.lua: change the due time of a waiting message.
--
-- KEYS[1]  ZSET  delayed set
-- ARGV[1]  message id
-- ARGV[2]  when: "r<ms>" after Redis TIME, "a<ms>" absolute Unix ms
-- ARGV[3]  wake channel, published the new due time when it becomes the head ("" = never)
--
-- Returns the new due ms, or -1 if the message is not waiting.
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return -1
end
local due = tonumber(string.sub(ARGV[2], 2))
if string.sub(ARGV[2], 1, 1) == 'r' then
  local t = redis.call('TIME') -- now rounded up to the ms: the delay is never cut short
  due = tonumber(t[1]) * 1000 + math.ceil(tonumber(t[2]) / 1000) + due
end
redis.call('ZADD', KEYS[1], due, ARGV[1])
if ARGV[3] ~= '' then
  local head = redis.call('ZRANGE', KEYS[1], 0, 0)
  if head[1] == ARGV[1] then
    redis.call('PUBLISH', ARGV[3], due)
  end
end
return due
