-- rw-read-abandon.lua: gives up every read hold of one owner of a Redisson
-- RReadWriteLock at once, checked against the owner (after a lost reply):
-- its field and its per-hold timeout keys go; the last reader deletes the
-- lock and wakes a waiting writer.
-- KEYS[1] lock key, KEYS[2] channel redisson_rwlock:{<lock key>}
-- KEYS[3] the owner's timeout prefix {<lock key>}:<owner>:rwlock_timeout
-- ARGV[1] owner id, ARGV[2] unlock message
-- Returns 1 when the owner held reads, 0 when it held none.
local n = tonumber(redis.call('hget', KEYS[1], ARGV[1]))
if not n then
  return 0
end
for i = 1, n do
  redis.call('del', KEYS[3] .. ':' .. i)
end
redis.call('hdel', KEYS[1], ARGV[1])
if redis.call('hlen', KEYS[1]) <= 1 then
  redis.call('del', KEYS[1])
  redis.call('publish', KEYS[2], ARGV[2])
end
return 1
