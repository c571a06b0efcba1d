-- own.lua: the user's live sessions of one incarnation, read only.
-- KEYS[1] user record
-- ARGV[1] node  ARGV[2] incarnation
-- Returns {id, epoch, id, epoch, ...}.
local rec, sess = load(KEYS[1])
local out = {}
for id, s in pairs(sess) do
  if s.n == ARGV[1] and s.i == ARGV[2] then
    table.insert(out, id)
    table.insert(out, s.e)
  end
end
return out
