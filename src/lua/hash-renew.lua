-- hash-renew.lua: Redisson's renewExpirationAsync, the watchdog's renewal.
-- KEYS[1] lock key
-- ARGV[1] lease in ms, ARGV[2] owner id
-- Returns 1 when the caller still holds the lock and its lease was reset,
-- 0 when the lock is gone or held by another owner.
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('pexpire', KEYS[1], ARGV[1])
  return 1
end
return 0
