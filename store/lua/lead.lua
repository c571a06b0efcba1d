-- lead.lua: take or keep the group topics' leader lease.
-- KEYS[1] the lease  ARGV[1] this node's member (node|incarnation)
-- ARGV[2] the lease's TTL (ms)
-- Returns 1 when this node holds the lease (taken, or kept and extended),
-- 0 when another does.
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end
if not cur then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end
return 0
