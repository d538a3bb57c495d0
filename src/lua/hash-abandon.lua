-- hash-abandon.lua: gives up every hold of one owner of a hash lock at once,
-- checked against the owner. The lock core sends it after a lost reply, when
-- it cannot know how many holds Redis counted. Like Redisson's forced unlock
-- it deletes the lock and publishes the unlock message, but only when the
-- owner holds it.
-- KEYS[1] lock key, KEYS[2] its unlock channel
-- ARGV[1] owner id, ARGV[2] unlock message
-- Returns 1 when the owner's lock was deleted, 0 when it held none.
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[2])
return 1
