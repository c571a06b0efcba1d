-- adopt.lua: register, with a deadline of now + node_ttl on Redis's clock
-- (TIME), every incarnation that nodes of an older version registered in
-- their set and that the registry lacks (a rolling upgrade). A live one is
-- then kept (its record names it); a dead one is swept once the deadline
-- passes.
-- KEYS[1] the registry (sorted set by deadline)
-- KEYS[2] the older versions' registry (set, same slot)
-- ARGV[1] node_ttl (ms)
-- Returns {how many it registered, how many the older set holds}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local at = string.format('%.0f', now + tonumber(ARGV[1]))
local n = 0
local older = redis.call('SMEMBERS', KEYS[2])
for _, m in ipairs(older) do
  n = n + redis.call('ZADD', KEYS[1], 'NX', at, m)
end
return {n, #older}
