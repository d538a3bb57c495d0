#!lua
-- atomic-sale.lua: the lock-free sale, check-and-decrement in one script.
-- KEYS[1] stock key, KEYS[2] ledger list, KEYS[3] families set
-- ARGV[1] order id, ARGV[2] port of the selling instance, ARGV[3] the family
-- recorded for the audit ("none": no lock)
-- Returns {1, remaining, unit} when a unit was sold, {0, stock} when sold
-- out, or an error reply when the stock is missing or not a number, or
-- BADKEY when the ledger is not a list.
-- All or nothing without a TYPE call per key (they cost this hot script a
-- tenth of its speed): the ledger entry is the first write, and the only
-- one that can fail, on a ledger of the wrong type, with nothing written
-- yet. SET cannot fail. The families set is the audit's note of who sold:
-- if it is not a set, the sale stands (stock and ledger agree), and the
-- audit, which reads it, answers 503 with Redis's WRONGTYPE.
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
local pushed = redis.pcall('RPUSH', KEYS[2], stock .. '|' .. ARGV[1] .. '|' .. ARGV[2])
if type(pushed) == 'table' and pushed.err then
  return redis.error_reply('BADKEY ' .. KEYS[2] .. ' is not a list')
end
redis.call('SET', KEYS[1], stock - 1)
redis.pcall('SADD', KEYS[3], ARGV[3])
return {1, stock - 1, stock}
