-- peek_cut.lua: the earliest members of a lane's delayed set, each with
-- its envelope cut to a bounded prefix, for listings (read only).
-- Preceded by envcut.lua (envcut).
--
-- The members are read 16 at a time, so the script never holds more than
-- 16 whole members (and one envelope) at once, and returns at most
-- ARGV[1] cut ones: a listing of large messages costs neither the network
-- nor the caller their whole size.
--
-- KEYS[1]  ZSET  delayed set
-- KEYS[2]  HASH  envelopes of plain members
-- ARGV[1]  count: how many members, from the earliest (>= 1)
-- ARGV[2]  max payload bytes (>= 1)
-- ARGV[3]  max bytes of a member that is not a packed one (a plain id, or
--          a member of no kind this version knows): longer ones are cut
--          to it (their envelope is still looked up under the whole member)
--
-- Returns a flat list, five items per member, in score order: the member
-- (a packed one cut as its envelope, which starts at its 18th byte;
-- another one cut to ARGV[3] bytes), its score, its length before the
-- cut, the envelope of a plain member cut by envcut (false when the hash
-- has none, or for any other member) and that envelope's length before
-- the cut (0 when none).
local count = tonumber(ARGV[1])
local max = tonumber(ARGV[2])
local maxMember = tonumber(ARGV[3])
local CHUNK = 16
local out = {}
local start = 0
while start < count do
  local stop = math.min(start + CHUNK, count) - 1
  local page = redis.call('ZRANGE', KEYS[1], start, stop, 'WITHSCORES')
  for k = 1, #page, 2 do
    local m = page[k]
    local kind = string.byte(m, 1)
    local shown, env, envLen = m, false, 0
    if kind == 1 then
      shown = envcut(m, 18, max)
    else
      if kind ~= nil and kind >= 32 then
        local e = redis.call('HGET', KEYS[2], m)
        if e then
          env, envLen = envcut(e, 1, max), #e
        end
      end
      if #m > maxMember then
        shown = string.sub(m, 1, maxMember)
      end
    end
    out[#out + 1] = shown
    out[#out + 1] = page[k + 1]
    out[#out + 1] = #m
    out[#out + 1] = env
    out[#out + 1] = envLen
  end
  if #page < 2 * (stop - start + 1) then
    break
  end
  start = stop + 1
end
return out
