-- extend.lua: keep a long-running handler's entry from being reclaimed: if
-- the caller still owns the pending entry, reset its idle time.
--
-- KEYS[1]  STREAM  the stream the entry was read from
-- ARGV[1]  group name
-- ARGV[2]  consumer name (the caller)
-- ARGV[3]  stream entry id
--
-- Returns 1 if the caller still owns the entry (idle time reset), 0 if not:
-- it was acknowledged or claimed by another consumer.
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
if #p == 0 or p[1][2] ~= ARGV[2] then
  return 0
end
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[3], 'JUSTID')
return 1
