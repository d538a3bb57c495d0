-- hash-unlock.lua: Redisson's RedissonLock.unlockInnerAsync.
-- KEYS[1] lock key, KEYS[2] channel redisson_lock__channel:{<lock key>}
-- ARGV[1] unlock message (0), ARGV[2] lease in ms, ARGV[3] owner id
-- Returns nil when the caller holds no count (the lock was lost), 0 when a
-- count remains (the lease is extended), 1 when the lock was deleted and
-- the unlock message published to waiters.
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  return nil
end
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if counter > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 0
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
return 1
