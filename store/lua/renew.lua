-- renew.lua: extend a live session's store-side expiry, only when the epoch
-- matches. Run in bulk (pipelined) by the session's node, rarely: a node's
-- liveness is its node record's (see the README), this is the long backstop.
-- KEYS[1] user record
-- ARGV[1] session id  ARGV[2] epoch  ARGV[3] ttl (ms)
-- Returns 1 when renewed, 0 when stale.
local raw = redis.call('HGET', KEYS[1], 's:' .. ARGV[1])
if not raw then return 0 end
local s = cjson.decode(raw)
if s.e ~= ARGV[2] then return 0 end
local now = now_ms()
s.rn = now
s.x = now + tonumber(ARGV[3])
save_session(KEYS[1], s)
return 1
