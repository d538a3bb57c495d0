-- handoff-lock.lua: the handoff lock, a fair FIFO lock in Redis that is
-- handed, with a value, straight to the next waiter.
--
-- The lock is a string key whose value is its holder's owner id, with a
-- lease (PX), so the other string locks of the ladder (owner-lua, fenced)
-- contend with it for the same key. Its waiters queue in a list beside it,
-- oldest first, each entry "<deadline ms, Redis clock>|<owner>|<carried
-- key>". Whoever ends a hold (a release here, or the holder's own write,
-- handoff-sale.lua) grants the lock to the first waiter whose deadline has
-- not passed: it sets the key to that owner with a fresh lease and
-- publishes "<owner> <Redis time, us> <=value of its carried key, or ->"
-- on the channel prefix followed by the owner's process part (its id up to
-- the ':'), where that process's subscriber hands it to the waiting thread
-- alone. A grant read that way costs the new holder no command at all.
-- Any script that finds the key gone while waiters are queued (a holder
-- whose lease ran out, a lock deleted by a reset) grants the first of them
-- the same way, so a waiter that died after its grant blocks the queue
-- only until its lease ends. handoff-sale.lua grants the same way.
--
-- A grant passes over a waiter whose process does not listen: nobody is
-- subscribed to its process channel (PUBSUB NUMSUB 0), because the process
-- died (Redis dropped its connections) or its subscriber is reconnecting.
-- A grant to it would hold the lock for a whole lease, unused; passed over,
-- a living waiter finds at its next re-check that it is no longer queued
-- and queues anew. A waiter that polls (its process could not subscribe)
-- is marked so in its entry, "<deadline>p|...", and is never passed over.
--
-- KEYS[1] lock, KEYS[2] queue, KEYS[3] the caller's carried key (optional)
-- ARGV[1] mode, ARGV[2] owner id, ARGV[3] lease in ms, ARGV[4] channel
-- prefix, ARGV[5] (acquire, check, ensure) the caller's wait left in ms,
-- ARGV[6] (the same) '0' when the caller polls instead of listening
-- Modes and what they return:
--   acquire  free and nobody queued: the lock is the caller's. Held by the
--            caller already: its lease is renewed (re-entry). Else the
--            caller is queued, behind everyone (a free lock goes to the
--            first waiter, not to the newcomer).
--   check    a waiter's re-check: granted when the lock is the caller's
--            (its grant message was missed, or not read yet), or when it
--            was free and the caller was the first live waiter. Neither
--            granted nor queued (its entry was lost: the queue's key
--            deleted, evicted, or lost in a failover; or a grant passed it
--            over): as acquire, queued anew at the tail, or granted the
--            lock if it is free and nobody else waits.
--   cancel   a waiter whose time ran out: granted as check, else its entry
--            leaves the queue (no grant can come after this).
--   ensure   a waiter that does not know whether it was queued (the
--            script of the holder that was to queue it lost its answer):
--            as check.
--            All four: {1, value or false, PTTL} granted, with the carried
--            key's value; {0, the holder's PTTL (-1: none), Redis time in
--            us, 1 when this script queued the caller, else 0} still
--            waiting (cancel: no longer queued).
--   renew    the watchdog: 1 when the lock was the caller's and its lease
--            was reset, 0 when not.
--   release  1 when the caller's lock was handed on (or deleted: nobody
--            waits), 0 when it was not the caller's.
--   abandon  after an unknown outcome: the caller's entry leaves the queue
--            and its lock, when it holds it, is handed on. 1 or 0 as release.
local key, queue, owner, lease, prefix = KEYS[1], KEYS[2], ARGV[2], ARGV[3], ARGV[4]
local mode = ARGV[1]
local t = redis.call('time')
local now_us = t[1] * 1000000 + t[2]
local now_ms = math.floor(now_us / 1000)

-- The value of key as a grant carries it: '=value', or '-' when missing or
-- not a string.
local function carried(k)
  if not k or k == '' then return '-' end
  local v = redis.pcall('get', k)
  if type(v) ~= 'string' then return '-' end
  return '=' .. v
end

-- Whether the process of waiter id listens on its channel.
local function listens(id)
  return redis.call('pubsub', 'numsub', prefix .. string.match(id, '^[^:]*'))[2] > 0
end

-- Grants the lock to the first waiter whose deadline has not passed and
-- whose process listens (or who polls); the others are dropped. Returns
-- its owner id, or false when nobody waits. (The LPOP comes first: under
-- maxmemory, Redis lets the SET of a script through once it has written.)
local function grant()
  while true do
    local e = redis.call('lpop', queue)
    if not e then return false end
    local deadline, polls, next, ck = string.match(e, '^(%d+)(p?)|([^|]*)|(.*)$')
    if deadline and tonumber(deadline) > now_ms and (polls == 'p' or listens(next)) then
      redis.call('set', key, next, 'PX', lease)
      redis.call('publish', prefix .. string.match(next, '^[^:]*'),
                 next .. ' ' .. string.format('%.0f', now_us) .. ' ' .. carried(ck))
      return next
    end
  end
end

-- The caller's entry in the queue, or nil.
local function entry()
  local tail = '|' .. owner .. '|'
  for _, e in ipairs(redis.call('lrange', queue, 0, -1)) do
    if string.find(e, tail, 1, true) then return e end
  end
  return nil
end

-- Drops the caller's entry from the queue.
local function dequeue()
  local e = entry()
  if e then redis.call('lrem', queue, 1, e) end
end

local function granted()
  local v = carried(KEYS[3])
  return {1, v ~= '-' and string.sub(v, 2) or false, redis.call('pttl', key)}
end

local function waiting(queued)
  return {0, redis.call('pttl', key), string.format('%.0f', now_us), queued and 1 or 0}
end

-- false: free; else the holder's id (a string lock) or true (another kind).
local holder = redis.pcall('get', key)
if type(holder) == 'table' then holder = true end

if mode == 'check' or mode == 'ensure' then
  if holder == false then holder = grant() end
  if holder == owner then return granted() end
  if entry() then return waiting(false) end
  mode = 'acquire' -- not queued: queued anew, or granted the free lock
end
if mode == 'acquire' then
  if holder == owner then
    redis.call('pexpire', key, lease)
    return granted()
  end
  if holder == false and not grant() then
    redis.call('set', key, owner, 'PX', lease)
    return granted()
  end
  local life = tonumber(ARGV[5]) + tonumber(lease)
  local polls = ARGV[6] == '0' and 'p' or ''
  redis.call('rpush', queue,
             (now_ms + tonumber(ARGV[5])) .. polls .. '|' .. owner .. '|' .. (KEYS[3] or ''))
  if redis.call('pttl', queue) < life then redis.call('pexpire', queue, life) end
  return waiting(true)
elseif mode == 'cancel' then
  if holder == false then holder = grant() end
  if holder == owner then return granted() end
  dequeue()
  return waiting(false)
elseif mode == 'renew' then
  if holder ~= owner then return 0 end
  redis.call('pexpire', key, lease)
  return 1
end
-- release, abandon
if mode == 'abandon' then dequeue() end
if holder ~= owner then
  if holder == false then grant() end
  return 0
end
if not grant() then redis.call('del', key) end
return 1
