-- xrange_cut.lua: entries of a stream (dead letters, a quarantine) with
-- the envelopes and members they hold cut to a bounded prefix, for
-- listings (read only). Preceded by envcut.lua (envcut).
--
-- The entries are read 16 at a time, so the script never holds more than
-- 16 whole entries at once, and returns at most ARGV[3] cut ones.
--
-- KEYS[1]  STREAM  the stream
-- ARGV[1]  start: "-", an entry id, or "(" and an entry id (exclusive);
--          with ARGV[5] "rev", the end: "+", an entry id, or "(" and one
-- ARGV[2]  end: "+" or an entry id; with ARGV[5] "rev", the start: "-"
--          or an entry id
-- ARGV[3]  count: the most entries returned (>= 1)
-- ARGV[4]  max payload bytes (>= 1)
-- ARGV[5]  optional: "rev" reads newest first (XREVRANGE)
--
-- Returns a list of {entry id, fields, lengths}, oldest first (newest
-- first with "rev"): fields as
-- XRANGE returns them (a flat list of names and values), with the value
-- of "e" (an envelope) cut by envcut, of "p" (a packed member, whose
-- envelope starts at its 18th byte) likewise, and of "m" (a delayed-set
-- member) as "p" when it is a packed one, else cut to ARGV[4] bytes;
-- lengths a flat list of field name and the value's length before the
-- cut, for each of "e", "p" and "m" that the entry has.
local count = tonumber(ARGV[3])
local max = tonumber(ARGV[4])
local CHUNK = 16
local out = {}
local start = ARGV[1]
local cmd = 'XRANGE'
if ARGV[5] == 'rev' then
  cmd = 'XREVRANGE'
end
while #out < count do
  local n = math.min(CHUNK, count - #out)
  local page = redis.call(cmd, KEYS[1], start, ARGV[2], 'COUNT', n)
  for _, entry in ipairs(page) do
    local fields, lens = entry[2], {}
    for k = 1, #fields, 2 do
      local name, v = fields[k], fields[k + 1]
      if name == 'e' or name == 'p' or name == 'm' then
        lens[#lens + 1] = name
        lens[#lens + 1] = #v
        if name == 'e' then
          fields[k + 1] = envcut(v, 1, max)
        elseif name == 'p' or string.byte(v, 1) == 1 then
          fields[k + 1] = envcut(v, 18, max)
        elseif #v > max then
          fields[k + 1] = string.sub(v, 1, max)
        end
      end
    end
    out[#out + 1] = {entry[1], fields, lens}
  end
  if #page < n then
    break
  end
  start = '(' .. page[#page][1]
end
return out
