-- reap.lua: end, as timeouts, the user's live sessions whose expiry passed,
-- and say whether the user still has a live session of one incarnation.
-- KEYS[1] user record
-- ARGV[1] authoritative devices  ARGV[2] channel  ARGV[3] retention (ms)
-- ARGV[4] node  ARGV[5] incarnation
-- Returns {sessions ended, live sessions left of ARGV[4]|ARGV[5]}.
local key = KEYS[1]
local rec, sess = load(key)
local now = now_ms()
local due = {}
for id, s in pairs(sess) do
  if s.x <= now then table.insert(due, id) end
end
table.sort(due)
for _, id in ipairs(due) do retire(key, rec, sess, id, 'timeout', now) end
local mine = 0
for _, s in pairs(sess) do
  if s.n == ARGV[4] and s.i == ARGV[5] then mine = mine + 1 end
end
if #due > 0 then
  if next(sess) == nil then rec.lw = '' end
  commit(key, rec, sess, now, ARGV[1], ARGV[2], ARGV[3], {r = 'timeout'})
end
return {#due, mine}
