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
--           Crockford base32) with the due time as its time part: the due
--           ms in 10 base32 characters, then the random part. The score
--           carries the due time and the member the rest, so a packed
--           message needs no hash entry: about 70 bytes less per waiting
--           message.
--
-- Plain ids never start with a control character (delay.ValidateID), so the
-- first byte tells the kinds apart. Anything else found in a delayed set (an
-- empty member, a first byte below 0x20 other than 0x01, a packed member
-- that is too short or not base32) was written by someone else, or by a
-- version that knows more kinds: the promote script quarantines it, and no
-- script lets it misalign a lookup or raise an error. Members of one score
-- are ordered by their bytes: empty, 0x00..., packed, other control kinds,
-- plain ids.

local B32 = '0123456789ABCDEFGHJKMNPQRSTVWXYZ'
local B32V = nil -- byte -> digit value, built on first use

-- RANDOM matches, anchored at string.find's init, the 16 base32 characters
-- of a generated id's random part.
local RANDOM = '^' .. string.rep('[0-9A-HJKMNP-TV-Z]', 16)

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

-- compare17 orders the first 17 bytes of member m against key (17 bytes)
-- the way the server orders members of one score: byte by byte, a shorter
-- prefix first. It returns -1, 0 or 1. (Lua's own string comparison follows
-- the server's collation locale.)
local function compare17(m, key)
  for i = 1, 17 do
    local x, y = string.byte(m, i), string.byte(key, i)
    if x == nil then
      return -1 -- m is a proper prefix of key
    elseif x ~= y then
      return x < y and -1 or 1
    end
  end
  return 0
end

-- findpacked returns the packed member of the generated id (due, rnd) in the
-- delayed set key, or nil: a binary search by rank among the members of
-- score due (O(log n) commands of O(log n) each). Members of one score are
-- ordered by their bytes, so the order of their first 17 bytes is the order
-- of ranks whatever else the set holds (empty members, foreign kinds, plain
-- ids), and the search never leaves the members whose first 17 bytes are
-- "\1" .. rnd.
local function findpacked(key, due, rnd)
  local s = string.format('%d', due)
  local cnt = redis.call('ZCOUNT', key, s, s)
  if cnt == 0 then
    return nil
  end
  local want = '\1' .. rnd
  local lo = redis.call('ZCOUNT', key, '-inf', '(' .. s)
  local hi = lo + cnt - 1
  while lo <= hi do
    local mid = math.floor((lo + hi) / 2)
    local m = redis.call('ZRANGE', key, mid, mid)[1]
    if m == nil then
      return nil
    end
    local c = compare17(m, want)
    if c == 0 then
      return m
    elseif c < 0 then
      lo = mid + 1
    else
      hi = mid - 1
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
