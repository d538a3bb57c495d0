#!lua
-- fence-raise.lua: the read of a holder whose fencing token comes from
-- another store (a ZooKeeper czxid, a MariaDB counter value). Redis sees
-- such a token only when it arrives: at the write, fenced-sale.lua records
-- the newest one written. A holder that read and holds on has not shown its
-- token yet, and a stale holder's write that lands meanwhile would pass the
-- fence, inside the new holder's hold. So the read first raises the fence
-- to its token (never lowers it): from then on an older token is refused.
-- The arguments by name (src/sale.c fills them by these names):
-- KEYS: fence
-- ARGV: token
-- KEYS[1] the newest token Redis has seen for the lock (a string)
-- ARGV[1] this holder's token
-- Returns the newest token before this one (0: none).
local newest = tonumber(redis.call('get', KEYS[1]) or '0')
if tonumber(ARGV[1]) > newest then redis.call('set', KEYS[1], ARGV[1]) end
return newest
