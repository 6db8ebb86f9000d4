-- promote.lua: move due messages of one lane into its stream (one transition:
-- scheduled -> in stream, or scheduled -> quarantined). Bounded: at most
-- ARGV[1] messages per call; the caller loops while a batch is full.
--
-- KEYS[1]  ZSET    delayed set (member -> due ms; member kinds: see ids.lua)
-- KEYS[2]  HASH    envelopes of plain members (message id -> encoded envelope)
-- KEYS[3]  STREAM  the lane's stream
-- KEYS[4]  STREAM  the lane's quarantine
-- KEYS[5]  STRING  the lane's mover lease
-- KEYS[6]  HASH    optional: the shard's pause record; while its field
--                  "queue" exists, nothing is promoted (a paused queue)
-- KEYS[7]  HASH    optional (with KEYS[6]): the shard's recurring occurrence
--                  records; for each recurring occurrence appended (a plain
--                  member "<schedule id>@<ms>#<revision>" due at <ms>), its
--                  field "<schedule id>\31a" is set to "<ms>|<entry id's ms>"
--                  (a key of another type is left alone)
-- KEYS[8..10] HASH optional (with KEYS[7]): the shard's history keys
--                  (totals, minute, hour; see history.lua), in which the
--                  entries appended are counted ("promoted", "quarantined")
-- ARGV[1]  limit: most messages to take (1..1000)
-- ARGV[2]  lease token of the caller ("" = no lease: always promote)
-- ARGV[3]  lease time to live in ms (ignored without a token)
-- ARGV[4]  the envelope header: the magic byte every valid envelope starts
--          with, then the version bytes accepted after it (one or two)
-- ARGV[5]  optional: a pub/sub channel to which ARGV[6] is published when
--          entries were appended to the stream (a sharded queue's arrivals)
-- ARGV[7]  optional: "0" when the caller renewed its lease recently: a
--          call that finds it holds the lease then leaves it as it is (one
--          SET fewer per call; the caller renews it well before it lapses)
-- ARGV[8]  optional: a consumer group, and ARGV[9] one of its consumers,
--          that reads the stream right after this call, in the same
--          pipeline: the announcement is then ARGV[6], a newline, the
--          group, a newline and the consumer, and that consumer does not
--          read the stream for it
--
-- Returns {moved, quarantined, next, now_us, lease_ttl_ms}
--          moved        entries appended to the stream
--          quarantined  entries appended to the quarantine (see below)
--          next         due ms of the earliest remaining message, -1 if none
--                       (or if its score is not a due time, or the lane
--                       is paused: the mover idles until woken)
--          now_us       Redis TIME in microseconds
--          lease_ttl_ms -1 when the caller holds (or needs no) lease; -2 when
--                       nothing was due and nobody holds the lease (it is
--                       taken only for work: an idle lane has no holder);
--                       otherwise the remaining ms of another mover's lease,
--                       and nothing was done
--
-- Anything may have been written into the delayed set (another program, an
-- operator, another version of this library), so every member of the batch
-- is classified once, and no member of any bytes or length, nor any score,
-- can make the script fail or misalign a lookup. Quarantine entries carry
-- the reason (field r), the score (d) and what was found: the plain
-- member's id (i) and envelope (e), or the raw member (m) for anything else.
-- Reasons:
--   invalid due time         the score is not a whole number of ms in [0, 2^48)
--   unknown member format    empty, or a first byte below 0x20 other than 0x01
--   malformed packed member  0x01 not followed by a 16-character base32
--                            random part and an envelope
--   unknown envelope format  the envelope does not start with the magic
--                            byte and an accepted version (ARGV[4])
--   missing envelope         a plain member with no envelope in KEYS[2]
-- A packed member is appended when its kind byte and its envelope header
-- are right; the alphabet of its random part is checked by the consumer
-- (stream.Decode), which dead-letters what it cannot split: checking it
-- here would cost about 0.4 µs of Redis CPU per promoted message.
local t = redis.call('TIME')
local nowus = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = math.floor(nowus / 1000)
local lease = -1
local holder = nil
if ARGV[2] ~= '' then
  holder = redis.call('GET', KEYS[5])
  if holder and holder ~= ARGV[2] then
    return {0, 0, -1, nowus, redis.call('PTTL', KEYS[5])}
  end
end
if KEYS[6] and redis.call('HEXISTS', KEYS[6], 'queue') == 1 then
  if holder or ARGV[2] == '' then
    return {0, 0, -1, nowus, -1}
  end
  return {0, 0, -1, nowus, -2}
end
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[1]))
local n = #due / 2
-- appendable reports whether the batch can certainly be appended: the
-- stream and the quarantine are streams (or absent), and the caller may
-- XADD to both.
local function appendable()
  for _, k in ipairs({KEYS[3], KEYS[4]}) do
    local kind = redis.call('TYPE', k)
    kind = type(kind) == 'table' and kind.ok or kind
    if kind ~= 'stream' and kind ~= 'none' then
      return false
    end
    if redis.acl_check_cmd and not redis.acl_check_cmd('XADD', k, '*', 'd', '0') then
      return false
    end
  end
  return true
end
-- call makes the script's writes (the lease's SET, the XADDs below); its
-- first call is firstWrite. A full server (maxmemory with noeviction) refuses
-- a script's write that may add memory while the script has written
-- nothing yet. So when the first write is refused for memory and the
-- batch can certainly be appended, the batch leaves the set first (a
-- write that only frees; it is the set's first n members by rank, and
-- their members and due times are in due) and the write is made again:
-- promotion goes on at the limit, and memory is freed as the groups
-- acknowledge. Any other refusal is raised, with nothing written.
local removed = false
local call
local function firstWrite(...)
  call = redis.call
  local r = redis.pcall(...)
  if type(r) ~= 'table' or not r.err then
    return r
  end
  if n > 0 and string.find(r.err, 'OOM', 1, true) and appendable() then
    redis.call('ZREMRANGEBYRANK', KEYS[1], 0, n - 1)
    removed = true
  end
  return redis.call(...)
