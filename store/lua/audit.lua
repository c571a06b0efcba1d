-- audit.lua: after a failover, end as timeouts the user's live sessions of
-- one incarnation that its node no longer holds: the node renewed every
-- session it holds since ARGV[6], so a session of it renewed before that and
-- opened well before that (its end was written to a master that died before
-- its replica had it) is a ghost.
-- KEYS[1] user record
-- ARGV[1] authoritative devices  ARGV[2] channel  ARGV[3] retention (ms)
-- ARGV[4] node  ARGV[5] incarnation  ARGV[6] renewed since (ms)
-- ARGV[7] opened before (ms)
-- Returns the number of sessions ended.
local key = KEYS[1]
local rec, sess = load(key)
local since, before = tonumber(ARGV[6]), tonumber(ARGV[7])
local gone = {}
for id, s in pairs(sess) do
  if s.n == ARGV[4] and s.i == ARGV[5] and (s.rn or s.c) < since and s.c < before then
    table.insert(gone, id)
  end
end
if #gone == 0 then return 0 end
local now = now_ms()
table.sort(gone)
for _, id in ipairs(gone) do retire(key, rec, sess, id, 'timeout', now) end
if next(sess) == nil then rec.lw = '' end
commit(key, rec, sess, now, ARGV[1], ARGV[2], ARGV[3])
return #gone
