-- unregister.lua: forget an incarnation (swept, or replaced by a reset):
-- out of the registry and of the deadlines in one step, so that neither
-- keeps it without the other.
-- KEYS[1] the registry (set)  KEYS[2] the deadlines (sorted set, same slot)
-- ARGV[1] member "<node>|<incarnation>"
-- Returns 1 when it was registered, else 0.
redis.call('ZREM', KEYS[2], ARGV[1])
return redis.call('SREM', KEYS[1], ARGV[1])
