-- heartbeat.lua: an incarnation is alive: register it, and push its
-- deadline to now + node_ttl on Redis's clock (TIME), in one step. The
-- refresh runs it every node_ttl/3, with the SET of the node record, so the
-- deadline passes when the record expires; a sweep then reads only the
-- incarnations whose deadline passed (due.lua), not every node's record.
-- KEYS[1] the registry (set)  KEYS[2] the deadlines (sorted set, same slot)
-- ARGV[1] member "<node>|<incarnation>"  ARGV[2] node_ttl (ms)
-- Returns 1 when the member was not registered (added now), else 0.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local added = redis.call('SADD', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], string.format('%.0f', now + tonumber(ARGV[2])), ARGV[1])
return added
