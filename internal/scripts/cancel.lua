-- cancel.lua: remove a waiting message (one transition: scheduled -> gone).
-- A message already promoted is not touched: cancel and promote are atomic,
-- so a message is either cancelled or delivered, never both, never neither.
--
-- KEYS[1]  ZSET  delayed set
-- KEYS[2]  HASH  envelopes of plain members
-- ARGV[1]  message id
--
-- Returns 1 if the message was waiting and is now removed, else 0. With a
-- call token: see once.lua.
once_args(2)
local seen = once_seen('^%d+$') -- the first run's reply
if seen then
  return tonumber(seen)
end
local m, _, packed = locate(KEYS[1], ARGV[1])
if not packed then
  -- A plain member, or an orphaned envelope without one: remove both.
  redis.call('HDEL', KEYS[2], ARGV[1])
end
local n = 0
if m then
  n = redis.call('ZREM', KEYS[1], m)
end
once_store(n)
return n
