-- wake.lua: the prelude of the scripts that decide whether a new message
-- needs the mover woken (a schedule, a handler's retry). A mover looks at
-- the head of every lane it owns at least once a minute, however it is
-- configured (its probes and its sleeps are capped: see the engine's
-- maxLookGap), and a lane without a live mover is looked at by the next
-- one that starts. So a message due at least WAKE_HORIZON_MS after the
-- call is found by a look before it is due, and the call spares the head
-- check (a ZCOUNT) and the wake-up. The constant is scripts.WakeHorizon.
local WAKE_HORIZON_MS = 90000

-- wake_sooner returns, for a message to be added to the delayed set key,
-- due at due (ms; score: its ZADD score string) by a call at now (ms), how
-- many members are due no later (0: it becomes the head, and the mover
-- must be woken), or nil, with no command run, when it is due beyond the
-- horizon. ZCOUNT replies an integer, where reading the head's score would
-- have Redis format a double. Asked before the message is added.
local function wake_sooner(key, due, score, now)
  if due - now >= WAKE_HORIZON_MS then
    return nil
  end
  return redis.call('ZCOUNT', key, '-inf', score)
end
