-- end.lua: end a live session, only when the epoch is its current one.
-- KEYS[1] user record  KEYS[2] the user's change channel  KEYS[3] its
-- slot's change channel (see common.lua)  KEYS[4] the dormant index of the
-- user's slot (common.lua sleep)
-- ARGV[1] session id  ARGV[2] epoch  ARGV[3] reason
-- ARGV[4] "1" when ARGV[5] holds last words (the will's text)  ARGV[5] text
-- ARGV[6] authoritative devices  ARGV[7] retention (ms)
-- ARGV[8] will delay (ms, "0" for none): carried on the feed with the reason
-- ARGV[9] silence (ms, "0" for none): the session's last sign of life was
--         that long before now (presence.EndArgs.LastSign); see last_sign
-- Returns 1 when ended, 0 when stale (changes nothing).
-- last_sign is presence.User.SeenAt: the user's last_seen when the end
-- leaves no session live is the ended session's last sign of life, silence
-- ms before now, kept within [its connected_at, now].
local function last_sign(s, silence, now)
  local ls = now - (tonumber(silence) or 0)
  if ls > now then ls = now end
  if ls < s.c then ls = s.c end
  return fmt(ls)
end

local key = KEYS[1]
local rec, sess = load(key)
local s = sess[ARGV[1]]
if s == nil or s.e ~= ARGV[2] then return 0 end
local now = now_ms()
local ended = retire(key, rec, sess, ARGV[1], ARGV[3], now)
if next(sess) == nil then rec.ls = last_sign(ended, ARGV[9], now) end
sleep(rec, sess, ended, ARGV[3], KEYS[4])
if next(sess) == nil then
  rec.lw = ''
  if ARGV[4] == '1' and ARGV[3] ~= 'clean' then rec.lw = ARGV[5] end
end
commit(key, rec, sess, now, ARGV[6], ARGV[7], {r = ARGV[3], wd = ARGV[8]})
return 1
