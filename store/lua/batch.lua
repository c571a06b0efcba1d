-- batch.lua: several writes of one slot (one server: any users) in one
-- call, each made as its own script makes it, in the order given.
-- store/redis_scripts.go puts common.lua in front of it and, between the
-- two, open.lua, end.lua and update.lua, each as the body of a function of
-- its KEYS and ARGV: write.o, write.e, write.u.
-- KEYS  every write's KEYS, one write after the other
-- ARGV  for every write: its kind ("o", "e" or "u"), the number of its KEYS,
--       the number of its ARGV, then its ARGV
-- Returns one reply a write: what its own script returns, or an error
-- reply when its script failed (that write's commands made before the
-- failure stand, as they would alone; the writes after it are made).
-- What a call costs Redis before any script runs (EVALSHA, common.lua's
-- definitions) is paid once for the batch (redis_batch.go).
local replies = {}
local k, a = 1, 1
while a <= #ARGV do
  local f, nk, na = write[ARGV[a]], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local keys, args = {}, {}
  for i = 1, nk do keys[i] = KEYS[k + i - 1] end
  for i = 1, na do args[i] = ARGV[a + 2 + i] end
  k, a = k + nk, a + 3 + na
  begin(keys)
  local ok, r = pcall(f, keys, args)
  if not ok then
    if type(r) == 'table' and r.err then r = {err = r.err} else r = {err = tostring(r)} end
  end
  replies[#replies + 1] = r
end
return replies
