#!lua
-- history-event.lua: the history event of a hold that wrote nothing (sold
-- out, lock lost, bad stock). It goes out with the release, as a write
-- would, and like sale-write.lua it records Redis's own clock when it
-- applied (written_us) and whether the lock was still the holder's then.
-- The arguments by name (src/sale.c fills them by these names):
-- KEYS: history lock
-- ARGV: cap guard owner outcome, then the history
-- KEYS[1] history stream, KEYS[2] lock
-- ARGV[1] history cap, ARGV[2] guard ('string', 'hash' or ''), ARGV[3] the
-- owner's value or field, ARGV[4] outcome, ARGV[5 ..] fields and values
-- Returns 1, or 0 when the history key is not a stream (nothing written).
local kind = redis.call('type', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'stream' then return 0 end
local t = redis.call('time')
local a = {'xadd', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'outcome', ARGV[4],
           'written_us', t[1] .. string.format('%06d', tonumber(t[2]))}
-- The lock is read as sale-write.lua reads it: a key of another type
-- answers an error, which is not the owner.
local mine = nil
if ARGV[2] == 'string' then
  mine = redis.pcall('get', KEYS[2]) == ARGV[3]
elseif ARGV[2] == 'hash' then
  mine = redis.pcall('hexists', KEYS[2], ARGV[3]) == 1
end
if mine ~= nil then
  a[#a + 1] = 'owned'
  a[#a + 1] = mine and '1' or '0'
end
for i = 5, #ARGV do a[#a + 1] = ARGV[i] end
redis.call(unpack(a))
return 1
