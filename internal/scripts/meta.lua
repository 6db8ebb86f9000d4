-- meta.lua: check a queue's shard count against the one recorded in Redis,
-- recording it when the queue is first used.
--
-- KEYS[1]  HASH    the queue's record (field "shards")
-- KEYS[2]  ZSET    the delayed set of the unsharded layout
-- KEYS[3]  STREAM  the stream of the unsharded layout
-- ARGV[1]  the caller's shard count
--
-- Returns the recorded count (after recording ARGV[1] if none was), or
-- 1 when none was recorded but the unsharded layout's keys exist and the
-- caller has more than one shard (a queue used before counts were
-- recorded), or -1 when the field holds something that is not a count.
local n = redis.call('HGET', KEYS[1], 'shards')
if n then
  n = tonumber(n)
  if not n or n < 1 or n % 1 ~= 0 then
    return -1
  end
  return n
end
if tonumber(ARGV[1]) > 1 and (redis.call('EXISTS', KEYS[2]) == 1 or redis.call('EXISTS', KEYS[3]) == 1) then
  return 1
end
redis.call('HSET', KEYS[1], 'shards', ARGV[1])
return tonumber(ARGV[1])
