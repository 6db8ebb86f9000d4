-- ids.lua: prepended to every script that reads or writes a delayed set by
-- message id (schedule, promote, get, cancel, reschedule).
--
-- A delayed set (ZSET, score = due ms) holds two kinds of member:
--
--   plain   the message id; its envelope is in the lane's envelopes hash
--           under the same id. Caller-chosen ids, rescheduled messages and
--           retry-lane entries.
--   packed  "\1" .. the 16 random characters of a generated id .. the
--           envelope. A generated id has the ULID layout (26 characters of
--           Crockford base32) with the due time as its time part:
--           id = idtime(due) .. random. The score carries the due time and
--           the member the rest, so a packed message needs no hash entry:
--           about 70 bytes less per waiting message.
--
-- Plain ids never start with a control character (delay.ValidateID), so the
-- first byte tells the kinds apart, and among members of one score every
-- packed member sorts before every plain one, packed members by their
-- random part.

local B32 = '0123456789ABCDEFGHJKMNPQRSTVWXYZ'
local B32V = nil -- byte -> digit value, built on first use

-- idtime returns the 10-character time part of the generated ids due at ms
-- (only for quarantine entries: the promote script appends packed members
-- as they are).
local function idtime(ms)
  local c = {}
  for i = 10, 1, -1 do
    local d = ms % 32
    c[i] = string.sub(B32, d + 1, d + 1)
    ms = (ms - d) / 32
  end
  return table.concat(c)
end

-- genparts splits id into its due ms and random part if it has the layout of
-- a generated id (whether or not it was generated); else it returns nil.
local function genparts(id)
  if #id ~= 26 or string.byte(id) > 55 then -- "7": the time part is 48 bits
    return nil
  end
  if not B32V then
    B32V = {}
    for i = 1, 32 do
      B32V[string.byte(B32, i)] = i - 1
    end
  end
  local ms = 0
  for i = 1, 26 do
    local v = B32V[string.byte(id, i)]
    if v == nil then
      return nil
    end
    if i <= 10 then
      ms = ms * 32 + v
    end
  end
  return ms, string.sub(id, 11)
end

-- before reports whether a sorts before b, byte by byte (Lua's own string
-- comparison follows the server's collation locale). a and b have the same
-- length.
local function before(a, b)
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return false
end

-- findpacked returns the packed member of the generated id (due, rnd) in the
-- delayed set key, or nil: a binary search by rank among the members of
-- score due (O(log n) commands of O(log n) each).
local function findpacked(key, due, rnd)
  local s = string.format('%d', due)
  local cnt = redis.call('ZCOUNT', key, s, s)
  if cnt == 0 then
    return nil
  end
  local lo = redis.call('ZCOUNT', key, '-inf', '(' .. s)
  local hi = lo + cnt - 1
  while lo <= hi do
    local mid = math.floor((lo + hi) / 2)
    local m = redis.call('ZRANGE', key, mid, mid)[1]
    if string.byte(m) ~= 1 then
      hi = mid - 1 -- plain members sort after every packed one
    else
      local r = string.sub(m, 2, 17)
      if r == rnd then
        return m
      elseif before(r, rnd) then
        lo = mid + 1
      else
        hi = mid - 1
      end
    end
  end
  return nil
end

-- locate finds the waiting message id in the delayed set key. It returns its
-- member, its due ms and whether the member is packed; nil if not waiting.
local function locate(key, id)
  local s = redis.call('ZSCORE', key, id)
  if s then
    return id, tonumber(s), false
  end
  local due, rnd = genparts(id)
  if due then
    local m = findpacked(key, due, rnd)
    if m then
      return m, due, true
    end
  end
  return nil
end

-- ============================================================================
