-- update.lua: set a live session's own status, text or device, only when
-- the epoch is its current one.
-- KEYS[1] user record  KEYS[2] the user's change channel  KEYS[3] its
-- slot's change channel (see common.lua)
-- ARGV[1] session id  ARGV[2] epoch
-- ARGV[3] "1" to set the status to ARGV[4]
-- ARGV[5] "1" to set the text to ARGV[6]
-- ARGV[7] "1" to set the device to ARGV[8]
-- ARGV[9] authoritative devices  ARGV[10] retention (ms)
-- Returns 1 when applied, 0 when stale.
local key = KEYS[1]
local rec, sess = load(key)
local s = sess[ARGV[1]]
if s == nil or s.e ~= ARGV[2] then return 0 end
if ARGV[3] == '1' then s.st = ARGV[4] end
if ARGV[5] == '1' then s.tx = ARGV[6] end
if ARGV[7] == '1' then s.d = ARGV[8] end
stage_session(s)
commit(key, rec, sess, now_ms(), ARGV[9], ARGV[10])
return 1
