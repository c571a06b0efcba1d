-- unregister.lua: forget an incarnation (swept, or replaced by a reset):
-- out of the registry, and of the set that nodes of an older version
-- register in, in one step.
-- KEYS[1] the registry (sorted set by deadline)
-- KEYS[2] the older versions' registry (set, same slot)
-- ARGV[1] member "<node>|<incarnation>"
-- Returns 1 when it was registered, else 0.
redis.call('SREM', KEYS[2], ARGV[1])
return redis.call('ZREM', KEYS[1], ARGV[1])
