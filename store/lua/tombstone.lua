-- tombstone.lua: after Redis lost a user (restarted empty), record the user
-- as offline with a version above the one observers hold, so every node
-- publishes offline instead of keeping a stale online. Only when the record
-- does not exist: a node that re-asserted a live session first wins.
-- KEYS[1] user record  KEYS[2] the user's change channel  KEYS[3] its
-- slot's change channel (see common.lua)
-- ARGV[1] user  ARGV[2] the highest version observers may hold
-- ARGV[3] authoritative devices  ARGV[4] retention (ms)
-- Returns 1 when written, 0 when the record exists.
local key = KEYS[1]
if redis.call('EXISTS', key) == 1 then return 0 end
local now = now_ms()
local rec = {name = ARGV[1], v = ARGV[2], ls = fmt(now), since = fmt(now), st = 'lost'}
commit(key, rec, {}, now, ARGV[3], ARGV[4])
return 1
