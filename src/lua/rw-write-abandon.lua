-- rw-write-abandon.lua: gives up every write hold of one owner of a
-- Redisson RReadWriteLock at once, checked against the owner (after a lost
-- reply). As the write unlock, it leaves the lock to the owner's own reads
-- when there are any, else deletes it and wakes every waiter.
-- KEYS[1] lock key, KEYS[2] channel redisson_rwlock:{<lock key>}
-- ARGV[1] owner id .. ':write', ARGV[2] unlock message (1: wake all)
-- Returns 1 when the owner's write hold was given up, 0 when it had none.
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('hdel', KEYS[1], ARGV[1])
if redis.call('hlen', KEYS[1]) <= 1 then
  redis.call('del', KEYS[1])
  redis.call('publish', KEYS[2], ARGV[2])
else
  redis.call('hset', KEYS[1], 'mode', 'read')
end
return 1
