-- dead.lua: acknowledge an entry for this group and append it to the group's
-- dead letters (one transition: pending -> dead-lettered). If the entry is
-- no longer pending (another consumer reclaimed and finished it), nothing is
-- done.
--
-- KEYS[1]  STREAM  the stream the entry was read from
-- KEYS[2]  STREAM  the group's dead letters
-- KEYS[3..5] HASH optional: the shard's history keys (totals, minute,
--                  hour; see history.lua), in which the dead letter is
--                  counted ("dead:<group>")
-- ARGV[1]  group name
-- ARGV[2]  stream entry id
-- ARGV[3]  dead-letter length cap (0 = none; else oldest dead letters beyond it are trimmed)
-- ARGV[4..] field/value pairs of the dead-letter entry
--
-- Returns {done, dropped}: done 1 if dead-lettered (0 if the entry was not
-- pending); dropped = older dead letters trimmed away by the cap.
--
-- The entry is acknowledged last (see retry.lua): a command that fails
-- midway leaves it pending, never acknowledged without its dead letter.
if #redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1) == 0 then
  return {0, 0}
end
local fields = {}
for i = 4, #ARGV do
  fields[#fields + 1] = ARGV[i]
end
-- A full server (maxmemory with noeviction) refuses a script's write that
-- may add memory while the script has written nothing yet; dead-lettering
-- moves the message rather than adding one. So when the XADD is refused
-- for memory (Redis checked the caller's ACL for it first) and the dead
-- letters are a stream (or absent), the entry is acknowledged first (a
-- write that only frees) and the XADD made again, which nothing can refuse
-- then. Any other refusal is raised with nothing written: the entry stays
-- pending.
local acked = false
local ok = redis.pcall('XADD', KEYS[2], '*', unpack(fields))
if type(ok) == 'table' and ok.err then
  local kind = redis.call('TYPE', KEYS[2])
  kind = type(kind) == 'table' and kind.ok or kind
  if string.find(ok.err, 'OOM', 1, true) and (kind == 'stream' or kind == 'none') then
    redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
    acked = true
  end
  redis.call('XADD', KEYS[2], '*', unpack(fields))
end
local dropped = 0
local cap = tonumber(ARGV[3])
if cap > 0 then
  dropped = redis.call('XTRIM', KEYS[2], 'MAXLEN', cap)
end
if not acked then
  redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
end
tally(3, 'dead:' .. ARGV[1], 1)
return {1, dropped}
