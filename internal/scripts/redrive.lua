-- redrive.lua: move dead letters back into the group's retry lane (one
-- transition per entry: dead-lettered -> scheduled in the retry lane). The
-- message reaches only this group again, with attempt reset to 1.
--
-- KEYS[1]  STREAM  the group's dead letters
-- KEYS[2]  ZSET    the group's retry lane delayed set
-- KEYS[3]  HASH    the group's retry lane envelopes
-- ARGV[1]  delay in ms, added to Redis TIME
-- ARGV[2]  the retry lane's wake channel
-- ARGV[3]  the envelope header: the magic byte every valid envelope starts
--          with, then the version bytes accepted after it
-- ARGV[4..] groups of two: dead-letter entry id, envelope for the new attempt ("" = use the stored one)
--
-- Returns one status per entry: 1 redriven, 0 not found, -1 not redrivable
-- (no valid envelope; left in place).
local t = redis.call('TIME') -- now rounded up to the ms: the delay is never cut short
local due = tonumber(t[1]) * 1000 + math.ceil(tonumber(t[2]) / 1000) + tonumber(ARGV[1])
-- An envelope is valid when it starts with the magic byte and an accepted
-- version.
local function valid(env)
  local hdr = ARGV[3]
  if not env or #env < 2 or string.byte(env, 1) ~= string.byte(hdr, 1) then
    return false
  end
  local v = string.byte(env, 2)
  for k = 2, #hdr do
    if string.byte(hdr, k) == v then
      return true
    end
  end
  return false
end
local out = {}
local earliest = false
for i = 4, #ARGV, 2 do
  local id = ARGV[i]
  local r = redis.call('XRANGE', KEYS[1], id, id)
  if #r == 0 then
    out[#out + 1] = 0
  else
    local f = {}
    local kv = r[1][2]
    for j = 1, #kv, 2 do
      f[kv[j]] = kv[j + 1]
    end
    local env = ARGV[i + 1]
    if env == '' then
      env = f['e']
    end
    local mid = f['i']
    -- Anything may have been written into the dead letters: an entry
    -- without a message id, or with one no producer could have given (it
    -- would make a retry-lane member of an unknown kind), or without a
    -- valid envelope stays where it is.
    if not mid or mid == '' or string.byte(mid) < 32 or not valid(env) then
      out[#out + 1] = -1
    else
      local member = mid .. '\031' .. id
      -- Envelope first, dead letter last: a command that fails midway (a
      -- key of the wrong type) stops the script with what it wrote kept,
      -- so it must leave no member without its envelope (which the mover
      -- would quarantine, and whose due time, never announced, would
      -- hide later retries' wake-ups behind it) and the dead letter in
      -- place.
      redis.call('HSET', KEYS[3], member, env)
      redis.call('ZADD', KEYS[2], due, member)
      redis.call('XDEL', KEYS[1], id)
      earliest = true
      out[#out + 1] = 1
    end
  end
end
if earliest then
  publish(ARGV[2], due)
end
return out
