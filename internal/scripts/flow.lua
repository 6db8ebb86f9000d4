-- flow.lua: grant a consumer of a limited group concurrency slots and rate
-- permits (one transition of the group's flow state). Only consumers of a
-- group with a limit call it; one call per read, and one per release of
-- slots when the consumer has nothing to read.
--
-- KEYS[1]  HASH  the group's flow state:
--                "c:<consumer>" -> "<held> <deadline µs>": slots the consumer
--                                   holds, until the deadline (Redis clock)
--                                   unless it calls again; lapsed ones are
--                                   removed and count for nothing
--                "tat"          -> the rate limiter's theoretical arrival
--                                   time, µs (GCRA: the one number of state)
--                "waiting"      -> set when a consumer was refused a slot
--                "r:<consumer>" -> "<count> <deadline µs>": entries the
--                                   consumer took over from dead consumers and
--                                   waits for slots and permits for, until the
--                                   deadline unless it calls again (lapsed
--                                   ones are removed, as slots are)
--                "rq"           -> the latest deadline of an "r:" field
--                                   written: a group without a cap reads
--                                   its whole state only before it
--                "waited"       -> µs the group's consumers waited for permits, in all
--                "limits"       -> written by consumers at start, not here
-- ARGV[1]  the consumer's name
-- ARGV[2]  held: slots the consumer holds now (entries queued or handled)
-- ARGV[3]  want: permits and slots wanted now (0: report held, renew)
-- ARGV[4]  need: the least grant worth taking (1..want): while fewer rate
--          permits are free, none is granted and the wait until need are
--          is returned, so waiting consumers wake once per need permits
-- ARGV[5]  concurrency cap (0: none)
-- ARGV[6]  rate: µs between permits (0: none)
-- ARGV[7]  rate burst: permits that may be taken at once (>= 1)
-- ARGV[8]  slot lease, ms: the consumer's slots lapse this long after its
--          last call (it calls at least every third of it while it holds any)
-- ARGV[9]  permits granted before and not used (read found fewer entries):
--          given back to the limiter
-- ARGV[10] a channel ("": none) on which ARGV[11] is published when this
--          call freed slots (net of those it granted), or lowered its
--          reclaimed count so that a fresh read may be granted, and a
--          consumer was refused
-- ARGV[12] reservation horizon, µs: when fewer than need rate permits are
--          free but need will be within it, they are granted now for then
--          (the caller waits until then before it reads), so that waiting
--          consumers take turns instead of racing for each permit
-- ARGV[13] µs the caller waited for permits since its last call, added to
--          "waited"
-- ARGV[14] reclaimed: entries the consumer took over from dead consumers
--          and waits for slots and permits for (recorded as "r:<consumer>"
--          with the slots' deadline; 0 removes it)
-- ARGV[15] "1": want is for those reclaimed entries. Crashed work goes
--          first: such a call is granted slots and permits as if no
--          entry were reclaimed, and what it is granted leaves the
--          record; any other call (a fresh read) is granted no slot that
--          the recorded entries of every consumer, this one's included,
--          still wait for, and no rate permit while any is recorded
--
-- Returns {granted, wait_us, blocker}
--          granted  permits and slots granted (0..want)
--          wait_us  with a grant: µs until the permits are due (0: now);
--                   refused by the rate: µs until need permits could be
--                   reserved; else -1
--          blocker  0 none, 1 the concurrency cap, 2 the rate, 3 reclaimed
--                   entries go first (a fresh read waits for a notice, as
--                   for a slot)
--
-- GCRA: a permit is free while tat - now <= (burst - 1) * interval, and
-- taking k moves tat to max(tat, now) + k * interval. So in any window of
-- length w at most burst + w / interval permits are due, and the time to
-- the next free permit is exact, so nothing polls.
-- Numbers are written with string.format: Lua turns a number into a
-- string with 14 significant digits, fewer than a time in µs has.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local key = KEYS[1]
local me = 'c:' .. ARGV[1]
local held = tonumber(ARGV[2]) or 0
local want = tonumber(ARGV[3]) or 0
local need = math.max(1, math.min(tonumber(ARGV[4]) or 1, want))
local cap = tonumber(ARGV[5]) or 0
local interval = tonumber(ARGV[6]) or 0
local burst = tonumber(ARGV[7]) or 1
local lease = (tonumber(ARGV[8]) or 1000) * 1000
local back = tonumber(ARGV[9]) or 0
local reserve = tonumber(ARGV[12]) or 0
local waited = tonumber(ARGV[13]) or 0
local reclaimed = tonumber(ARGV[14]) or 0
local first = ARGV[15] == '1'
local mine_r = 'r:' .. ARGV[1]

local granted, wait, blocker = want, -1, 0
local mine = 0 -- slots Redis counted for this consumer before this call
local others = 0 -- slots other live consumers hold
local had = -1 -- this consumer's reclaimed count before this call (-1: none recorded)
local queued = 0 -- entries other live consumers reclaimed and wait for
local tat, rq = false, false -- the fields "tat" and "rq" (false: none)

-- Without a cap and reclaimed entries of its own, a consumer reads the
-- whole state only while an "r:" field may be live; else one pass over
-- it: slots and reclaimed counts, lapsed ones removed.
local scan = cap > 0 or reclaimed > 0
if not scan then
  local v = redis.call('HMGET', key, 'tat', 'rq')
  tat, rq = v[1], v[2]
  scan = (tonumber(rq) or 0) > now
end
if scan then
  local all = redis.call('HGETALL', key)
  for i = 1, #all, 2 do
    local f = all[i]
    local kind = string.sub(f, 1, 2)
    if f == 'tat' then
      tat = all[i + 1]
    elseif f == 'rq' then
      rq = all[i + 1]
    elseif kind == 'c:' or kind == 'r:' then
      local h, d = string.match(all[i + 1], '^(%d+) (%d+)$')
      h, d = tonumber(h), tonumber(d)
      if f == me then
        mine = h or 0
      elseif f == mine_r then
        had = h or 0
      elseif not h or not d or d <= now then
        redis.call('HDEL', key, f) -- lapsed (its consumer died) or not ours
      elseif kind == 'c:' then
        others = others + h
      else
        queued = queued + h
      end
    end
  end
end

-- write makes one of this call's writes. A full server (maxmemory with
-- noeviction) refuses a script's write that may add memory while the
-- script has written nothing yet; slots and permits add none on balance.
-- So when the first write is refused, the field this call writes again in
-- any case (the consumer's slots under a cap, else the rate's "tat", both
-- read above) is removed first and the write made again: a limited group
-- keeps delivering, and draining, at the limit. (Any other error is raised
-- by the second call.)
local wrote = false
local function write(...)
  if not wrote then
    wrote = true
    local r = redis.pcall(...)
    if type(r) ~= 'table' or not r.err then
      return r
    end
    if cap > 0 then
      redis.call('HDEL', key, me)
    elseif interval > 0 then
      redis.call('HDEL', key, 'tat')
    end
  end
  return redis.call(...)
end

if waited > 0 then
  write('HINCRBY', key, 'waited', math.floor(waited))
end

-- What a fresh read leaves to reclaimed entries: those of every consumer.
local ahead = queued + reclaimed
if first then
  ahead = 0
end

local refused = false -- set "waiting" (after the notice this call may send)
local function refuse(b)
  granted, blocker, refused = 0, b, true
end

if cap > 0 then
  local room = cap - others - held
  granted = math.max(0, math.min(granted, room - ahead))
  if want > 0 and granted == 0 then
    refuse((room > 0) and 3 or 1)
  end
end
if interval > 0 and ahead > 0 and granted > 0 then
  refuse(3) -- the next permits are the reclaimed entries'
end

if interval > 0 then
  tat = tonumber(tat) or 0
  tat = tat - back * interval
  if granted > 0 then
    local base = math.max(tat, now)
    local free = math.floor((now + burst * interval - base) / interval)
    local least = math.min(need, granted)
    if free < least then
      wait = math.ceil(base + least * interval - burst * interval - now)
      if wait <= reserve then
        granted = least
        tat = base + least * interval
      else
        wait = wait - reserve
        granted, blocker = 0, 2
      end
    else
      granted = math.min(granted, free)
      tat = base + granted * interval
      wait = 0
    end
  end
  write('HSET', key, 'tat', string.format('%.0f', tat))
end

local left = reclaimed
if first then
  left = math.max(0, reclaimed - granted)
end
if left > 0 then
  local deadline = now + lease
  write('HSET', key, mine_r, string.format('%d %.0f', left, deadline),
    'rq', string.format('%.0f', math.max(deadline, tonumber(rq) or 0)))
elseif had >= 0 then
  redis.call('HDEL', key, mine_r)
end

-- Announced only when the call frees slots net of what it takes (a
-- consumer that takes back the slot its worker just freed frees none), or
-- lowers its reclaimed count so that a fresh read may be granted.
local wake = false
if cap > 0 then
  local total = held + granted
  if total > 0 then
    write('HSET', key, me, string.format('%d %.0f', total, now + lease))
  else
    redis.call('HDEL', key, me)
  end
  wake = total < mine or left < had and cap - others - total - queued - left > 0
else
  wake = left < had
end
if wake and ARGV[10] and ARGV[10] ~= '' and redis.call('HDEL', key, 'waiting') == 1 then
  publish(ARGV[10], ARGV[11])
end
if refused then
  write('HSET', key, 'waiting', '1')
end
return {granted, wait, blocker}
