-- reap.lua: end, as timeouts, the user's live sessions whose expiry passed.
-- KEYS[1] user record
-- ARGV[1] authoritative devices  ARGV[2] channel  ARGV[3] retention (ms)
-- Returns the number of sessions ended.
local key = KEYS[1]
local rec, sess = load(key)
local now = now_ms()
local due = {}
for id, s in pairs(sess) do
  if s.x <= now then table.insert(due, id) end
end
if #due == 0 then return 0 end
table.sort(due)
for _, id in ipairs(due) do retire(key, rec, sess, id, 'timeout', now) end
if next(sess) == nil then rec.lw = '' end
commit(key, rec, sess, now, ARGV[1], ARGV[2], ARGV[3])
return #due
