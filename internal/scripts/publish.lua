-- publish.lua: the prelude of every script that publishes on a lane's
-- channel. A channel argument that starts with a space names a shard
-- channel (a sharded queue's lanes; no valid channel name contains a
-- space): the rest is published with SPUBLISH, which a Cluster delivers
-- from the node that holds the shard instead of relaying it to every node,
-- or with PUBLISH on a server without shard channels (miniredis). Any other
-- channel is published with PUBLISH. Any other failure of SPUBLISH (the
-- caller's ACL refuses the command or the channel) is the script's error:
-- a PUBLISH would reach none of the shard channel's subscribers.
local function publish(ch, msg)
  if string.byte(ch, 1) == 32 then
    ch = string.sub(ch, 2)
    local r = redis.pcall('SPUBLISH', ch, msg)
    if type(r) ~= 'table' or not r['err'] then
      return
    end
    if not string.find(r['err'], 'Unknown Redis command', 1, true) then
      error(r)
    end
  end
  redis.call('PUBLISH', ch, msg)
end
