-- own.lua: the user's live sessions of one incarnation, read only.
-- KEYS[1] user record
-- ARGV[1] node  ARGV[2] incarnation
-- Returns {id, epoch, device, status, text, ...}: five strings a session.
local rec, sess = load(KEYS[1])
local out = {}
for id, s in pairs(sess) do
  if s.n == ARGV[1] and s.i == ARGV[2] then
    table.insert(out, id)
    table.insert(out, s.e)
    table.insert(out, s.d or '')
    table.insert(out, s.st or 'online')
    table.insert(out, s.tx or '')
  end
end
return out
