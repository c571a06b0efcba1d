-- open.lua: start a session with the user's next epoch. A live session with
-- the same id is ended as a takeover in the same step.
-- KEYS[1] user record  KEYS[2] the user's change channel  KEYS[3] its
-- slot's change channel (see common.lua)  KEYS[4] the opening incarnation's
-- set of users of this slot, to which the user is added
-- ARGV[1] user  ARGV[2] session id  ARGV[3] node  ARGV[4] incarnation
-- ARGV[5] device  ARGV[6] status ("" = online)  ARGV[7] text
-- ARGV[8] session ttl (ms)  ARGV[9] authoritative devices (comma-separated)
-- ARGV[10] retention (ms)
-- ARGV[11..18] the connection's facts (common.lua: un, ip, pt, l, pv, ka,
-- cs, se), "" (or "0") for none
-- ARGV[19] the check-in period the device declared (ms, "0": none)
-- ARGV[20] its margin (ms)
-- A new session is the check-in of the user's dormant session, if any: it
-- is dropped (its entry in the dormant index is dropped by the reaper).
-- Returns {epoch, connected_at ms, expires_at ms} as strings.
local key = KEYS[1]
local rec, sess = load(key)
local now = now_ms()
local id = ARGV[2]
if sess[id] then retire(key, rec, sess, id, 'takeover', now) end
local e = stamp(tonumber(rec.e or '0') or 0, now)
rec.e = fmt(e)
rec.name = ARGV[1]
rec.lw = ''
rec.dm = ''
local st = ARGV[6]
if st == '' then st = 'online' end
local ttl = tonumber(ARGV[8])
local s = {id = id, e = fmt(e), n = ARGV[3], i = ARGV[4], d = ARGV[5], st = st, tx = ARGV[7],
  c = now, rn = now, x = now + ttl}
-- the connection's facts, only those not empty or zero
local function text(f, v) if v ~= '' then s[f] = v end end
local function num(f, v)
  local n = tonumber(v)
  if n and n > 0 then s[f] = n end
end
text('un', ARGV[11])
text('ip', ARGV[12])
num('pt', ARGV[13])
text('l', ARGV[14])
num('pv', ARGV[15])
num('ka', ARGV[16])
if ARGV[17] == '1' then s.cs = true end
num('se', ARGV[18])
num('ex', ARGV[19] or '0')
if s.ex then num('em', ARGV[20] or '0') end
sess[id] = s
stage_session(s)
commit(key, rec, sess, now, ARGV[9], ARGV[10])
redis.call('SADD', KEYS[4], ARGV[1])
return {fmt(e), fmt(now), fmt(now + ttl)}
