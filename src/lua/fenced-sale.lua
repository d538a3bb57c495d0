#!lua
-- fenced-sale.lua: the stock write of the fenced strategy. The write is
-- applied only if the caller's token is still the newest one issued, so a
-- holder that lost its lock (paused past its TTL while another owner took
-- it) cannot write what it read before. All or nothing, as sale-write.lua:
-- key types are checked first. Its events carry written_us (Redis's clock
-- when it applied) and owned (whether the lock was still the caller's).
--
-- The fence alone is not enough where other locks share the key: owner-lua,
-- handoff or a hash lock can take the expired key without bumping the
-- counter, so a stale holder's token would still be the newest. The write
-- therefore also needs the lock to be the caller's (the guard), and the
-- stock to be the one it read (ARGV[2] + 1): one set under the hold (a
-- reset, a sale under another lock or none) is never overwritten.
--
-- A lock that lives in another store (ZooKeeper, MySQL) brings its token
-- from there (a czxid, a SEQUENCE value): KEYS[3] then keeps the newest
-- token written so far, and a newer one is recorded as it writes. There is
-- no lock key here to look at (ARGV[6] is empty, and the events carry no
-- owned): the token and the stock check do the job.
-- The arguments by name (src/sale.c fills them by these names):
-- KEYS: stock ledger fence families history lock
-- ARGV: token new_stock entry family cap owner, then the history
-- KEYS[1] stock, KEYS[2] ledger list, KEYS[3] fencing counter (or the
-- newest token written, for a store's tokens), KEYS[4] families set,
-- KEYS[5] history stream, KEYS[6] lock
-- ARGV[1] token, ARGV[2] new stock, ARGV[3] ledger entry "unit|order|port",
-- ARGV[4] lock family, ARGV[5] history cap (0: no history),
-- ARGV[6] the lock's owner value ('': the lock is not in Redis),
-- ARGV[7 ..] history fields and values
-- Returns 1 when written; an error STALE naming both tokens; an error LOST
-- when the lock is no longer the caller's; an error CHANGED naming the
-- stock found (each refusal recorded in the history); or BADKEY.
local function is(key, a, b)
  local kind = redis.call('type', key)['ok']
  return kind == a or kind == b
end
local cap = tonumber(ARGV[5])
if not is(KEYS[1], 'string') or not is(KEYS[2], 'none', 'list') or
   not is(KEYS[4], 'none', 'set') or (cap > 0 and not is(KEYS[5], 'none', 'stream')) then
  return redis.error_reply('BADKEY a key of ' .. KEYS[1] .. ' has the wrong type')
end
local unit, order = string.match(ARGV[3], '^([^|]*)|([^|]*)|')
local tail = {}
local looked = ARGV[6] ~= ''
local mine = not looked or redis.pcall('get', KEYS[6]) == ARGV[6] -- another type: an error
if cap > 0 then
  local t = redis.call('time')
  tail = {'unit', unit, 'order', order, 'written_us',
          t[1] .. string.format('%06d', tonumber(t[2]))}
  if looked then
    tail[#tail + 1] = 'owned'
    tail[#tail + 1] = mine and '1' or '0'
  end
  for i = 7, #ARGV do tail[#tail + 1] = ARGV[i] end
end
local function event(outcome)
  if cap > 0 then
    redis.call('xadd', KEYS[5], 'MAXLEN', '~', cap, '*', 'outcome', outcome, unpack(tail))
  end
end
local newest = tonumber(redis.call('get', KEYS[3]) or '0')
if tonumber(ARGV[1]) < newest then
  event('stale_token')
  return redis.error_reply('STALE token ' .. ARGV[1] .. ' is older than token ' .. newest)
end
if not mine then
  event('lock_lost')
  return redis.error_reply('LOST the lock ' .. KEYS[6] .. ' was no longer ' .. ARGV[6] ..
                           "'s when the write arrived (expired, reset, or taken by a lock " ..
                           'that does not bump the fence); token ' .. ARGV[1] .. ' alone proves nothing')
end
local now = redis.call('get', KEYS[1])
if tonumber(now) ~= tonumber(ARGV[2]) + 1 then
  event('stock_changed')
  return redis.error_reply('CHANGED the stock ' .. KEYS[1] .. ' is ' .. tostring(now) ..
                           ', not the ' .. (tonumber(ARGV[2]) + 1) .. ' this hold read')
end
if tonumber(ARGV[1]) > newest then redis.call('set', KEYS[3], ARGV[1]) end
redis.call('set', KEYS[1], ARGV[2])
redis.call('rpush', KEYS[2], ARGV[3])
redis.call('sadd', KEYS[4], ARGV[4])
event('sold')
return 1
