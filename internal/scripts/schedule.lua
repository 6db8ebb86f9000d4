-- schedule.lua: add messages to a lane's delayed set (one transition: -> scheduled).
--
-- KEYS[1]  ZSET  delayed set (member -> due ms; member kinds: see ids.lua)
-- KEYS[2]  HASH  envelopes of plain members (message id -> encoded envelope)
-- ARGV[1]  wake channel: PUBLISHed the earliest new due time when it is
--          earlier than the current head and within the wake horizon
--          (wake.lua; "" = never publish)
-- ARGV[2..] groups of four per message:
--          id, envelope, when, policy
--          id:     the caller's id; "" for a generated id, whose packed member
--                  ("\1" .. random part .. envelope) is then the envelope
--                  argument and whose id is idtime(due) .. random part
--          when:   "r<ms>" due <ms> after Redis TIME, "a<ms>" due at absolute Unix ms
--          policy: "k" keep existing, "r" replace existing, "e" refuse if existing
--                  (ignored for generated ids: they are new)
--
-- With a call token (one more key and ARGV, last): see once.lua.
--
-- Returns a flat array, two items per message, in order:
--          status (1 created, 2 replaced, 3 kept, 4 refused), due ms (the
--          stored due time: the existing one for kept and refused)
--
-- Commands, for any number of messages: TIME, ZMSCORE (ZSCORE for a
-- single caller-chosen id, none for generated ids), one HEXISTS per id
-- already waiting, a lookup per caller-chosen id that has the layout of a
-- generated one and is not waiting as a plain member, ZADD, HSET (only for
-- caller-chosen ids), ZCOUNT (when something is written due within the
-- wake horizon, see wake.lua), maybe PUBLISH
-- (ZMSCORE, ZADD and HSET once per slice of 2000 values).
local nargv = once_args(2)
-- With a call token, the first run stores "<now>|<statuses>|<dues>": its
-- "now", one status digit per message, and the stored due times of the
-- kept and refused ones (the others' follow from now and their when). A
-- later run rebuilds the reply from it and writes nothing.
local seen = once_seen('^%d+|[1-4]*|[%d,]*$')
if seen then
  local nowS, st, rest = string.match(seen, '^(%d+)|(%d*)|(.*)$')
  local now, kept, nkept = tonumber(nowS), {}, 0
  for v in string.gmatch(rest, '%d+') do
    kept[#kept + 1] = tonumber(v)
  end
  for c in string.gmatch(st, '[34]') do
    nkept = nkept + 1
  end
  -- Only a record of this call (one status per message, one due time per
  -- kept or refused one) is replayed; anything else counts as none.
  if #st == (nargv - 1) / 4 and nkept == #kept then
    local out, j = {}, 0
    for k = 1, #st do
      local status, due = tonumber(string.sub(st, k, k)), nil
      if status <= 2 then
        local when = ARGV[4 * k]
        due = tonumber(string.sub(when, 2))
        if string.byte(when) == 114 then -- "r"
          due = now + due
        end
      else
        j = j + 1
        due = kept[j]
      end
      out[2 * k - 1] = status
      out[2 * k] = due
    end
    return out
  end
end
local t = redis.call('TIME')
-- "now" rounded up to the next ms, so "r<ms>" is never due sooner than <ms>
-- after this script ran.
local now = tonumber(t[1]) * 1000 + math.ceil(tonumber(t[2]) / 1000)

-- unpack is bounded by Lua's C stack (about 8000 values): multi-value
-- commands are sent in slices.
local SLICE = 2000

local n = (nargv - 1) / 4
-- The caller-chosen ids (generated ones are new: nothing to look up).
local ids, at, np = {}, {}, 0
for k = 1, n do
  local id = ARGV[4 * k - 2]
  if id ~= '' then
    np = np + 1
    ids[np] = id
    at[np] = k
  end
end

-- The stored due time of every caller-chosen id as a plain member (false:
-- not waiting as one), with one ZMSCORE per slice. ZMSCORE needs Redis 6.2:
-- on a server without it, one ZSCORE per id. A single id takes ZSCORE
-- directly, which saves the protected call (redis-benchmark: about 1.3 of
-- 15-17 µs).
local stored = {}
for i = 1, np, SLICE do
  local j = math.min(i + SLICE - 1, np)
  local r
  if j == i then
    r = {redis.call('ZSCORE', KEYS[1], ids[i])}
  else
    r = redis.pcall('ZMSCORE', KEYS[1], unpack(ids, i, j))
  end
  if r.err then
    for k = i, j do
      stored[at[k]] = redis.call('ZSCORE', KEYS[1], ids[k])
    end
  else
    for k = i, j do
      stored[at[k]] = r[k - i + 1]
    end
  end
end

-- A when's due time, worked out once per distinct when (a batch usually
-- shares a few): as a number and as the ZADD score string, so that the
-- number is not formatted again for every member.
local dues, scores = {}, {}
local written = {} -- id -> due of a message written earlier in this call
local out, zargs, hargs, nz, nh = {}, {}, {}, 0, 0
local zrem, nr = {}, 0 -- packed members replaced by a caller-chosen id
local earliest, first = nil, nil -- the earliest due written, and its score
for k = 1, n do
  local id, when = ARGV[4 * k - 2], ARGV[4 * k]
  local due = dues[when]
  if due == nil then
    due = tonumber(string.sub(when, 2))
    if string.byte(when) == 114 then -- "r": relative to now
      due = now + due
    end
    dues[when] = due
    scores[when] = string.format('%d', due)
  end
  local status = 1
  if id == '' then
    zargs[nz + 1] = scores[when]
    zargs[nz + 2] = ARGV[4 * k - 1]
    nz = nz + 2
  else
    local cur, packed = written[id], nil
    if cur == nil then
      cur = stored[k]
      -- An id whose envelope is gone is an orphan: overwrite it rather than
      -- keep nothing (the new message would be lost, the orphan quarantined).
      if cur and redis.call('HEXISTS', KEYS[2], id) == 0 then
        cur = false
      end
      if not cur then
        local gdue, rnd = genparts(id)
        if gdue then
          packed = findpacked(KEYS[1], gdue, rnd)
          if packed then
            cur = gdue
          end
        end
      end
    end
    if cur then
      local policy = string.byte(ARGV[4 * k + 1])
      if policy == 114 then -- "r"
        status = 2
      elseif policy == 107 then -- "k"
        status = 3
      else
        status = 4
      end
    end
    if status <= 2 then
      if packed then
        nr = nr + 1
        zrem[nr] = packed
      end
      zargs[nz + 1] = scores[when]
      zargs[nz + 2] = id
      nz = nz + 2
      hargs[nh + 1] = id
      hargs[nh + 2] = ARGV[4 * k - 1]
      nh = nh + 2
      written[id] = due
    else
      due = tonumber(cur)
    end
  end
  if status <= 2 and (earliest == nil or due < earliest) then
    earliest, first = due, scores[when]
  end
  out[2 * k - 1] = status
  out[2 * k] = due
end
-- Whether a member is due no later than the earliest message written,
-- before anything is written (the mover is woken when none is; see
-- wake.lua).
local sooner = first and ARGV[1] ~= '' and wake_sooner(KEYS[1], earliest, first, now)
local function send(cmd, key, args, count)
  for i = 1, count, SLICE do
    redis.call(cmd, key, unpack(args, i, math.min(i + SLICE - 1, count)))
  end
end
-- Later duplicates in zargs/hargs overwrite earlier ones, in order, as
-- separate calls would have.
send('ZREM', KEYS[1], zrem, nr)
send('ZADD', KEYS[1], zargs, nz)
send('HSET', KEYS[2], hargs, nh)
if ARGV[1] ~= '' and sooner == 0 then
  publish(ARGV[1], first)
end
if ONCE_KEY then
  local st, kept = {}, {}
  for k = 1, n do
    st[k] = out[2 * k - 1]
    if st[k] > 2 then
      kept[#kept + 1] = string.format('%d', out[2 * k])
    end
  end
  once_store(string.format('%d', now) .. '|' .. once_join(st, '') .. '|' .. once_join(kept, ','))
end
return out
