-- due.lua: the incarnations whose deadline passed on Redis's clock (TIME):
-- the only ones a sweep looks at (almost always none).
-- KEYS[1] the deadlines (sorted set)  ARGV[1] at most this many
-- Returns their members, the longest overdue first.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now), 'LIMIT', 0, tonumber(ARGV[1]))
