-- claims.lua: swap a user's claimed groups.
-- KEYS[1] the user's claims set  ARGV[1...] groups
-- Returns the previous groups.
local prev = redis.call('SMEMBERS', KEYS[1])
redis.call('DEL', KEYS[1])
if #ARGV > 0 then redis.call('SADD', KEYS[1], unpack(ARGV)) end
return prev
