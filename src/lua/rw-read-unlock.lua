-- rw-read-unlock.lua: Redisson's RedissonReadLock release. The lock's lease
-- becomes the longest lease of the reads still held; the last one deletes it
-- and wakes waiting writers.
-- KEYS[1] lock key, KEYS[2] channel redisson_rwlock:{<lock key>}
-- KEYS[3] this reader's timeout prefix, KEYS[4] key prefix {<lock key>}
-- ARGV[1] unlock message (0), ARGV[2] owner id
-- Returns nil when the caller holds no read (or the lock is gone), 0 when
-- others still hold it, 1 when the lock was deleted.
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
  -- Gone (expired, or lost in a failover). Redisson wakes the waiters and
  -- answers 1; the waking is kept, but nil tells the caller it was not ours.
  redis.call('publish', KEYS[2], ARGV[1])
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return nil
end
local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if counter == 0 then
  redis.call('hdel', KEYS[1], ARGV[2])
end
redis.call('del', KEYS[3] .. ':' .. (counter + 1))
if redis.call('hlen', KEYS[1]) > 1 then
  local longest = -3
  for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
    local n = tonumber(redis.call('hget', KEYS[1], field))
    if type(n) == 'number' then
      for i = n, 1, -1 do
        local remain = redis.call('pttl', KEYS[4] .. ':' .. field .. ':rwlock_timeout:' .. i)
        longest = math.max(remain, longest)
      end
    end
  end
  if longest > 0 then
    redis.call('pexpire', KEYS[1], longest)
    return 0
  end
  if mode == 'write' then
    return 0
  end
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
return 1
