-- recur_read.lua: read a recurring schedule's definition and progress
-- with the Redis clock, for a top-up or a report.
--
-- KEYS[1]  HASH  the queue's schedules (see recur_define.lua)
-- KEYS[2]  HASH  their progress
-- ARGV[1]  schedule id
--
-- Returns {definition or false, progress or false, now ms}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return {redis.call('HGET', KEYS[1], ARGV[1]), redis.call('HGET', KEYS[2], ARGV[1]), now}
