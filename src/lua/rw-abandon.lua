-- rw-abandon.lua: gives up every hold of one owner of a Redisson
-- RReadWriteLock at once, checked against the owner (after a lost reply):
-- its reads when KEYS[3] is given, else its write. The field goes, and a
-- read's per-hold timeout keys with it. The last holder deletes the lock
-- and wakes the waiters; a writer whose own reads remain leaves them a
-- read lock, as the write unlock does.
-- KEYS[1] lock key, KEYS[2] channel redisson_rwlock:{<lock key>}
-- KEYS[3] (reads) the owner's timeout prefix {<lock key>}:<owner>:rwlock_timeout
-- ARGV[1] the holds' field (owner id for reads, owner id .. ':write' for
-- the write), ARGV[2] unlock message (0 for reads; 1 for the write: wake all)
-- Returns 1 when the owner held what it gives up, 0 when it held nothing.
local n = tonumber(redis.call('hget', KEYS[1], ARGV[1]))
if not n then
  return 0
end
if KEYS[3] then
  for i = 1, n do
    redis.call('del', KEYS[3] .. ':' .. i)
  end
end
redis.call('hdel', KEYS[1], ARGV[1])
if redis.call('hlen', KEYS[1]) <= 1 then
  redis.call('del', KEYS[1])
  redis.call('publish', KEYS[2], ARGV[2])
elseif not KEYS[3] then
  redis.call('hset', KEYS[1], 'mode', 'read')
end
return 1
