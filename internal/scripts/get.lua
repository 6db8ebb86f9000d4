-- get.lua: read a waiting message consistently (due time and envelope together).
--
-- KEYS[1]  ZSET  delayed set
-- KEYS[2]  HASH  envelopes of plain members
-- ARGV[1]  message id
--
-- Returns {due_ms, envelope}, or {} if the message is not waiting. The
-- envelope is false when the hash has none (an orphan the mover will quarantine).
local m, due, packed = locate(KEYS[1], ARGV[1])
if not m then
  return {}
end
if packed then
  return {due, string.sub(m, 18)}
end
return {due, redis.call('HGET', KEYS[2], ARGV[1])}
