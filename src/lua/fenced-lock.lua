-- fenced-lock.lua: SET NX PX plus a fencing token in one step.
-- KEYS[1] lock key, KEYS[2] fencing counter (<lock key>:fence)
-- ARGV[1] owner id, ARGV[2] TTL in ms
-- Returns the new token (an integer above 0) when acquired, or the lock's
-- remaining PTTL as a negative number (-1 when it has none) when busy.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 1 then return -1 end
return -pttl
