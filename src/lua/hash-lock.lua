-- hash-lock.lua: Redisson's RedissonLock.tryLockInnerAsync, unchanged in
-- effect, so a Redisson client and this service contend for the same lock.
-- KEYS[1] lock key (a hash: field = owner id, value = hold count)
-- ARGV[1] lease in ms, ARGV[2] owner id
-- Returns nil when acquired (first hold or reentry), else the lock's PTTL.
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])
