-- once.lua: the prelude of the producer's scripts whose effect depends on
-- what they find (schedule: create what is not waiting; cancel: remove what
-- is; reschedule: move what is), so that a call runs its effect once
-- however many times it is sent. go-redis sends a command again when its
-- reply was lost (a connection killed or timed out after Redis ran it;
-- MaxRetries): a second run would find the first run's work, or its
-- promotion, and act again (a message created twice, a cancel reported
-- false for the message it removed).
--
-- A call with a token has one key more than the script's own, last: the
-- token's key (under the lane's hash tag, so in its slot), and one ARGV
-- more, last: the key's time to live in ms, longer than the client may
-- take to send the call again. The first run stores there what it needs to
-- give the same reply again (a few bytes: see each script); a later run of
-- the same call rebuilds that reply and changes nothing. A call without a
-- token runs as before.
local ONCE_KEY, ONCE_TTL

-- once_args notes the token of a script of nkeys keys of its own and
-- returns the number of its own ARGV.
local function once_args(nkeys)
  if #KEYS > nkeys then
    ONCE_KEY, ONCE_TTL = KEYS[#KEYS], ARGV[#ARGV]
    return #ARGV - 1
  end
  return #ARGV
end

-- once_seen returns what the call's first run stored, or nil when this is
-- its first run (or the call has no token). pattern is the form the script
-- stores: a value of another form (not written by this library) counts as
-- none, so that no bytes found there can make the call fail; the first
-- run then overwrites it.
local function once_seen(pattern)
  if not ONCE_KEY then
    return nil
  end
  local v = redis.call('GET', ONCE_KEY)
  if v and string.find(v, pattern) then
    return v
  end
  return nil
end

-- once_join is table.concat(parts, sep), in pieces of 200: one concat of
-- thousands of parts overflows some Lua implementations' stack
-- (miniredis's).
local function once_join(parts, sep)
  local pieces, n = {}, #parts
  for i = 1, n, 200 do
    pieces[#pieces + 1] = table.concat(parts, sep, i, math.min(i + 199, n))
  end
  return table.concat(pieces, sep)
end

-- once_store stores s as what the call's first run did.
local function once_store(s)
  if ONCE_KEY then
    redis.call('SET', ONCE_KEY, s, 'PX', ONCE_TTL)
  end
end

-- once_claim is once_seen and once_store in one command, for a script
-- whose record is known before its effect: it stores record as what the
-- call's first run did and returns nil, or, when a first run stored its
-- record already, returns that and stores nothing. The caller must have
-- done whatever can fail before it (a command on each key of its own, so
-- that a key of the wrong type fails the call before the record is
-- stored): a record stored by a run that then failed would make a later
-- run of the call report what was never done. A value of another form is
-- replaced, as once_store would.
local function once_claim(pattern, record)
  if not ONCE_KEY then
    return nil
  end
  local v = redis.call('SET', ONCE_KEY, record, 'NX', 'GET', 'PX', ONCE_TTL)
  if v and string.find(v, pattern) then
    return v
  end
  if v then
    redis.call('SET', ONCE_KEY, record, 'PX', ONCE_TTL)
  end
  return nil
end
