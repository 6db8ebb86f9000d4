-- release.lua: give up a mover lease held by the caller, so a standby mover
-- can take over at once instead of waiting for the lease to expire.
--
-- KEYS[1]  STRING  the lane's mover lease
-- ARGV[1]  the caller's lease token
-- ARGV[2]  the lane's wake channel: "0" is published so standbys retry now
--
-- Returns 1 if the lease was released, 0 if the caller did not hold it.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  publish(ARGV[2], '0')
  return 1
end
return 0
