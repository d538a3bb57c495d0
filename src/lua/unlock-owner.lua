-- unlock-owner.lua: compare-and-delete, the owner-lua and fenced release.
-- KEYS[1] lock key
-- ARGV[1] owner id of the caller
-- Returns 1 when the caller's lock was deleted, 0 when the key is gone or
-- belongs to another owner (then nothing is touched).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
