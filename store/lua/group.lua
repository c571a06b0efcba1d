-- group.lua: change a group's members and announce it (classic PUBLISH on
-- the group feed: a rare admin event, heard by every node; the presence
-- changes and group batches go by SPUBLISH, see common.lua).
-- KEYS[1] the group's set  ARGV[1] op: set|add|rem|del
-- ARGV[2] the group feed channel  ARGV[3] group name  ARGV[4...] users
-- An empty group keeps a member "" so that it exists (members never
-- include it). Returns 1.
local op = ARGV[1]
if op == 'set' or op == 'del' then redis.call('DEL', KEYS[1]) end
if op ~= 'del' then
  redis.call('SADD', KEYS[1], '')
  for i = 4, #ARGV do
    if op == 'rem' then redis.call('SREM', KEYS[1], ARGV[i]) else redis.call('SADD', KEYS[1], ARGV[i]) end
  end
end
redis.call('PUBLISH', ARGV[2], ARGV[3])
return 1
