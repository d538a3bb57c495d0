-- rw-lock.lua: Redisson's RedissonReadLock and RedissonWriteLock acquires,
-- in one script: a read when KEYS[2] is given, else the write. Readers
-- share the lock, and a reader also gets in when the writer is itself
-- (write then read); one writer excludes readers and other writers, and
-- may re-enter. One addition to Redisson's text: a key that is not a
-- read-write lock (a string or hash lock of another strategy, which
-- Redisson's script would take for free, or fail on) counts as held by a
-- writer.
-- KEYS[1] lock key (hash: mode = read|write, one field per holder)
-- KEYS[2] (a read) this reader's timeout prefix
--         {<lock key>}:<owner>:rwlock_timeout
-- ARGV[1] lease in ms, ARGV[2] the hold's field (the owner id for a read,
-- owner id .. ':write' for the write), ARGV[3] owner id .. ':write'
-- Returns nil when acquired, else the lock's PTTL.
local kind = redis.call('type', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'hash' then
  return redis.call('pttl', KEYS[1])
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false and kind == 'hash' then
  return redis.call('pttl', KEYS[1])
end
local read = KEYS[2] ~= nil
if mode == false then
  redis.call('hset', KEYS[1], 'mode', read and 'read' or 'write')
  redis.call('hset', KEYS[1], ARGV[2], 1)
  if read then
    redis.call('set', KEYS[2] .. ':1', 1)
    redis.call('pexpire', KEYS[2] .. ':1', ARGV[1])
  end
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
local writer = mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1
if read and (mode == 'read' or writer) then
  local n = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  local key = KEYS[2] .. ':' .. n
  redis.call('set', key, 1)
  redis.call('pexpire', key, ARGV[1])
  local remain = redis.call('pttl', KEYS[1])
  redis.call('pexpire', KEYS[1], math.max(remain, tonumber(ARGV[1])))
  return nil
end
if not read and writer then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  local current = redis.call('pttl', KEYS[1])
  redis.call('pexpire', KEYS[1], current + ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])
