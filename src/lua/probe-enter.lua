-- probe-enter.lua: the mutual-exclusion probe's entry into a critical
-- section. Holders are fields of a hash; each names the alive key of its
-- process, which that process's heartbeat keeps for about a second. Entries
-- of processes whose alive key is gone (killed inside the section) are
-- dropped first, so a dead holder is not counted against the living.
-- KEYS[1] holders hash (<item>:holders), KEYS[2] violations counter
-- ARGV[1] this sale's id, ARGV[2] this process's alive key
-- (The alive keys are read from the hash's values: a single Redis only.)
-- Returns the number of holders inside, this one included; above 1, the
-- violations counter was incremented.
local entries = redis.call('HGETALL', KEYS[1])
for i = 1, #entries, 2 do
  if redis.call('EXISTS', entries[i + 1]) == 0 then
    redis.call('HDEL', KEYS[1], entries[i])
  end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
local n = redis.call('HLEN', KEYS[1])
if n > 1 then
  redis.call('INCR', KEYS[2])
end
return n
