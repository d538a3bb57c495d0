#!lua
-- sale-write.lua: the write of a locked sale, all or nothing. It sets the
-- new stock, appends one ledger entry per unit sold, records the lock
-- family the stock was sold under, and appends one history event per unit.
-- Every key's type is checked before anything is written, so a ledger or
-- history key of the wrong type cannot leave the stock decremented without
-- its entries; the shebang makes Redis refuse it whole when out of memory.
--
-- The lock is looked at in the same step as the write (the guard): when
-- ARGV[4] names how its owner is found, the script sees whether the lock
-- is still ARGV[5]'s as the write applies. With ARGV[6] = 1 (the types
-- that enforce their lease) a lock that is not the caller's any more gets
-- nothing written and the hold's event says lock_lost: a holder stalled
-- after its last check cannot write once its lock has gone. Otherwise the
-- write goes ahead and its events say what the script saw (owned 1 or 0).
-- Every event carries written_us, Redis's own clock when it applied.
--
-- A hold that enforces its lease also finds the stock it read (ARGV[1] + n):
-- any other value was set under it, by a reset or by a sale that took no
-- lock or another lock, and writing would overwrite it. Nothing is written,
-- the event says stock_changed, and the script answers CHANGED. (The steps
-- that do not enforce keep their flaw: they overwrite, and the audit
-- counts what they lost.)
--
-- The arguments by name (src/sale.c fills them by these names):
-- KEYS: stock ledger families history lock
-- ARGV: new_stock family cap guard owner enforce n, then the n entries and the history
-- KEYS[1] stock, KEYS[2] ledger list, KEYS[3] families set,
-- KEYS[4] history stream, KEYS[5] lock
-- ARGV[1] new stock, ARGV[2] lock family, ARGV[3] history cap (0: no history)
-- ARGV[4] guard: 'string' (the lock's value is the owner), 'hash' (the owner
-- is a field of it) or '' (not looked at), ARGV[5] the owner's value or field,
-- ARGV[6] 1: refuse the write when the lock is not the owner's
-- ARGV[7] n, ARGV[8 .. 7+n] ledger entries "unit|order|port"
-- ARGV[8+n ..] history fields and values shared by the n events
-- Returns n; an error LOST or CHANGED (nothing written, the event
-- recorded); or an error BADKEY naming the key of the wrong type.
local function is(key, a, b)
  local kind = redis.call('type', key)['ok']
  return kind == a or kind == b
end
-- (A lock key of another type answers an error table, never equal: not
-- the owner's.)
local function owned(kind, key, field)
  if kind == 'string' then
    return redis.pcall('get', key) == field
  elseif kind == 'hash' then
    return redis.pcall('hexists', key, field) == 1
  end
  return nil
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
local n = tonumber(ARGV[7])
-- The lock is looked at only when something needs it: the guard, or the
-- events' owned field. Each event's fields after its own (written_us, owned
-- and the shared ones) are built once, not per unit.
local mine = nil
if cap > 0 or ARGV[6] == '1' then mine = owned(ARGV[4], KEYS[5], ARGV[5]) end
local tail = {}
if cap > 0 then
  local t = redis.call('time')
  tail = {'written_us', t[1] .. string.format('%06d', tonumber(t[2]))}
  if mine ~= nil then
    tail[3] = 'owned'
    tail[4] = mine and '1' or '0'
  end
  for i = 8 + n, #ARGV do tail[#tail + 1] = ARGV[i] end
end
if mine == false and ARGV[6] == '1' then
  if cap > 0 then
    redis.call('xadd', KEYS[4], 'MAXLEN', '~', cap, '*', 'outcome', 'lock_lost', unpack(tail))
  end
  return redis.error_reply('LOST the lock ' .. KEYS[5] .. ' was no longer ' .. ARGV[5] ..
                           "'s when the write arrived")
end
if ARGV[6] == '1' then
  local now = redis.call('get', KEYS[1])
  if tonumber(now) ~= tonumber(ARGV[1]) + n then
    if cap > 0 then
      redis.call('xadd', KEYS[4], 'MAXLEN', '~', cap, '*', 'outcome', 'stock_changed', unpack(tail))
    end
    return redis.error_reply('CHANGED the stock ' .. KEYS[1] .. ' is ' .. tostring(now) ..
                             ', not the ' .. (tonumber(ARGV[1]) + n) .. ' this hold read')
  end
end
redis.call('set', KEYS[1], ARGV[1])
redis.call('rpush', KEYS[2], unpack(ARGV, 8, 7 + n))
redis.call('sadd', KEYS[3], ARGV[2])
if cap > 0 then
  for i = 8, 7 + n do
    local unit, order = string.match(ARGV[i], '^([^|]*)|([^|]*)|')
    redis.call('xadd', KEYS[4], 'MAXLEN', '~', cap, '*', 'outcome', 'sold', 'unit', unit,
               'order', order, unpack(tail))
  end
end
return n
