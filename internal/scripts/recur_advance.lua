-- recur_advance.lua: record how far a revision of a recurring schedule
-- has been added to the shards, and that its fence is done.
--
-- KEYS[1]  HASH  the schedules' progress (see recur_define.lua)
-- ARGV[1]  schedule id
-- ARGV[2]  revision
-- ARGV[3]  through ms: the latest occurrence added (or skipped) on every shard
-- ARGV[4]  "1" if every shard has been fenced for the revision, else "0"
-- ARGV[5]  ms at which the next top-up is due (0: at once)
--
-- Only the same revision moves forward (a later one is left alone), and
-- neither "through" nor "fenced" goes back. Returns 1 if the record is of the revision, 0
-- otherwise.
local p = redis.call('HGET', KEYS[1], ARGV[1])
if not p then
  return 0
end
local r, th, f, s = string.match(p, '^(%d+)|(%d+)|([01])|([apx])|?%d*$')
if not r or r ~= ARGV[2] then
  return 0
end
th = math.max(tonumber(th), tonumber(ARGV[3]))
if ARGV[4] == '1' then
  f = '1'
end
redis.call('HSET', KEYS[1], ARGV[1], string.format('%s|%d|%s|%s|%d', r, th, f, s, tonumber(ARGV[5])))
return 1
