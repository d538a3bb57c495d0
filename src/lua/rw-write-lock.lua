-- rw-write-lock.lua: Redisson's RedissonWriteLock acquire. One writer, no
-- readers; the writer may re-enter. As in rw-read-lock.lua, a key that is
-- not a read-write lock counts as held.
-- KEYS[1] lock key
-- ARGV[1] lease in ms, ARGV[2] owner id .. ':write'
-- Returns nil when acquired, else the lock's PTTL.
local kind = redis.call('type', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'hash' then
  return redis.call('pttl', KEYS[1])
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false and kind == 'hash' then
  return redis.call('pttl', KEYS[1])
end
if mode == false then
  redis.call('hset', KEYS[1], 'mode', 'write')
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  local current = redis.call('pttl', KEYS[1])
  redis.call('pexpire', KEYS[1], current + ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])
