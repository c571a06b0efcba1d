-- forget.lua: forget an offline user (the admin API's DELETE
-- /api/v1/users/{user}): its record goes, unless a session is live. It
-- stands alone (nothing of common.lua) and publishes nothing: the nodes
-- that show the user are told by a command (store/commands.go).
-- KEYS[1] user record
-- Returns 1 forgotten, 0 no such user, -1 a session is live.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
  if string.sub(f, 1, 2) == 's:' then return -1 end
end
redis.call('DEL', KEYS[1])
return 1
