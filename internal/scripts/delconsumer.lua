-- delconsumer.lua: remove a stale consumer from a group, but only if it has
-- no pending entries (XGROUP DELCONSUMER would drop them).
--
-- KEYS[1]  STREAM  the stream
-- ARGV[1]  group name
-- ARGV[2]  consumer name
--
-- Returns 1 if removed, 0 if it still has pending entries (left alone).
local p = redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1, ARGV[2])
if #p > 0 then
  return 0
end
redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2])
return 1
