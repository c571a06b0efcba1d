-- group_commit.lua: commit a group topic's batch when it follows the
-- log's version, and publish it in the same step.
-- KEYS[1] the group's log  ARGV[1] follows  ARGV[2] version
-- ARGV[3] counts (JSON)  ARGV[4] the batches channel  ARGV[5] delta JSON
-- ARGV[6] n changed  ARGV[7 .. 6+2n] user, member JSON pairs
-- then the removed users.
-- Returns 1 when committed, 0 when the log is not at ARGV[1].
local v = redis.call('HGET', KEYS[1], '=v')
if v ~= ARGV[1] then return 0 end
local n = tonumber(ARGV[6])
for i = 7, 6 + 2 * n, 2 do redis.call('HSET', KEYS[1], 'm:' .. ARGV[i], ARGV[i + 1]) end
for i = 7 + 2 * n, #ARGV do redis.call('HDEL', KEYS[1], 'm:' .. ARGV[i]) end
redis.call('HSET', KEYS[1], '=v', ARGV[2], '=c', ARGV[3])
redis.call('PUBLISH', ARGV[4], ARGV[5])
return 1
