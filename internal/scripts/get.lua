-- get.lua: read a waiting message consistently (due time and envelope together).
--
-- KEYS[1]  ZSET  delayed set
-- KEYS[2]  HASH  envelopes
-- ARGV[1]  message id
--
-- Returns {due_ms, envelope}, or {} if the message is not waiting. The
-- envelope is false when the hash has none (an orphan the mover will quarantine).
local due = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not due then
  return {}
end
return {tonumber(due), redis.call('HGET', KEYS[2], ARGV[1])}
