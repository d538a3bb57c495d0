-- fenced-sale.lua: the stock write of the fenced strategy. The write is
-- applied only if the caller's token is still the newest one issued, so a
-- holder that lost its lock (paused past its TTL while another owner took
-- it) cannot write what it read before.
-- KEYS[1] stock key, KEYS[2] ledger list, KEYS[3] fencing counter
-- ARGV[1] token, ARGV[2] new stock, ARGV[3] ledger entry
-- Returns 1 when written, or an error STALE naming both tokens.
local newest = tonumber(redis.call('GET', KEYS[3]) or '0')
if tonumber(ARGV[1]) < newest then
  return redis.error_reply('STALE token ' .. ARGV[1] .. ' is older than token ' .. newest)
end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('RPUSH', KEYS[2], ARGV[3])
return 1
