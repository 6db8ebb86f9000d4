-- schedule.lua: add messages to a lane's delayed set (one transition: -> scheduled).
--
-- KEYS[1]  ZSET  delayed set (message id -> due ms)
-- KEYS[2]  HASH  envelopes (message id -> encoded envelope)
-- ARGV[1]  wake channel: PUBLISHed the earliest new due time when it is
--          earlier than the current head ("" = never publish)
-- ARGV[2..] groups of four per message:
--          id, envelope, when, policy
--          when:   "r<ms>" due <ms> after Redis TIME, "a<ms>" due at absolute Unix ms
--          policy: "k" keep existing, "r" replace existing, "e" refuse if existing
--
-- Returns a flat array, two items per message, in order:
--          status (1 created, 2 replaced, 3 kept, 4 refused), due ms (the
--          stored due time: the existing one for kept and refused)
local t = redis.call('TIME')
-- "now" rounded up to the next ms, so "r<ms>" is never due sooner than <ms>
-- after this script ran.
local now = tonumber(t[1]) * 1000 + math.ceil(tonumber(t[2]) / 1000)
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local headDue = head[2] and tonumber(head[2]) or nil
local earliest = nil
local out = {}
-- Writes are collected and sent as multi-member ZADD / HSET calls: two
-- commands per chunk instead of two per message.
local zargs, hargs = {}, {}
local batched = {} -- id -> due of a message written earlier in this call
for i = 2, #ARGV, 4 do
  local id, env, when, policy = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local due = tonumber(string.sub(when, 2))
  if string.sub(when, 1, 1) == 'r' then
    due = now + due
  end
  local status = 1
  local cur = batched[id]
  if cur == nil then
    cur = redis.call('ZSCORE', KEYS[1], id)
    -- An id whose envelope is gone is an orphan: overwrite it rather than
    -- keep nothing (the new message would be lost, the orphan quarantined).
    if cur and redis.call('HEXISTS', KEYS[2], id) == 0 then
      cur = nil
    end
  end
  if cur then
    if policy == 'r' then
      status = 2
    elseif policy == 'k' then
      status = 3
    else
      status = 4
    end
  end
  if status <= 2 then
    zargs[#zargs + 1] = due
    zargs[#zargs + 1] = id
    hargs[#hargs + 1] = id
    hargs[#hargs + 1] = env
    batched[id] = due
    if earliest == nil or due < earliest then
      earliest = due
    end
  else
    due = tonumber(cur)
  end
  out[#out + 1] = status
  out[#out + 1] = due
end
-- unpack is bounded by Lua's C stack (about 8000 values): send in slices.
local function send(cmd, key, args)
  for i = 1, #args, 2000 do
    redis.call(cmd, key, unpack(args, i, math.min(i + 1999, #args)))
  end
end
-- Later duplicates in zargs/hargs overwrite earlier ones, in order, as
-- separate calls would have.
send('ZADD', KEYS[1], zargs)
send('HSET', KEYS[2], hargs)
if ARGV[1] ~= '' and earliest and (headDue == nil or earliest < headDue) then
  redis.call('PUBLISH', ARGV[1], earliest)
end
return out
