-- recur_add.lua: add occurrences of a recurring schedule to one shard
-- (-> scheduled), at most once each, and fence the shard for a new
-- revision.
--
-- KEYS[1]  ZSET  the shard's delayed set
-- KEYS[2]  HASH  the shard's envelopes
-- KEYS[3]  HASH  the shard's occurrence records (schedule id ->
--                "<revision>|<latest added ms>|<latest due ms>|<waiting ms,...>";
--                schedule id .. "\31w" -> when the occurrences were written,
--                "<first ms>:<last ms>:<written ms>,...": the occurrences from
--                first to last added by one call, and that call's Redis time,
--                from the latest due on)
-- ARGV[1]  wake channel of the shard's lane ("" = never publish)
-- ARGV[2]  schedule id
-- ARGV[3]  revision of the caller's definition
-- ARGV[4..] pairs, in ascending time: occurrence ms, envelope
--
-- An occurrence's message id is "<schedule id>@<ms>#<revision>". The
-- record refuses what is not after the latest occurrence added for the
-- revision, so a second top-up, racing or after a crash, adds nothing
-- again, and an occurrence delivered and gone is not re-created. A caller
-- with an older revision than the record's is refused (its definition has
-- changed). A newer revision fences the shard: the older revision's
-- occurrences still waiting and not yet due are removed, those due stay
-- (they are being delivered). With no pairs, the call only fences. A
-- record of another form counts as none.
--
-- The written times are kept for the occurrences from the latest due on
-- (those earlier can no longer be the schedule's last); a fence drops
-- those of the occurrences it removes.
--
-- Returns {added, removed}, or {-1, record revision} when refused.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local sid, rev = ARGV[2], tonumber(ARGV[3])
local crev, last, fired, waiting = 0, 0, 0, {}
local wfield = sid .. '\31w'
local rec, written = unpack(redis.call('HMGET', KEYS[3], sid, wfield))
if rec then
  local r, l, f, rest = string.match(rec, '^(%d+)|(%d+)|(%d+)|([%d,]*)$')
  if r then
    crev, last, fired = tonumber(r), tonumber(l), tonumber(f)
    for v in string.gmatch(rest, '%d+') do
      waiting[#waiting + 1] = tonumber(v)
    end
  end
end
if crev > rev then
  return {-1, crev}
end
local keep, removed = {}, 0
for _, ms in ipairs(waiting) do
  if ms <= now then
    fired = math.max(fired, ms)
  elseif crev < rev then
    local id = string.format('%s@%d#%d', sid, ms, crev)
    if redis.call('ZREM', KEYS[1], id) == 1 then
      redis.call('HDEL', KEYS[2], id)
      removed = removed + 1
    end
  else
    keep[#keep + 1] = string.format('%d', ms)
  end
end
if crev < rev then
  last = 0
end
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local added, earliest = 0, nil
for i = 4, #ARGV - 1, 2 do
  local ms = tonumber(ARGV[i])
  if ms and ms > last then
    local id = string.format('%s@%d#%d', sid, ms, rev)
    redis.call('ZADD', KEYS[1], ms, id)
    redis.call('HSET', KEYS[2], id, ARGV[i + 1])
    last = ms
    added = added + 1
    if ms <= now then
      fired = math.max(fired, ms)
    else
      keep[#keep + 1] = string.format('%d', ms)
    end
    if earliest == nil then
      earliest = ms
    end
  end
end
-- The written times: those of this call's additions appended; none
-- ending before the latest due; none after it when fenced (the older
-- revision's occurrences not yet due are gone).
local runs = {}
for a, b, w in string.gmatch(written or '', '(%d+):(%d+):(%d+)') do
  a, b = tonumber(a), tonumber(b)
  if crev < rev then
    b = math.min(b, fired)
  end
  if b >= fired and a <= b then
    runs[#runs + 1] = string.format('%d:%d:%s', a, b, w)
  end
end
if earliest then
  runs[#runs + 1] = string.format('%d:%d:%d', earliest, last, now)
end
redis.call('HSET', KEYS[3], sid, string.format('%d|%d|%d|', rev, last, fired) .. table.concat(keep, ','),
  wfield, table.concat(runs, ','))
if ARGV[1] ~= '' and earliest and (head[2] == nil or earliest < tonumber(head[2])) then
  publish(ARGV[1], string.format('%d', earliest))
end
return {added, removed}
