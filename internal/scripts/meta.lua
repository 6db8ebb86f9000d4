-- meta.lua: check a queue's shard count against the one recorded in Redis,
-- recording it when the queue is first used, and return the record's
-- epoch: a token written once when the record is created, so that a part
-- that saw one epoch and later finds another (or none) knows that Redis
-- lost the queue's data meanwhile (a restart without persistence,
-- FLUSHALL, a failover to a replica that had none of it).
--
-- KEYS[1]  HASH    the queue's record (fields "shards" and "epoch")
-- KEYS[2]  ZSET    the delayed set of the unsharded layout
-- KEYS[3]  STREAM  the stream of the unsharded layout
-- ARGV[1]  the caller's shard count
-- ARGV[2]  a new random token: the epoch if the record has none
--
-- Returns {count, epoch}: the recorded count (after recording ARGV[1] if
-- none was), or 1 when none was recorded but the unsharded layout's keys
-- exist and the caller has more than one shard (a queue used before counts
-- were recorded; nothing is written), or -1 when the field holds something
-- that is not a count; epoch is the record's epoch ("" when nothing was
-- written).
local rec = redis.call('HMGET', KEYS[1], 'shards', 'epoch')
local n, epoch = rec[1], rec[2]
if n then
  n = tonumber(n)
  if not n or n < 1 or n % 1 ~= 0 then
    return {-1, ''}
  end
  if not epoch then
    -- A record made before epochs existed gets one now.
    epoch = ARGV[2]
    redis.call('HSET', KEYS[1], 'epoch', epoch)
  end
  return {n, epoch}
end
if tonumber(ARGV[1]) > 1 and (redis.call('EXISTS', KEYS[2]) == 1 or redis.call('EXISTS', KEYS[3]) == 1) then
  return {1, ''}
end
redis.call('HSET', KEYS[1], 'shards', ARGV[1], 'epoch', ARGV[2])
return {tonumber(ARGV[1]), ARGV[2]}
