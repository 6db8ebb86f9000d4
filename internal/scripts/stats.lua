-- stats.lua: figures about a lane's waiting messages, by the Redis clock.
--
-- KEYS[1]  ZSET  delayed set
--
-- Returns {waiting, overdue, next_due_ms or -1, now_ms}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local nextDue = -1
if head[2] then
  nextDue = tonumber(head[2])
end
return {redis.call('ZCARD', KEYS[1]), redis.call('ZCOUNT', KEYS[1], '-inf', now), nextDue, now}
