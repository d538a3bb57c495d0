-- rw-read-lock.lua: Redisson's RedissonReadLock acquire. Readers share the
-- lock; a reader also gets in when the writer is itself (write then read).
-- One addition to Redisson's text: a key that is not a read-write lock (a
-- string or hash lock of another strategy, which Redisson's script would
-- take for free, or fail on) counts as held by a writer.
-- KEYS[1] lock key (hash: mode = read|write, one field per holder)
-- KEYS[2] this reader's timeout prefix {<lock key>}:<owner>:rwlock_timeout
-- ARGV[1] lease in ms, ARGV[2] owner id, ARGV[3] owner id .. ':write'
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
  redis.call('hset', KEYS[1], 'mode', 'read')
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('set', KEYS[2] .. ':1', 1)
  redis.call('pexpire', KEYS[2] .. ':1', ARGV[1])
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if mode == 'read' or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
  local n = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  local key = KEYS[2] .. ':' .. n
  redis.call('set', key, 1)
  redis.call('pexpire', key, ARGV[1])
  local remain = redis.call('pttl', KEYS[1])
  redis.call('pexpire', KEYS[1], math.max(remain, tonumber(ARGV[1])))
  return nil
end
return redis.call('pttl', KEYS[1])
