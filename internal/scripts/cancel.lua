-- cancel.lua: remove a waiting message (one transition: scheduled -> gone).
-- A message already promoted is not touched: cancel and promote are atomic,
-- so a message is either cancelled or delivered, never both, never neither.
--
-- KEYS[1]  ZSET  delayed set
-- KEYS[2]  HASH  envelopes
-- ARGV[1]  message id
--
-- Returns 1 if the message was waiting and is now removed, else 0.
local n = redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return n
