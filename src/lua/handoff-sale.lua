#!lua
-- handoff-sale.lua: the commit of a handoff sale, in one step: it checks
-- that the lock is still the caller's (its key holds the caller's owner id,
-- so its lease has not run out), writes the stock, the ledger entry, the
-- family and the history event, and hands the lock on to the first live
-- waiter with the new stock (the grant of handoff-lock.lua, repeated here:
-- a script cannot call another; it passes over the waiters of a process
-- that no longer listens), or deletes it when nobody waits. The next
-- holder reads nothing: the grant message carries the stock.
--
-- When the lock is no longer the caller's, nothing is written, the event
-- says lock_lost (owned 0), and, if the lock is gone, the first waiter is
-- granted it. All or nothing as sale-write.lua: the history key's type is
-- checked first (when there is a history), and the ledger entry is the
-- first write, the only one that can fail on a key of the wrong type (then
-- nothing is written, and the lock is still handed on). Every event carries
-- written_us, Redis's own clock when it applied.
--
-- Riders: threads of the caller's process that came for the lock while it
-- held it are queued by this script, at the tail, before the grant (so
-- they cost no script of their own); on success only: otherwise they queue
-- themselves. A grant to a thread of the caller's own process is not
-- published: the script answers it instead, and the caller hands it over
-- in-process (lock_type.handed), which spares the subscriber's wake-up.
-- Should that answer be lost, the grantee learns of its grant by its
-- re-check.
--
-- The arguments by name (src/sale.c fills them by these names):
-- KEYS: stock ledger families history lock queue
-- ARGV: new_stock family cap owner lease channel_prefix entry, then the history and the riders
-- KEYS[1] stock, KEYS[2] ledger list, KEYS[3] families set,
-- KEYS[4] history stream, KEYS[5] lock, KEYS[6] queue
-- ARGV[1] new stock, ARGV[2] lock family, ARGV[3] history cap (0: none),
-- ARGV[4] owner id, ARGV[5] lease in ms, ARGV[6] channel prefix,
-- ARGV[7] ledger entry "unit|order|port", ARGV[8 .. #ARGV-3n-1] history
-- fields and values, then n riders as three values each (wait in ms,
-- owner id, carried key), ARGV[#ARGV] n
-- Returns, when written, "<Redis time in us>", followed by " <owner> <us>
-- <=stock>" when the lock went to a thread of the caller's process (the
-- grant, not published); an error LOST or CHANGED (nothing written, no
-- rider queued, the lock handed on); or an error BADKEY naming the key of the wrong type (nothing
-- written, no rider queued, the lock handed on).
local key, queue, owner, lease, prefix = KEYS[5], KEYS[6], ARGV[4], ARGV[5], ARGV[6]
local cap = tonumber(ARGV[3])
local nriders = tonumber(ARGV[#ARGV])
local last_field = #ARGV - 3 * nriders - 1
local t = redis.call('time')
local now_us = t[1] * 1000000 + t[2]
local now_ms = math.floor(now_us / 1000)

local function process(id) return string.match(id, '^[^:]*') end

-- Whether the process of waiter id is the caller's, or listens on its
-- channel (handoff-lock.lua: a waiter of a process that died is passed
-- over, not granted a lease it cannot use).
local function listens(id, local_ok)
  if local_ok and process(id) == process(owner) then return true end
  return redis.call('pubsub', 'numsub', prefix .. process(id))[2] > 0
end

-- Grants the lock to the first live waiter (its deadline not passed, its
-- process listening, or it polls); returns its grant message when local
-- is set and the waiter is of the caller's process (not published), else
-- true; nil when nobody waits.
local function grant(stock, local_ok)
  while true do
    local e = redis.call('lpop', queue)
    if not e then return nil end
    local deadline, polls, next, ck = string.match(e, '^(%d+)(p?)|([^|]*)|(.*)$')
    if deadline and tonumber(deadline) > now_ms and (polls == 'p' or listens(next, local_ok)) then
      local v = '-'
      if ck == KEYS[1] and stock then
        v = '=' .. stock
      elseif ck ~= '' then
        local got = redis.pcall('get', ck)
        if type(got) == 'string' then v = '=' .. got end
      end
      redis.call('set', key, next, 'PX', lease)
      local msg = next .. ' ' .. string.format('%.0f', now_us) .. ' ' .. v
      if local_ok and process(next) == process(owner) then return msg end
      redis.call('publish', prefix .. process(next), msg)
      return true
    end
  end
end

local function event(mine, ...)
  if cap <= 0 then return end
  local a = {'xadd', KEYS[4], 'MAXLEN', '~', cap, '*'}
  for _, v in ipairs({...}) do a[#a + 1] = v end
  a[#a + 1] = 'written_us'
  a[#a + 1] = t[1] .. string.format('%06d', tonumber(t[2]))
  a[#a + 1] = 'owned'
  a[#a + 1] = mine and '1' or '0'
  for i = 8, last_field do a[#a + 1] = ARGV[i] end
  redis.call(unpack(a))
end

-- The current stock, when the lock is handed on without a write.
local function stock_now()
  local v = redis.pcall('get', KEYS[1])
  return type(v) == 'string' and v or nil
end

local holder = redis.pcall('get', key)
if holder ~= owner then
  local history_ok = cap <= 0 or ({none = 1, stream = 1})[redis.call('type', KEYS[4])['ok']]
  if history_ok then event(false, 'outcome', 'lock_lost') end
  if holder == false then grant(stock_now()) end
  return redis.error_reply('LOST the lock ' .. key .. ' was no longer ' .. owner ..
                           "'s when the write arrived")
end

if cap > 0 and not ({none = 1, stream = 1})[redis.call('type', KEYS[4])['ok']] then
  if not grant(stock_now()) then redis.call('del', key) end
  return redis.error_reply('BADKEY ' .. KEYS[4] .. ' is not a stream')
end
-- The stock must be the one this hold was handed (ARGV[1] + 1): one set
-- under it (a reset, a sale under another lock or none) is never
-- overwritten; the lock goes on with the stock as it is.
local found = stock_now()
if found == nil then
  if not grant(nil) then redis.call('del', key) end
  return redis.error_reply('BADKEY ' .. KEYS[1] .. ' is missing or not a string')
end
if tonumber(found) ~= tonumber(ARGV[1]) + 1 then
  event(true, 'outcome', 'stock_changed')
  if not grant(found) then redis.call('del', key) end
  return redis.error_reply('CHANGED the stock ' .. KEYS[1] .. ' is ' .. tostring(found) ..
                           ', not the ' .. (tonumber(ARGV[1]) + 1) .. ' this hold read')
end
local pushed = redis.pcall('rpush', KEYS[2], ARGV[7])
if type(pushed) == 'table' then
  if not grant(stock_now()) then redis.call('del', key) end
  return redis.error_reply('BADKEY ' .. KEYS[2] .. ' is not a list')
end
redis.call('set', KEYS[1], ARGV[1])
if nriders > 0 then
  local life, riders = 0, {}
  for i = last_field + 1, #ARGV - 1, 3 do
    local wait = tonumber(ARGV[i])
    riders[#riders + 1] = (now_ms + wait) .. '|' .. ARGV[i + 1] .. '|' .. ARGV[i + 2]
    if wait > life then life = wait end
  end
  redis.call('rpush', queue, unpack(riders))
  life = life + tonumber(lease)
  if redis.call('pttl', queue) < life then redis.call('pexpire', queue, life) end
end
-- The families set is the audit's note of who sold: if it is not a set,
-- the sale stands (stock and ledger agree) and the audit says WRONGTYPE.
redis.pcall('sadd', KEYS[3], ARGV[2])
if cap > 0 then
  local unit, order = string.match(ARGV[7], '^([^|]*)|([^|]*)|')
  event(true, 'outcome', 'sold', 'unit', unit, 'order', order)
end
local handed = grant(ARGV[1], true)
if not handed then redis.call('del', key) end
local now = string.format('%.0f', now_us)
if type(handed) == 'string' then return now .. ' ' .. handed end
return now
