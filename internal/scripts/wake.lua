-- wake.lua: the prelude of the scripts that decide whether a new message
-- needs the mover woken (a schedule, a handler's retry). A mover looks at
-- the head of every lane it owns at least once a minute, however it is
-- configured (its probes and its sleeps are capped: see the engine's
-- maxLookGap), and a lane without a live mover is looked at by the next
-- one that starts. So a message due at least WAKE_HORIZON_MS after the
-- call is found by a look before it is due, and the call spares the head
-- check (a ZCOUNT) and the wake-up. The constant is scripts.WakeHorizon.
local WAKE_HORIZON_MS = 90000

-- wake_near reports whether a message due at due (ms) is close enough to
-- now (ms) for its call to check the head and wake the mover.
local function wake_near(due, now)
  return due - now < WAKE_HORIZON_MS
end
