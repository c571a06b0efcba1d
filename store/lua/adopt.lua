-- adopt.lua: give a deadline of now + node_ttl (Redis's clock) to every
-- registered incarnation that has none: one registered by a node of an
-- older version, which writes no deadline (a rolling upgrade). A live one
-- is then kept (its record names it); a dead one is swept once it passes.
-- KEYS[1] the registry (set)  KEYS[2] the deadlines (sorted set, same slot)
-- ARGV[1] node_ttl (ms)
-- Returns how many it gave a deadline.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local at = string.format('%.0f', now + tonumber(ARGV[1]))
local n = 0
for _, m in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  n = n + redis.call('ZADD', KEYS[2], 'NX', at, m)
end
return n
