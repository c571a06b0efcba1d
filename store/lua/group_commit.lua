-- group_commit.lua: commit a group topic's batch when it follows the
-- log's version, and publish it in the same step, with SPUBLISH (sharded
-- pub/sub) on the group's own channel: only the nodes that listen to the
-- group hear it. With keep > 0 the batch is kept in the log too, as field
-- "d:<version>" = "<unix ms> <delta JSON>" (Redis's clock), and the one
-- keep versions older is deleted: the log keeps the latest keep batches
-- (versions are consecutive), from which a node that begins to watch the
-- group serves resumes.
-- KEYS[1] the group's log <prefix>gs:{<group>}  KEYS[2] the group's batches
-- channel <prefix>gb:{<group>} (the same slot)
-- ARGV[1] follows  ARGV[2] version  ARGV[3] counts (JSON)  ARGV[4] delta JSON
-- ARGV[5] n changed  ARGV[6] keep  ARGV[7 .. 6+2n] user, member JSON pairs
-- then the removed users.
-- Returns 1 when committed, 0 when the log is not at ARGV[1].
local v = redis.call('HGET', KEYS[1], '=v')
if v ~= ARGV[1] then return 0 end
local n = tonumber(ARGV[5])
for i = 7, 6 + 2 * n, 2 do redis.call('HSET', KEYS[1], 'm:' .. ARGV[i], ARGV[i + 1]) end
for i = 7 + 2 * n, #ARGV do redis.call('HDEL', KEYS[1], 'm:' .. ARGV[i]) end
redis.call('HSET', KEYS[1], '=v', ARGV[2], '=c', ARGV[3])
local keep = tonumber(ARGV[6])
if keep > 0 then
  local t = redis.call('TIME')
  local ms = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
  redis.call('HSET', KEYS[1], 'd:' .. ARGV[2], ms .. ' ' .. ARGV[4])
  redis.call('HDEL', KEYS[1], 'd:' .. string.format('%d', tonumber(ARGV[2]) - keep))
end
redis.call('SPUBLISH', KEYS[2], ARGV[4])
return 1