end
call = firstWrite
if ARGV[2] ~= '' then
  if #due > 0 then
    if not holder or ARGV[7] ~= '0' then
      call('SET', KEYS[5], ARGV[2], 'PX', ARGV[3])
    end
  elseif not holder then
    lease = -2
  end
end
-- The largest due time + 1 (2^48): generated ids carry 48 bits of it.
local DUEMAX = 281474976710656
local moved, bad = 0, 0
if n > 0 then
  local byte, find, tonumber = string.byte, string.find, tonumber
  local hdr = ARGV[4]
  local h1, h2, h3 = byte(hdr, 1, 3) -- h3 nil when one version is accepted
  -- Classify each member once. A packed member is appended as is (field
  -- "p": the consumer splits it, which costs Lua no strings), at once while
  -- no plain member came before it in the batch (the stream keeps due
  -- order); so is a member the script cannot read, to the quarantine; a
  -- plain member needs its envelope, fetched below with one HMGET for the
  -- batch. After this loop cls[k] is true for a packed member still to
  -- append and the index of a plain member's envelope; why[k] the reason a
  -- member is still to be quarantined with.
  local cls, why, plain, np, first = {}, {}, {}, 0, nil
  for k = 1, n do
    local m, score = due[2 * k - 1], due[2 * k]
    local kind = byte(m) -- nil for an empty member
    local reason
    if kind == 1 then
      local d = tonumber(score)
      if d < 0 or d >= DUEMAX or d % 1 ~= 0 then
        reason = 'invalid due time'
      elseif byte(m, 18) == h1 and (byte(m, 19) == h2 or byte(m, 19) == h3) then
        if np == 0 then
          call('XADD', KEYS[3], '*', 'd', score, 'p', m)
        else
          cls[k] = true
        end
        moved = moved + 1
      elseif #m >= 17 and find(m, RANDOM, 2) then
        reason = 'unknown envelope format'
      else
        reason = 'malformed packed member'
      end
    elseif kind == nil or kind < 32 then
      reason = 'unknown member format'
    else
      -- A plain member: its envelope is looked up even when its score is
      -- bad, so that the quarantine keeps it.
      np = np + 1
      plain[np] = m
      cls[k] = np
      first = first or k
    end
    if reason then
      if np == 0 then
        call('XADD', KEYS[4], '*', 'r', reason, 'd', score, 'm', m)
      else
        why[k] = reason
      end
      bad = bad + 1
    end
  end
  if np > 0 then
    -- The envelopes of the plain members, false where missing.
    local envs = redis.call('HMGET', KEYS[2], unpack(plain))
    for k = first, n do
      local c = cls[k]
      if c == true then
        call('XADD', KEYS[3], '*', 'd', due[2 * k], 'p', due[2 * k - 1])
      elseif why[k] then
        call('XADD', KEYS[4], '*', 'r', why[k], 'd', due[2 * k], 'm', due[2 * k - 1])
      elseif c then
        local m, score, env = due[2 * k - 1], due[2 * k], envs[c]
        local d = tonumber(score)
        if not env then
          call('XADD', KEYS[4], '*', 'i', m, 'd', score, 'r', 'missing envelope')
          bad = bad + 1
        elseif d < 0 or d >= DUEMAX or d % 1 ~= 0 then
          call('XADD', KEYS[4], '*', 'i', m, 'd', score, 'r', 'invalid due time', 'e', env)
          bad = bad + 1
        elseif byte(env, 1) ~= h1 or (byte(env, 2) ~= h2 and byte(env, 2) ~= h3) then
          call('XADD', KEYS[4], '*', 'i', m, 'd', score, 'r', 'unknown envelope format', 'e', env)
          bad = bad + 1
        else
          local eid = call('XADD', KEYS[3], '*', 'i', m, 'd', score, 'e', env)
          moved = moved + 1
          -- A recurring occurrence ("<schedule id>@<ms>#<revision>", due at
          -- its ms): record when it was appended, for the schedule's status.
          -- pcall: a record key of another type must not stop the lane.
          if KEYS[7] and find(m, '#', 2, true) then
            local sid, at = string.match(m, '^(.+)@(%d+)#%d+$')
            if sid and tonumber(at) == d then
              redis.pcall('HSET', KEYS[7], sid .. '\31a', at .. '|' .. string.match(eid, '^%d+'))
            end
          end
        end
      end
    end
  end
  -- The batch is the set's first n members by rank (the script is atomic).
  if not removed then
    redis.call('ZREMRANGEBYRANK', KEYS[1], 0, n - 1)
  end
  if np > 0 then
    redis.call('HDEL', KEYS[2], unpack(plain))
  end
  tally(8, 'promoted', moved)
  tally(8, 'quarantined', bad)
end
if moved > 0 and ARGV[5] and ARGV[5] ~= '' then
  if ARGV[8] and ARGV[8] ~= '' then
    publish(ARGV[5], ARGV[6] .. '\n' .. ARGV[8] .. '\n' .. ARGV[9])
  else
    publish(ARGV[5], ARGV[6])
  end
end
local nxt = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local nextDue = -1
if nxt[2] then
  nextDue = tonumber(nxt[2])
  if nextDue < 0 then
    nextDue = 0 -- due now: promoted (or quarantined) by the next call
  elseif nextDue >= DUEMAX then
    nextDue = -1 -- never due (+inf, or beyond any due time): as if none
  end
  nextDue = math.ceil(nextDue)
end
return {moved, bad, nextDue, nowus, lease}
