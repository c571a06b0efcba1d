-- end_node.lua: end the user's live sessions held by one incarnation of a
-- node that is gone. Idempotent: nodes racing to do it give one result.
-- KEYS[1] user record  KEYS[2] the user's change channel  KEYS[3] its
-- slot's change channel (see common.lua)  KEYS[4] (optional) the
-- incarnation's set of users holding the user (same slot), which the user
-- leaves in the same step, so that a sweep cut short goes on where it
-- stopped
-- ARGV[1] node  ARGV[2] incarnation  ARGV[3] reason
-- ARGV[4] authoritative devices  ARGV[5] retention (ms)
-- ARGV[6] the user's name (with KEYS[4])
-- Returns the number of sessions ended.
local key = KEYS[1]
if KEYS[4] then redis.call('SREM', KEYS[4], ARGV[6]) end
local rec, sess = load(key)
local now = now_ms()
local gone = {}
for id, s in pairs(sess) do
  if s.n == ARGV[1] and s.i == ARGV[2] then table.insert(gone, id) end
end
if #gone == 0 then return 0 end
table.sort(gone)
for _, id in ipairs(gone) do retire(key, rec, sess, id, ARGV[3], now) end
if next(sess) == nil then rec.lw = '' end
commit(key, rec, sess, now, ARGV[4], ARGV[5], {r = ARGV[3]})
return #gone
