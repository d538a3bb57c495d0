-- atomic-sale.lua: the lock-free sale, check-and-decrement in one script.
-- KEYS[1] stock key, KEYS[2] ledger list, KEYS[3] families set
-- ARGV[1] order id, ARGV[2] port of the selling instance, ARGV[3] the family
-- recorded for the audit ("none": no lock)
-- Returns {1, remaining, unit} when a unit was sold, {0, stock} when sold
-- out, or an error reply when the stock is missing or not a number.
local raw = redis.call('GET', KEYS[1])
if not raw then
  return redis.error_reply('BADSTOCK stock key ' .. KEYS[1] .. ' does not exist')
end
local stock = tonumber(raw)
if not stock or stock ~= math.floor(stock) then
  return redis.error_reply('BADSTOCK stock key ' .. KEYS[1] .. ' holds a non-integer')
end
if stock <= 0 then
  return {0, stock}
end
local ledger = redis.call('TYPE', KEYS[2])['ok']
local families = redis.call('TYPE', KEYS[3])['ok']
if (ledger ~= 'none' and ledger ~= 'list') or (families ~= 'none' and families ~= 'set') then
  return redis.error_reply('BADKEY ' .. KEYS[2] .. ' or ' .. KEYS[3] .. ' has the wrong type')
end
redis.call('SET', KEYS[1], stock - 1)
redis.call('RPUSH', KEYS[2], stock .. '|' .. ARGV[1] .. '|' .. ARGV[2])
redis.call('SADD', KEYS[3], ARGV[3])
return {1, stock - 1, stock}
