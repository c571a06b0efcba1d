-- group_commit.lua: commit a group topic's batch when it follows the
-- log's version, and publish it in the same step, with SPUBLISH (sharded
-- pub/sub) on the group's own channel: only the nodes that listen to the
-- group hear it.
-- KEYS[1] the group's log <prefix>gs:{<group>}  KEYS[2] the group's batches
-- channel <prefix>gb:{<group>} (the same slot)
-- ARGV[1] follows  ARGV[2] version  ARGV[3] counts (JSON)  ARGV[4] delta JSON
-- ARGV[5] n changed  ARGV[6 .. 5+2n] user, member JSON pairs
-- then the removed users.
-- Returns 1 when committed, 0 when the log is not at ARGV[1].
local v = redis.call('HGET', KEYS[1], '=v')
if v ~= ARGV[1] then return 0 end
local n = tonumber(ARGV[5])
for i = 6, 5 + 2 * n, 2 do redis.call('HSET', KEYS[1], 'm:' .. ARGV[i], ARGV[i + 1]) end
for i = 6 + 2 * n, #ARGV do redis.call('HDEL', KEYS[1], 'm:' .. ARGV[i]) end
redis.call('HSET', KEYS[1], '=v', ARGV[2], '=c', ARGV[3])
redis.call('SPUBLISH', KEYS[2], ARGV[4])
return 1
