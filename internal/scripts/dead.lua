-- dead.lua: acknowledge an entry for this group and append it to the group's
-- dead letters (one transition: pending -> dead-lettered). If the entry is
-- no longer pending (another consumer reclaimed and finished it), nothing is
-- done.
--
-- KEYS[1]  STREAM  the stream the entry was read from
-- KEYS[2]  STREAM  the group's dead letters
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
-- The acknowledgement comes first: on a full server (maxmemory with
-- noeviction) Redis refuses a script's write that may add memory only
-- while the script has written nothing yet, and dead-lettering moves the
-- message rather than adding one.
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
local fields = {}
for i = 4, #ARGV do
  fields[#fields + 1] = ARGV[i]
end
redis.call('XADD', KEYS[2], '*', unpack(fields))
local dropped = 0
local cap = tonumber(ARGV[3])
if cap > 0 then
  dropped = redis.call('XTRIM', KEYS[2], 'MAXLEN', cap)
end
return {1, dropped}
