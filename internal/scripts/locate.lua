-- locate.lua: find every place of one message id in one queue shard, for
-- operators (read only). Preceded by ids.lua (locate, genparts).
--
-- The caller names the groups it believes the shard records, with their
-- keys; the script reads the record (KEYS[1]) and, when it holds a group
-- not named, searches nothing and returns the recorded names, for the
-- caller to call again with them. A named group the record does not hold
-- (forgotten) is not searched.
--
-- KEYS[1]  SET     the shard's recorded groups
-- KEYS[2]  ZSET    the main lane's delayed set
-- KEYS[3]  HASH    the main lane's envelopes
-- KEYS[4]  STREAM  the main lane's stream
-- KEYS[5]  STREAM  the main lane's quarantine
-- then for each group named in ARGV[3..], five keys:
--          ZSET    its retry lane's delayed set
--          HASH    its retry lane's envelopes
--          STREAM  its retry lane's stream
--          STREAM  its retry lane's quarantine
--          STREAM  its dead letters
-- ARGV[1]  message id
-- ARGV[2]  scan limit: the most entries read from each stream, and members
--          scanned in each retry lane's delayed set
-- ARGV[3..] group names
--
-- Returns {'groups', names} when the record holds a group not named in
-- ARGV (names: every recorded group), else {waiting, partial, found}:
--   waiting  {} or {due_ms, envelope or false}
--   partial  1 when a stream or set held more than the scan limit (the
--            search may have missed entries beyond it), else 0
--   found    a list of {where, group, entry_id, fields, extra}, where is
--            "stream" (the main stream; group "" and extra a list of
--            {group, state, consumer, idle_ms, deliveries} per group, state
--            "pending", "ready" or "handled"), "retry-stream" (extra
--            {state, consumer, idle_ms, deliveries}), "retry" (a retry
--            lane's waiting member: entry_id is its due ms, fields
--            {member, envelope or false}), "dead", "quarantine" (group ""
--            for the main lane's, else the group's retry lane's).
local id = ARGV[1]
local limit = tonumber(ARGV[2])
local _, rnd = genparts(id)
local retryPrefix = id .. '\31'
local partial = 0
local found = {}

-- The groups to search: those named that the record holds.
local named, recorded = {}, {}
for i = 3, #ARGV do
  named[ARGV[i]] = true
end
local members = redis.call('SMEMBERS', KEYS[1])
for _, g in ipairs(members) do
  if not named[g] then
    return {'groups', members}
  end
  recorded[g] = true
end

local function matches(f)
  for j = 1, #f, 2 do
    local k, v = f[j], f[j + 1]
    if k == 'i' and (v == id or string.sub(v, 1, #retryPrefix) == retryPrefix) then
      return true
    end
    if (k == 'p' or k == 'm') and rnd and string.byte(v) == 1 and string.sub(v, 2, 17) == rnd then
      return true
    end
  end
  return false
end

-- scan returns the entries of stream key whose fields name the message.
local function scan(key)
  local out = {}
  if redis.call('EXISTS', key) == 0 then
    return out
  end
  local entries = redis.call('XRANGE', key, '-', '+', 'COUNT', limit)
  if #entries == limit and redis.call('XLEN', key) > limit then
    partial = 1
  end
  for _, e in ipairs(entries) do
    if matches(e[2]) then
      out[#out + 1] = e
    end
  end
  return out
end

-- idLess compares two stream entry ids.
local function idLess(a, b)
  local am, as = string.match(a, '^(%d+)-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)-(%d+)$')
  am, as, bm, bs = tonumber(am), tonumber(as), tonumber(bm), tonumber(bs)
  return am < bm or (am == bm and as < bs)
end

-- lastDelivered returns group name -> last delivered id of stream key.
local function lastDelivered(key)
  local out = {}
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', key)) do
    local name, last
    for j = 1, #g, 2 do
      if g[j] == 'name' then name = g[j + 1] elseif g[j] == 'last-delivered-id' then last = g[j + 1] end
    end
    if name then
      out[name] = last
    end
  end
  return out
end

-- state returns what group has done with entry eid of stream key.
local function state(key, group, eid, last)
  if last == nil then
    return {'unknown', '', 0, 0}
  end
  local p = redis.call('XPENDING', key, group, eid, eid, 1)
  if #p > 0 then
    return {'pending', p[1][2], p[1][3], p[1][4]}
  end
  if idLess(last, eid) then
    return {'ready', '', 0, 0}
  end
  return {'handled', '', 0, 0}
end

-- Waiting in the main lane.
local waiting = {}
local m, due, packed = locate(KEYS[2], id)
if m then
  if packed then
    waiting = {due, string.sub(m, 18)}
  else
    waiting = {due, redis.call('HGET', KEYS[3], id)}
  end
end

-- The main stream, with each group's view of what was found.
local hits = scan(KEYS[4])
if #hits > 0 then
  local last = lastDelivered(KEYS[4])
  for _, e in ipairs(hits) do
    local per = {}
    for i = 3, #ARGV do
      if recorded[ARGV[i]] then
        local s = state(KEYS[4], ARGV[i], e[1], last[ARGV[i]])
        per[#per + 1] = {ARGV[i], s[1], s[2], s[3], s[4]}
      end
    end
    found[#found + 1] = {'stream', '', e[1], e[2], per}
  end
end
for _, e in ipairs(scan(KEYS[5])) do
  found[#found + 1] = {'quarantine', '', e[1], e[2], {}}
end

-- searchGroup searches group g's retry lane and dead letters, whose keys
-- start at KEYS[k + 1].
local function searchGroup(g, k)
  -- Waiting for its next attempt: members "<id>\31<entry id>".
  local cursor, seen = '0', 0
  repeat
    local r = redis.call('ZSCAN', KEYS[k + 1], cursor, 'COUNT', 100)
    cursor = r[1]
    for j = 1, #r[2], 2 do
      seen = seen + 1
      local member = r[2][j]
      if string.sub(member, 1, #retryPrefix) == retryPrefix then
        found[#found + 1] = {'retry', g, r[2][j + 1], {member, redis.call('HGET', KEYS[k + 2], member)}, {}}
      end
    end
  until cursor == '0' or seen >= limit
  if cursor ~= '0' then
    partial = 1
  end
  local rhits = scan(KEYS[k + 3])
  if #rhits > 0 then
    local last = lastDelivered(KEYS[k + 3])
    for _, e in ipairs(rhits) do
      found[#found + 1] = {'retry-stream', g, e[1], e[2], state(KEYS[k + 3], g, e[1], last[g])}
    end
  end
  for _, e in ipairs(scan(KEYS[k + 4])) do
    found[#found + 1] = {'quarantine', g, e[1], e[2], {}}
  end
  for _, e in ipairs(scan(KEYS[k + 5])) do
    found[#found + 1] = {'dead', g, e[1], e[2], {}}
  end
end

for i = 3, #ARGV do
  if recorded[ARGV[i]] then
    searchGroup(ARGV[i], 5 + (i - 3) * 5)
  end
end
return {waiting, partial, found}
