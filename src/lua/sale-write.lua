#!lua
-- sale-write.lua: the write of a locked sale, all or nothing. It sets the
-- new stock, appends one ledger entry per unit sold, records the lock
-- family the stock was sold under, and appends one history event per unit.
-- Every key's type is checked before anything is written, so a ledger or
-- history key of the wrong type cannot leave the stock decremented without
-- its entries; the shebang makes Redis refuse it whole when out of memory.
-- KEYS[1] stock, KEYS[2] ledger list, KEYS[3] families set, KEYS[4] history stream
-- ARGV[1] new stock, ARGV[2] lock family, ARGV[3] history cap (0: no history)
-- ARGV[4] n, ARGV[5 .. 4+n] ledger entries "unit|order|port"
-- ARGV[5+n ..] history fields and values shared by the n events
-- Returns n, or an error BADKEY naming the key of the wrong type.
local function is(key, ...)
  local kind = redis.call('type', key)['ok']
  for _, k in ipairs({...}) do
    if kind == k then return true end
  end
  return false
end
local cap = tonumber(ARGV[3])
if not is(KEYS[1], 'string') then
  return redis.error_reply('BADKEY ' .. KEYS[1] .. ' is not a string')
end
if not is(KEYS[2], 'none', 'list') then
  return redis.error_reply('BADKEY ' .. KEYS[2] .. ' is not a list')
end
if not is(KEYS[3], 'none', 'set') then
  return redis.error_reply('BADKEY ' .. KEYS[3] .. ' is not a set')
end
if cap > 0 and not is(KEYS[4], 'none', 'stream') then
  return redis.error_reply('BADKEY ' .. KEYS[4] .. ' is not a stream')
end
local n = tonumber(ARGV[4])
redis.call('set', KEYS[1], ARGV[1])
redis.call('rpush', KEYS[2], unpack(ARGV, 5, 4 + n))
redis.call('sadd', KEYS[3], ARGV[2])
if cap > 0 then
  for i = 5, 4 + n do
    local unit, order = string.match(ARGV[i], '^([^|]*)|([^|]*)|')
    redis.call('xadd', KEYS[4], 'MAXLEN', '~', cap, '*', 'outcome', 'sold', 'unit', unit,
               'order', order, unpack(ARGV, 5 + n))
  end
end
return n
