-- release_record.lua: delete a node record only if it names the
-- incarnation (a clean stop).
-- KEYS[1] the node record  ARGV[1] incarnation
-- Returns 1 when deleted, 0 when another incarnation holds it.
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
