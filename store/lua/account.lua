-- account.lua: set or clear the account setting.
-- KEYS[1] user record  KEYS[2] the user's change channel  KEYS[3] its
-- slot's change channel (see common.lua)
-- ARGV[1] user  ARGV[2] "1" to set the status to ARGV[3] ("online" clears it)
-- ARGV[4] "1" to set the text to ARGV[5] ("" clears it)
-- ARGV[6] authoritative devices  ARGV[7] retention (ms)
-- Returns 1.
local key = KEYS[1]
local rec, sess = load(key)
rec.name = ARGV[1]
if ARGV[2] == '1' then
  if ARGV[3] == 'online' then rec.as = '' else rec.as = ARGV[3] end
end
if ARGV[4] == '1' then rec.at = ARGV[5] end
commit(key, rec, sess, now_ms(), ARGV[6], ARGV[7])
return 1
