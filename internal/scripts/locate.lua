-- locate.lua: find every place of one message id in one queue shard, for
-- operators (read only). Preceded by ids.lua (locate, genparts).
--
-- The caller names the groups it believes the shard records, with their
-- keys; the script reads the record (KEYS[1]) and, when it holds a group
-- not named, searches nothing and returns the recorded names, for the
-- caller to call again with them. A named group the record does not hold
-- (forgotten) is not searched.
--
-- Bounded: one call reads at most ARGV[3] entries (stream entries and
-- retry lane members, all keys together) and returns a cursor where it
-- stopped; the caller calls again with it until the cursor is "". The
-- places are searched in the order a message moves through them (the
-- waiting set, first call only; the stream; the quarantine; then per group
-- its retry lane's set, stream and quarantine, and its dead letters).
--
-- KEYS[1]  SET     the shard's recorded groups
-- KEYS[2]  ZSET    the main lane's delayed set
-- KEYS[3]  HASH    the main lane's envelopes
-- KEYS[4]  STREAM  the main lane's stream
-- KEYS[5]  STREAM  the main lane's quarantine
-- then for each group named in ARGV[5..], five keys:
--          ZSET    its retry lane's delayed set
--          HASH    its retry lane's envelopes
--          STREAM  its retry lane's stream
--          STREAM  its retry lane's quarantine
--          STREAM  its dead letters
-- then optionally, for each group named in ARGV[5..], in order:
--          HASH    its handled records (message id -> record; see ack.lua)
-- ARGV[1]  message id
-- ARGV[2]  scan limit: the most entries read from each stream, and members
--          scanned in each retry lane's delayed set, over the whole search
-- ARGV[3]  budget: the most entries and members this call reads (>= 1)
-- ARGV[4]  cursor: "" to start a search (the waiting set is read then),
--          else one this script returned: "<key index>|<read>|<position>"
--          (the key to go on with, how many it has read from it, and the
--          last stream entry id read or the ZSCAN cursor; "" from its start)
-- ARGV[5..] group names
--
-- Returns {'groups', names} when the record holds a group not named in
-- ARGV (names: every recorded group), else {waiting, partial, found, cursor}:
--   waiting  {} or {due_ms, envelope or false} (first call only)
--   partial  1 when a stream or set held more than the scan limit (the
--            search may have missed entries beyond it), else 0
--   found    a list of {where, group, entry_id, fields, extra}, where is
--            "handled" (a group's handled record, first call only: entry_id
--            "", fields the record "<ms>|<attempt>|<outcome>|<consumer>"),
--            "stream" (the main stream; group "" and extra a list of
--            {group, state, consumer, idle_ms, deliveries} per group, state
--            "pending", "ready" or "handled"), "retry-stream" (extra
--            {state, consumer, idle_ms, deliveries}), "retry" (a retry
--            lane's waiting member: entry_id is its due ms, fields
--            {member, envelope or false}), "dead", "quarantine" (group ""
--            for the main lane's, else the group's retry lane's).
--   cursor   "" when the search is done, else the cursor to call again with
local id = ARGV[1]
local limit = tonumber(ARGV[2])
local budget = tonumber(ARGV[3])
local _, rnd = genparts(id)
local retryPrefix = id .. '\31'
local partial = 0
local found = {}

-- The groups to search: those named that the record holds.
local named, recorded = {}, {}
for i = 5, #ARGV do
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

-- The search's position: the key to go on with (an index into KEYS),
-- how many entries it has read from it, and where it stopped in it.
local atKey, read, pos = 4, 0, ''
if ARGV[4] ~= '' then
  local k, r, p = string.match(ARGV[4], '^(%d+)|(%d+)|(.*)$')
  if k then
    atKey, read, pos = math.max(4, tonumber(k)), tonumber(r), p
  end
end

-- scan returns the entries of stream key whose fields name the message,
-- read from the search's position on, within the budget; done is false
-- when the budget ran out before the end of the stream (pos is then the
-- last entry id read).
local function scan(key)
  local out = {}
  if redis.call('EXISTS', key) == 0 then
    return out, true
  end
  local take = math.min(budget, limit - read)
  local start = '-'
  if pos ~= '' then
    start = '(' .. pos
  end
  local entries = {}
  if take > 0 then
    entries = redis.call('XRANGE', key, start, '+', 'COUNT', take)
  end
  budget, read = budget - #entries, read + #entries
  for _, e in ipairs(entries) do
    if matches(e[2]) then
      out[#out + 1] = e
    end
  end
  if #entries > 0 then
    pos = entries[#entries][1]
  end
  if #entries < take then
    return out, true
  end
  if read >= limit then
    if #redis.call('XRANGE', key, '(' .. pos, '+', 'COUNT', 1) > 0 then
      partial = 1
    end
    return out, true
  end
  return out, false
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

-- searchMain searches the main stream, with each group's view of what
-- was found.
local function searchMain()
  local hits, done = scan(KEYS[4])
  if #hits > 0 then
    local last = lastDelivered(KEYS[4])
    for _, e in ipairs(hits) do
      local per = {}
      for i = 5, #ARGV do
        if recorded[ARGV[i]] then
          local s = state(KEYS[4], ARGV[i], e[1], last[ARGV[i]])
          per[#per + 1] = {ARGV[i], s[1], s[2], s[3], s[4]}
        end
      end
      found[#found + 1] = {'stream', '', e[1], e[2], per}
    end
  end
  return done
end

-- searchRetrySet searches group g's retry lane's delayed set (KEYS[k]) for
-- members "<id>\31<entry id>"; envelopes in KEYS[k + 1].
local function searchRetrySet(g, k)
  local cursor = pos
  if cursor == '' then
    cursor = '0'
  end
  repeat
    if read >= limit then
      partial = 1
      return true
    end
    if budget <= 0 then
      pos = cursor
      return false
    end
    local r = redis.call('ZSCAN', KEYS[k], cursor, 'COUNT', math.min(100, budget, limit - read))
    cursor = r[1]
    local n = #r[2] / 2
    budget, read = budget - n, read + n
    for j = 1, #r[2], 2 do
      local member = r[2][j]
      if string.sub(member, 1, #retryPrefix) == retryPrefix then
        found[#found + 1] = {'retry', g, r[2][j + 1], {member, redis.call('HGET', KEYS[k + 1], member)}, {}}
      end
    end
  until cursor == '0'
  return true
end

-- searchKey searches KEYS[k] from the search's position and reports
-- whether it got to its end (or its scan limit).
local function searchKey(k)
  if k == 4 then
    return searchMain()
  end
  if k == 5 then
    local hits, done = scan(KEYS[5])
    for _, e in ipairs(hits) do
      found[#found + 1] = {'quarantine', '', e[1], e[2], {}}
    end
    return done
  end
  -- A group's keys: KEYS[base + 1..5], its name ARGV[5 + (base - 5) / 5].
  local base = k - 1 - (k - 6) % 5
  local g = ARGV[5 + (base - 5) / 5]
  local j = k - base
  if not recorded[g] or j == 2 then
    return true -- forgotten; or the envelopes, read with the set
  end
  if j == 1 then
    return searchRetrySet(g, k)
  end
  local hits, done = scan(KEYS[k])
  local last = {}
  if j == 3 and #hits > 0 then
    last = lastDelivered(KEYS[k])
  end
  for _, e in ipairs(hits) do
    if j == 3 then
      found[#found + 1] = {'retry-stream', g, e[1], e[2], state(KEYS[k], g, e[1], last[g])}
    elseif j == 4 then
      found[#found + 1] = {'quarantine', g, e[1], e[2], {}}
    else
      found[#found + 1] = {'dead', g, e[1], e[2], {}}
    end
  end
  return done
end

-- The groups' keys end here; the handled records' keys follow, if given.
local groupKeysEnd = 5 + 5 * (#ARGV - 4)

-- Waiting in the main lane, and the groups' handled records: read by the
-- first call of a search.
local waiting = {}
if ARGV[4] == '' and #KEYS > groupKeysEnd then
  for i = 5, #ARGV do
    if recorded[ARGV[i]] then
      local rec = redis.pcall('HGET', KEYS[groupKeysEnd + i - 4], id)
      if type(rec) == 'string' then
        found[#found + 1] = {'handled', ARGV[i], '', rec, {}}
      end
    end
  end
end
if ARGV[4] == '' then
  local m, due, packed = locate(KEYS[2], id)
  if m then
    if packed then
      waiting = {due, string.sub(m, 18)}
    else
      waiting = {due, redis.call('HGET', KEYS[3], id)}
    end
  end
end

for k = atKey, groupKeysEnd do
  if not searchKey(k) then
    return {waiting, partial, found, string.format('%d|%d|%s', k, read, pos)}
  end
  read, pos = 0, ''
end
return {waiting, partial, found, ''}
