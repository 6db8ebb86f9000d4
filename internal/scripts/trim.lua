-- trim.lua: trim a stream below the oldest entry that some group still needs
-- (pending, or not yet read). Entries every group has read and acknowledged
-- are removed; a lagging or stalled group keeps everything after its
-- position. A stream without groups is not trimmed.
--
-- KEYS[1]  STREAM  the stream
-- KEYS[2]  SET     optional: the groups that read the stream (a queue's
--                  record, stream.Keys.Groups): while one of them is missing
--                  from the stream (deleted with it, not recreated yet),
--                  nothing is trimmed and the reply names it
-- ARGV[1]  retention in ms: entries younger than this are kept even if acknowledged (0 = none)
-- ARGV[2]  most entries to remove in this call, about (the approximate trim
--          removes at most this many, the exact trim then less than one
--          stream node, 100 entries by default); call again while more is 1
--
-- Returns {trimmed, threshold, more}: entries removed, the MINID used ("" if
-- none), and 1 if the limit stopped it before the threshold; or {0, "", 0,
-- group} when a recorded group is missing.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {0, '', 0}
end
local groups = redis.call('XINFO', 'GROUPS', KEYS[1])
if KEYS[2] then
  local have = {}
  for _, g in ipairs(groups) do
    for i = 1, #g, 2 do
      if g[i] == 'name' then
        have[g[i + 1]] = true
      end
    end
  end
  for _, name in ipairs(redis.call('SMEMBERS', KEYS[2])) do
    if not have[name] then
      return {0, '', 0, name}
    end
  end
end
if #groups == 0 then
  return {0, '', 0}
end
local function parse(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  if not ms then -- a bare "<ms>" (as some servers echo a group's start id)
    ms, seq = string.match(id, '^(%d+)$'), 0
  end
  return tonumber(ms), tonumber(seq)
end
local bestMs, bestSeq = nil, nil
local function consider(ms, seq)
  if bestMs == nil or ms < bestMs or (ms == bestMs and seq < bestSeq) then
    bestMs, bestSeq = ms, seq
  end
end
for _, g in ipairs(groups) do
  local f = {}
  for i = 1, #g, 2 do
    f[g[i]] = g[i + 1]
  end
  if tonumber(f['pending']) > 0 then
    local s = redis.call('XPENDING', KEYS[1], f['name'])
    consider(parse(s[2]))
  else
    local ms, seq = parse(f['last-delivered-id'])
    consider(ms, seq + 1)
  end
end
local retention = tonumber(ARGV[1])
if retention > 0 then
  local t = redis.call('TIME')
  local cut = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - retention
  consider(cut, 0)
end
local threshold = string.format('%d-%d', bestMs, bestSeq)
-- Bound the work: the approximate trim removes only whole stream nodes and
-- at most ARGV[2] entries; when it was not stopped by that limit, what lies
-- below the threshold is less than one node, which the exact trim removes.
-- Neither ever removes an entry at or above the threshold.
local limit = tonumber(ARGV[2])
local n = redis.call('XTRIM', KEYS[1], 'MINID', '~', threshold, 'LIMIT', limit)
if n + 100 > limit then
  return {n, threshold, 1}
end
return {n + redis.call('XTRIM', KEYS[1], 'MINID', threshold), threshold, 0}
