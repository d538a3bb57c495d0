-- rw-write-unlock.lua: Redisson's RedissonWriteLock release. When reads
-- taken by the writer itself remain, the lock turns into a read lock.
-- KEYS[1] lock key, KEYS[2] channel redisson_rwlock:{<lock key>}
-- ARGV[1] unlock message (1, Redisson's READ_UNLOCK_MESSAGE: it wakes every
-- waiting reader, not one), ARGV[2] lease in ms, ARGV[3] owner id .. ':write'
-- Returns nil when the caller is not the writer (or the lock is gone), 0
-- when a count remains, 1 when the write lock was given up.
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  -- Gone (expired, or lost in a failover). Redisson wakes the waiters and
  -- answers 1; the waking is kept, but nil tells the caller it was not ours.
  redis.call('publish', KEYS[2], ARGV[1])
  return nil
end
if mode ~= 'write' or redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  return nil
end
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if counter > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 0
end
redis.call('hdel', KEYS[1], ARGV[3])
if redis.call('hlen', KEYS[1]) == 1 then
  redis.call('del', KEYS[1])
  redis.call('publish', KEYS[2], ARGV[1])
else
  redis.call('hset', KEYS[1], 'mode', 'read')
end
return 1
