-- reap.lua: end, as timeouts, the user's live sessions whose expiry passed,
-- and say whether the user still has a live session of one incarnation.
-- KEYS[1] user record  KEYS[2] the user's change channel  KEYS[3] its
-- slot's change channel (see common.lua)
-- ARGV[1] authoritative devices  ARGV[2] retention (ms)
-- ARGV[3] node  ARGV[4] incarnation
-- Returns {sessions ended, live sessions left of ARGV[3]|ARGV[4]}.
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
  if s.n == ARGV[3] and s.i == ARGV[4] then mine = mine + 1 end
end
if #due > 0 then
  if next(sess) == nil then rec.lw = '' end
  commit(key, rec, sess, now, ARGV[1], ARGV[2], {r = 'timeout'})
end
return {#due, mine}
