-- ack.lua: acknowledge entries of one stream for a group, count them in
-- the queue's history and, when the group keeps records of what it
-- handled, record each message (one transition per entry: pending ->
-- done).
--
-- KEYS[1]     STREAM  the stream the entries were read from
-- then, optionally, the shard's history keys (totals, minute, hour; see
-- history.lua), and, optionally, the group's handled records:
--             HASH    message id -> "<ms>|<attempt>|<outcome>|<consumer>"
--                     (ms by the Redis clock; outcome "handled" or
--                     "dropped")
--             ZSET    the same records' message ids -> ms
-- so 1, 3 (records), 4 (history) or 6 (both) keys in all.
-- ARGV[1]  group name
-- ARGV[2]  h: how many of the entries are of handlers that succeeded
--          (counted "handled:<group>"); the rest were dropped by their
--          handlers (counted "dropped:<group>")
-- ARGV[3]  n: how many entry ids follow
-- ARGV[4..3+n] entry ids, those of handlers that succeeded first
-- ARGV[4+n]    with the records' keys: how long records are kept, in ms; records
--              older than that are removed, at most 2n + 16 per call
-- ARGV[5+n]    the consumer's name
-- ARGV[6+n..]  for each entry, in order: its message id and attempt
--
-- Returns the number of entries acknowledged (those still pending with the
-- group; an entry another consumer reclaimed and acknowledged is not
-- counted twice).
--
-- The records are written first: a full server (maxmemory with noeviction)
-- refuses them then, since the script has written nothing yet, and the
-- entries are acknowledged without records, which would grow memory on
-- balance. A refusal or a key of another type leaves the records out; the
-- acknowledgements always go on.
local h, n = tonumber(ARGV[2]), tonumber(ARGV[3])
-- Where the history keys and the records' keys start (nil: not given).
local hist, rec = nil, nil
if #KEYS == 4 or #KEYS == 6 then
  hist = 2
end
if #KEYS == 3 then
  rec = 2
elseif #KEYS == 6 then
  rec = 5
end
local function slices(from, to, step, fn)
  for i = from, to, step do
    fn(i, math.min(i + step - 1, to))
  end
end
local function record()
  local retention, consumer = tonumber(ARGV[4 + n]), ARGV[5 + n]
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local fields, scores = {}, {}
  for i = 1, n do
    local outcome = 'handled'
    if i > h then
      outcome = 'dropped'
    end
    local mid = ARGV[4 + n + 2 * i]
    fields[#fields + 1] = mid
    fields[#fields + 1] = now .. '|' .. ARGV[5 + n + 2 * i] .. '|' .. outcome .. '|' .. consumer
    scores[#scores + 1] = now
    scores[#scores + 1] = mid
  end
  -- In slices: unpack puts its values on Lua's stack, which is bounded.
  local failed = false
  slices(1, #fields, 1000, function(a, b)
    if not failed then
      local r = redis.pcall('HSET', KEYS[rec], unpack(fields, a, b))
      failed = type(r) == 'table' and r.err ~= nil
    end
  end)
  if failed then
    return
  end
  slices(1, #scores, 1000, function(a, b)
    redis.pcall('ZADD', KEYS[rec + 1], unpack(scores, a, b))
  end)
  local old = redis.pcall('ZRANGEBYSCORE', KEYS[rec + 1], '-inf', now - retention, 'LIMIT', 0, 2 * n + 16)
  if type(old) == 'table' and not old.err and #old > 0 then
    redis.pcall('HDEL', KEYS[rec], unpack(old))
    redis.pcall('ZREM', KEYS[rec + 1], unpack(old))
  end
end
if rec and ARGV[5 + n] then
  record()
end
local function xack(from, to)
  local acked = 0
  slices(from, to, 1000, function(a, b)
    acked = acked + redis.call('XACK', KEYS[1], ARGV[1], unpack(ARGV, a, b))
  end)
  return acked
end
local handled = xack(4, 3 + h)
local dropped = xack(4 + h, 3 + n)
if hist then
  tally(hist, 'handled:' .. ARGV[1], handled)
  tally(hist, 'dropped:' .. ARGV[1], dropped)
end
return handled + dropped
