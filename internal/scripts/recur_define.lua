-- recur_define.lua: define, pause, resume or delete a recurring schedule
-- (one transition of its definition; every change starts a new revision).
--
-- KEYS[1]  HASH  the queue's schedules (schedule id -> definition body)
-- KEYS[2]  HASH  their progress (schedule id ->
--                "<revision>|<through ms>|<fenced 0/1>|<state>|<next ms>",
--                state "a" active, "p" paused, "x" deleted; next: when the
--                next top-up is due, 0 for at once)
-- ARGV[1]  schedule id
-- ARGV[2]  operation: "d" define, "p" pause, "r" resume, "x" delete
-- ARGV[3]  the definition body (define only): JSON, starting with
--          '{"v":<version>,' when its version is not 0
-- ARGV[4]  the definition's version, in decimal (define only; "" = 0)
--
-- A definition whose version is lower than the stored definition's
-- changes nothing, so that versions never go back (a stored body without
-- a version has version 0). A definition equal to the stored one, a
-- pause of a paused schedule and a resume of an active one change nothing. Any other change writes the
-- next revision, "through" = now (the new revision's occurrences come
-- after it), "next" = 0 (top it up at once) and "fenced" = 0 (the shards still hold the old revision's
-- occurrences; the caller, or any process after it, fences them). A
-- progress record of another form counts as none.
--
-- Returns {code, revision, now ms}: code 0 not found (nothing written),
-- 1 created, 2 changed, 3 unchanged, 4 older than the stored version
-- (nothing written).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local sid, op = ARGV[1], ARGV[2]
local rev, state = 0, 'x'
local p = redis.call('HGET', KEYS[2], sid)
if p then
  local r, s = string.match(p, '^(%d+)|%d+|[01]|([apx])|?%d*$')
  if r then
    rev, state = tonumber(r), s
  end
end
local body = redis.call('HGET', KEYS[1], sid)
if not body then
  state = 'x'
end
-- older reports whether version a (decimal digits) is lower than b.
local function older(a, b)
  a, b = string.match(a, '^0*(%d*)$') or '', string.match(b, '^0*(%d*)$') or ''
  return #a < #b or (#a == #b and a < b)
end

local code = 2
if op == 'd' then
  if state ~= 'x' then
    if older(ARGV[4] or '', string.match(body, '^{"v":(%d+),') or '') then
      return {4, rev, now}
    end
    if body == ARGV[3] then
      return {3, rev, now}
    end
  end
  if state == 'x' then
    code, state = 1, 'a'
  end
  redis.call('HSET', KEYS[1], sid, ARGV[3])
elseif state == 'x' then
  return {0, rev, now}
elseif op == 'p' then
  if state == 'p' then
    return {3, rev, now}
  end
  state = 'p'
elseif op == 'r' then
  if state == 'a' then
    return {3, rev, now}
  end
  state = 'a'
else
  state = 'x'
  redis.call('HDEL', KEYS[1], sid)
end
rev = rev + 1
local fenced = '0'
if rev == 1 then
  fenced = '1' -- no earlier revision: nothing to fence
end
redis.call('HSET', KEYS[2], sid, string.format('%d|%d|%s|%s|0', rev, now, fenced, state))
return {code, rev, now}
