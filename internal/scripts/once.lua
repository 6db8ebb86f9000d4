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
-- take to send the call again. The first run stores its reply there; a
-- later run of the same call returns the stored reply and does nothing
-- else. A call without a token runs as before.
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

-- once_seen returns the reply of the call's first run, or nil when this
-- is the first (or the call has no token). Replies are integers or flat
-- arrays of integers, stored as "n<int>" or "a<int>,<int>,...".
local function once_seen()
  if not ONCE_KEY then
    return nil
  end
  local prev = redis.call('GET', ONCE_KEY)
  if not prev then
    return nil
  end
  if string.sub(prev, 1, 1) == 'n' then
    return tonumber(string.sub(prev, 2))
  end
  local out, n = {}, 0
  for v in string.gmatch(string.sub(prev, 2), '[^,]+') do
    n = n + 1
    out[n] = tonumber(v)
  end
  return out
end

-- once_done stores reply as the call's and returns it.
local function once_done(reply)
  if ONCE_KEY then
    local s
    if type(reply) == 'table' then
      -- Joined in pieces of 200: one concat of thousands of parts
      -- overflows some Lua implementations' stack (miniredis's).
      local pieces, parts = {}, {}
      for i = 1, #reply do
        parts[#parts + 1] = string.format('%d', reply[i])
        if #parts == 200 or i == #reply then
          pieces[#pieces + 1] = table.concat(parts, ',')
          parts = {}
        end
      end
      s = 'a' .. table.concat(pieces, ',')
    else
      s = 'n' .. string.format('%d', reply)
    end
    redis.call('SET', ONCE_KEY, s, 'PX', ONCE_TTL)
  end
  return reply
end
