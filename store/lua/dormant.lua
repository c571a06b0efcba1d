-- dormant.lua: end the user's dormant session as missed when its due time
-- has passed (presence.User.Miss); keep the dormant index right either way.
-- KEYS[1] user record  KEYS[2] the user's change channel  KEYS[3] its
-- slot's change channel (see common.lua)  KEYS[4] the dormant index of the
-- user's slot, in which ARGV[1] was found due
-- ARGV[1] user  ARGV[2] authoritative devices  ARGV[3] retention (ms)
-- Returns 1 when missed, 0 when not (no dormant session: the user left the
-- index; not due: its entry is moved to its due time).
local key = KEYS[1]
local raw = redis.call('HGET', key, 'dm')
if not raw or raw == '' then
  redis.call('ZREM', KEYS[4], ARGV[1])
  return 0
end
local now = now_ms()
local d = cjson.decode(raw)
if d.x > now then
  redis.call('ZADD', KEYS[4], d.x, ARGV[1])
  return 0
end
redis.call('ZREM', KEYS[4], ARGV[1])
local rec, sess = load(key)
if next(sess) ~= nil then -- never both: an open drops the dormant session
  rec.dm = ''
  commit(key, rec, sess, now, ARGV[2], ARGV[3])
  return 0
end
rec.dm = ''
d.r = 'missed'
d.ea = now
push_ended(key, rec, d)
table.insert(retired, d)
rec.lw = ''
commit(key, rec, sess, now, ARGV[2], ARGV[3], {r = 'missed'})
return 1
