-- group_open.lua: open a group's log at a snapshot, unless it exists.
-- KEYS[1] the group's log  ARGV[1] version  ARGV[2] counts (JSON)
-- ARGV[3...] user, member JSON pairs
-- Returns 1 if it wrote, 0 if the log existed.
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], '=v', ARGV[1], '=c', ARGV[2])
for i = 3, #ARGV, 2 do redis.call('HSET', KEYS[1], 'm:' .. ARGV[i], ARGV[i + 1]) end
return 1
