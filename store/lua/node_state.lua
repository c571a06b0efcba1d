-- node_state.lua: record a node's word in its history, the store's copy of
-- presence/nodes/{node} that every node showing the node topics reads
-- (one HGETALL), instead of a broadcast. The rule is the twin of
-- presence.NodeHistory.Record (change both together): a history holds the
-- node's current incarnation's latest word in each state it reached,
-- oldest first; the node's own word is recorded unless it moves its
-- incarnation back (a late "up" after its "down"), and a new incarnation
-- starts a new history; a survivor's report that the node is down is
-- recorded only for the incarnation the history is of, unless it is down
-- already. A step that changes a node's state (or starts a history) also
-- notes when a node went down and forgets, a few at a time, the nodes down
-- for longer than the retention, on Redis's clock (TIME); a new count of
-- sessions is only the HSET.
-- KEYS[1] the node states (hash: node -> its history, one JSON status per
--         line, oldest first)
-- KEYS[2] the nodes down (sorted set: node -> ms it went down; same slot)
-- ARGV[1] node  ARGV[2] incarnation  ARGV[3] state (up, draining, down)
-- ARGV[4] "1" for a survivor's report, else "0"
-- ARGV[5] the status (presence.NodeStatus JSON, one line)
-- ARGV[6] retention (ms)
-- Returns 1 when recorded, 0 when refused.
local RANK = {up = 1, draining = 2, down = 3}
local node, inc, state, rank = ARGV[1], ARGV[2], ARGV[3], RANK[ARGV[3]]

local steps = {}
local cur = redis.call('HGET', KEYS[1], node)
if cur then
  for line in string.gmatch(cur, '[^\n]+') do table.insert(steps, line) end
end
local out
local was = nil -- the state the history ended in
if #steps == 0 then
  out = {ARGV[5]}
else
  local last = cjson.decode(steps[#steps])
  was = last.state
  if ARGV[4] == '1' and (last.incarnation ~= inc or last.state == 'down') then
    out = nil
  elseif last.incarnation ~= inc then
    out = {ARGV[5]}
  elseif rank < (RANK[last.state] or 0) then
    out = nil
  else
    out = {}
    for _, line in ipairs(steps) do
      if (RANK[cjson.decode(line).state] or 0) < rank then table.insert(out, line) end
    end
    table.insert(out, ARGV[5])
  end
end

if not out then return 0 end
redis.call('HSET', KEYS[1], node, table.concat(out, '\n'))
if was == state and #out == #steps then return 1 end -- the same state, a new count
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if state == 'down' then
  redis.call('ZADD', KEYS[2], string.format('%.0f', now), node)
elseif was == 'down' then
  redis.call('ZREM', KEYS[2], node)
end
local old = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', string.format('%.0f', now - tonumber(ARGV[6])), 'LIMIT', 0, 16)
for _, n in ipairs(old) do
  redis.call('HDEL', KEYS[1], n)
  redis.call('ZREM', KEYS[2], n)
end
return 1
