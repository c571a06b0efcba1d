-- account.lua: set or clear the account setting.
-- KEYS[1] user record  KEYS[2] the user's change channel  KEYS[3] its
-- slot's change channel (see common.lua)
-- ARGV[1] user  ARGV[2] "1" to set the status to ARGV[3] ("online" clears it)
-- ARGV[4] "1" to set the text to ARGV[5] ("" clears it)
-- ARGV[6] authoritative devices  ARGV[7] retention (ms)
-- ARGV[8] "1" to set invisible to ARGV[9] ("1" or "0")
-- ARGV[10] "1" to set the last_seen mode to ARGV[11] ("" exact, quarter, hidden)
-- Returns 1.
--
-- The privacy fields of the record (presence.Privacy): pi "1" invisible,
-- pm last_seen mode ("" exact), and while invisible what the others are
-- shown: pd offline since (ms), pe last seen (ms, "" null).

-- set_invisible turns the user invisible or visible at now, as
-- presence.User.SetAccountAt does: turning invisible fixes what the
-- others are shown meanwhile (live: offline since now, last seen now;
-- offline: the since and last seen they were shown then).
local function set_invisible(rec, sess, on, now)
  if on == (rec.pi == '1') then return end
  rec.pd, rec.pe = '', ''
  if not on then
    rec.pi = ''
    return
  end
  rec.pi = '1'
  if next(sess) ~= nil then
    rec.pd, rec.pe = fmt(now), fmt(now)
    return
  end
  rec.pe = rec.ls or ''
  rec.pd = rec.since or ''
  if rec.pd == '' or rec.pd == '0' then rec.pd = fmt(now) end
end

local key = KEYS[1]
local now = now_ms()
local rec, sess = load(key)
rec.name = ARGV[1]
if ARGV[2] == '1' then
  if ARGV[3] == 'online' then rec.as = '' else rec.as = ARGV[3] end
end
if ARGV[4] == '1' then rec.at = ARGV[5] end
if ARGV[10] == '1' then rec.pm = ARGV[11] end
if ARGV[8] == '1' then set_invisible(rec, sess, ARGV[9] == '1', now) end
commit(key, rec, sess, now, ARGV[6], ARGV[7])
return 1
