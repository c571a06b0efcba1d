-- common.lua: shared by every presence script; store/redis.go prepends it to
-- each operation's file: the record layout, the hybrid-logical-clock stamps,
-- the aggregation rule and the commit step (version bump, retention, change
-- published). Every time is the Redis server's (TIME), in milliseconds, so
-- no node's clock matters.
--
-- Every script that commits (calls commit) has the same first three KEYS,
-- all in the user's slot: KEYS[1] the user's record, KEYS[2] the user's
-- change channel <prefix>c:{<user>}, KEYS[3] the change channel of the
-- user's slot <prefix>s:{<tag>} (the firehose; <prefix>s:all on a single
-- server). The change is SPUBLISHed (sharded pub/sub) on both: it stays in
-- the shard that owns the slot and reaches only the nodes that listen.
--
-- Why the aggregation rule has a twin here. Its home is presence.Derive
-- (presence/aggregate.go). But a version must move exactly when what
-- observers see moves, and "since" comes from the previous aggregate: both
-- are decided from the derived status, in the same atomic step as the write
-- that changes it, or two nodes writing one user at once would race (read,
-- derive, write back). Go cannot run inside that step, so the rule runs here
-- too. TestRedisMatchesMemory keeps the twins equal: it applies random
-- operations to both stores and compares every aggregate. Change both
-- together.
--
-- A user's record is ONE hash, KEYS[1] = <prefix>{<user>}:
--   name   user name            e      last epoch handed out
--   v      version              st/tx  aggregate status and text
--   since  ms of the last status change   ls  last seen (ms, "" online)
--   lw     last words           as/at  account status and text
--   pi/pm/pd/pe  privacy: invisible "1", last_seen mode, and while
--          invisible the since and last seen others are shown (account.lua)
--   (an offline aggregate's reason is not kept: it is the newest ended
--   session's, offline_reason; its change message says it: rs)
--   sig    signature of the aggregate (change detection)
--   eh     the last 8 ended sessions, newest first: one JSON object
--          (a session's, as s:<id>, with r its end reason and ea its end
--          ms) per line. Lines, not a JSON list, so that ending a session
--          prepends one line and cuts at the 8th newline, and nothing
--          decodes the history (push_ended)
--   er     the newest ended session's reason (offline_reason)
--   ended  the history before eh: a JSON list of sessions, newest first,
--          written by older versions; push_ended folds it into eh
--   dm     JSON of the user's dormant session ("" or absent: none): a live
--          session's record after its clean end, with x its due time
--          (ms: end + ex + em), kept while its check-in is awaited
--          (presence/dormant.go; end.lua, dormant.lua)
--   s:<id> JSON of the live session <id>:
--          {id, e (epoch, string), n (node), i (incarnation), d (device),
--           st, tx, c (connected ms), rn (last renewed ms), x (expires ms),
--           ex and em (the check-in period the device declared and its
--           margin, ms; only when declared),
--           and its connection's facts (presence.Conn), each only when not
--           empty or zero: un (MQTT username), ip (client address),
--           pt (the listener's local port), l (listener id), pv (protocol
--           version), ka (keep-alive s), cs (clean start, true), se
--           (session expiry s)}
-- Epochs and versions are kept as decimal strings: they are close to 2^51
-- and cjson would print them with 14 digits.

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- fmt prints an integral number below 2^53 (a time in ms, an epoch, a
-- version) in decimal: '%d' prints it as a C long, which costs less than
-- '%.0f' (glibc prints a double through multi-precision arithmetic).
local function fmt(n) return string.format('%d', n) end

-- presence.NextStamp: max(last + 1, now in ms x 1000)
local function stamp(last, now)
  local wall = now * 1000
  if wall > last + 1 then return wall end
  return last + 1
end

local AVAIL = {online = 0, idle = 1, away = 2, busy = 3, dnd = 4}
local function avail(s) return AVAIL[s] or 5 end

-- loaded is the record's scalar fields as load read them (commit: only
-- what differs is written; the key has an expiry only when it was loaded
-- offline).
local loaded = {}

local function load(key)
  local flat = redis.call('HGETALL', key)
  local rec, sess = {}, {}
  for i = 1, #flat, 2 do
    local f, v = flat[i], flat[i + 1]
    if string.sub(f, 1, 2) == 's:' then
      sess[string.sub(f, 3)] = cjson.decode(v)
    else
      rec[f] = v
      loaded[f] = v
    end
  end
  return rec, sess
end

local function count(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n
end

local function save_session(key, s)
  redis.call('HSET', key, 's:' .. s.id, cjson.encode(s))
end

-- staged are the live sessions commit writes in the record's HSET.
local staged = {}
local function stage_session(s)
  staged['s:' .. s.id] = cjson.encode(s)
end

-- The connection facts a session keeps (open.lua), copied as they are
-- into what a change message says of the session.
local CONN = {'un', 'ip', 'pt', 'l', 'pv', 'ka', 'cs', 'se'}
local function with_conn(view, s)
  for _, f in ipairs(CONN) do
    if s[f] ~= nil then view[f] = s[f] end
  end
  return view
end

local MAX_ENDED = 8

-- fold_ended merges the history older versions kept in the field ended (a
-- JSON list) into eh, newest first by end time, each session once: a
-- rolling upgrade may have both. The only place either is decoded.
local function fold_ended(key, rec)
  local all, seen, pos = {}, {}, {}
  local function add(s)
    if type(s) ~= 'table' then return end
    local k = tostring(s.id) .. '\1' .. tostring(s.e)
    if not seen[k] then
      seen[k] = true
      table.insert(all, s)
      pos[s] = #all
    end
  end
  local old = cjson.decode(rec.ended)
  if type(old) == 'table' then
    for _, s in ipairs(old) do add(s) end
  end
  for line in string.gmatch(rec.eh or '', '[^\n]+') do add(cjson.decode(line)) end
  table.sort(all, function(a, b)
    local x, y = tonumber(a.ea) or 0, tonumber(b.ea) or 0
    if x ~= y then return x > y end
    return pos[a] < pos[b]
  end)
  local lines = {}
  for i = 1, math.min(#all, MAX_ENDED) do lines[i] = cjson.encode(all[i]) end
  rec.eh = table.concat(lines, '\n')
  rec.er = (all[1] and all[1].r) or ''
  rec.ended = nil
  redis.call('HDEL', key, 'ended')
end

-- push_ended puts ended session s first in the user's history (eh),
-- keeping the newest MAX_ENDED: one encode, and a cut at a newline.
local function push_ended(key, rec, s)
  if rec.ended and rec.ended ~= '' then fold_ended(key, rec) end
  local eh, line = rec.eh or '', cjson.encode(s)
  rec.er = s.r
  if eh == '' then
    rec.eh = line
    return
  end
  local at, n = 0, 1
  while true do
    at = string.find(eh, '\n', at + 1, true)
    if not at then break end
    n = n + 1
    if n == MAX_ENDED then
      eh = string.sub(eh, 1, at - 1)
      break
    end
  end
  rec.eh = line .. '\n' .. eh
end

-- retired are the sessions this script ended (retire), in that order:
-- commit's change message lists them (x), for the lifecycle outputs.
local retired = {}

-- retire ends live session id for reason at now and records it.
local function retire(key, rec, sess, id, reason, now)
  local s = sess[id]
  sess[id] = nil
  redis.call('HDEL', key, 's:' .. id)
  s.r = reason
  s.ea = now
  push_ended(key, rec, s)
  if next(sess) == nil then rec.ls = fmt(now) end
  table.insert(retired, s)
  return s
end

-- sleep keeps live session s, just ended for reason, as the user's
-- dormant session (presence.User.sleep) when it ended cleanly, declared a
-- check-in period and left no live session: due at its end + ex + em, and
-- put in the dormant index idx (a sorted set of users by due time, in the
-- user's slot) for the reaper (dormant.lua).
local function sleep(rec, sess, s, reason, idx)
  if reason ~= 'clean' or not s.ex or s.ex <= 0 or next(sess) ~= nil then return end
  local d = cjson.decode(cjson.encode(s))
  d.x = s.ea + s.ex + (s.em or 0)
  rec.dm = cjson.encode(d)
  redis.call('ZADD', idx, d.x, rec.name)
end

-- dormant shows p (an aggregate without live sessions) dormant while the
-- user keeps a dormant session, with nx its next expected check-in (ms):
-- presence's dormant.
local function dormant(rec, p)
  if not rec.dm or rec.dm == '' then return end
  local d = cjson.decode(rec.dm)
  p.st = 'dormant'
  p.nx = fmt(d.ea + d.ex)
end

-- better: a is more available than b (ties: connected later, greater id).
local function better(a, b)
  local x, y = avail(a.st), avail(b.st)
  if x ~= y then return x < y end
  if a.c ~= b.c then return a.c > b.c end
  return a.id > b.id
end

-- offline_reason is presence's offlineReason: why an offline user went,
-- the end reason of their newest ended session ('' when none).
local function offline_reason(rec)
  if rec.ended and rec.ended ~= '' then -- a record older versions wrote
    local ended = cjson.decode(rec.ended)
    if type(ended) == 'table' and ended[1] ~= nil then return ended[1].r or '' end
  end
  return rec.er or ''
end

-- aggregate is presence.Aggregate.
local function aggregate(rec, sess, auth)
  local p = {}
  local views = {}
  for _, s in pairs(sess) do table.insert(views, s) end
  if #views == 0 then
    p.st = 'offline'
    p.ls = rec.ls or ''
    p.tx = rec.at or ''
    if rec.lw and rec.lw ~= '' then p.tx = rec.lw end
    p.rs = offline_reason(rec)
    p.views = views
    dormant(rec, p)
    return p
  end
  table.sort(views, function(a, b)
    if a.c ~= b.c then return a.c < b.c end
    return a.id < b.id
  end)
  local lead, ruler
  for _, s in ipairs(views) do
    if lead == nil or better(s, lead) then lead = s end
    if (s.st == 'busy' or s.st == 'dnd') and s.d ~= '' and auth[s.d] then
      if ruler == nil or avail(s.st) > avail(ruler.st) or
        (s.st == ruler.st and (s.c > ruler.c or (s.c == ruler.c and s.id < ruler.id))) then
        ruler = s
      end
    end
  end
  local decider = lead
  local as = rec.as or ''
  if as == 'away' or as == 'busy' or as == 'dnd' then
    p.st = as
  elseif ruler then
    decider = ruler
    p.st = ruler.st
  else
    p.st = lead.st
  end
  p.tx = decider.tx or ''
  if rec.at and rec.at ~= '' then p.tx = rec.at end
  p.ls = ''
  p.views = views
  return p
end

-- privacy is the user's privacy setting as a change carries it (pv), nil
-- when it hides nothing (presence.Privacy; the fields: account.lua):
-- {i = "1" invisible, m = last_seen mode, d = since, e = last seen shown
-- while invisible}, each only when set.
local function privacy(rec)
  local i, m = rec.pi == '1', rec.pm or ''
  if m == 'exact' then m = '' end
  if not i and m == '' then return nil end
  local pv = {}
  if i then
    pv.i = '1'
    if rec.pd and rec.pd ~= '' then pv.d = rec.pd end
    if rec.pe and rec.pe ~= '' then pv.e = rec.pe end
  end
  if m ~= '' then pv.m = m end
  return pv
end

local function signature(p)
  local parts = {p.st, p.tx, p.ls, p.nx or ''}
  if p.pv then table.insert(parts, table.concat({p.pv.i or '', p.pv.m or '', p.pv.d or '', p.pv.e or ''}, '\1')) end
  for _, s in ipairs(p.views) do
    table.insert(parts, table.concat({s.id, s.e, s.n, s.d, s.st, fmt(s.c)}, '\1'))
  end
  return table.concat(parts, '\0')
end

-- commit derives the aggregate; when it changed it takes the next version,
-- is stored, given the retention (offline) or none (online), and published
-- on the user's and the slot's change channels (KEYS[2], KEYS[3]) in the
-- same script, with the sessions the script ended (x: retired, in order;
-- only when there are some). The scalar fields that differ from what
-- load read and the staged sessions are written in one HSET, whether or
-- not the aggregate changed (the caller changed something). cause, when an end made the change,
-- is {r = end reason, wd = will delay in ms}: the feed carries it, so that
-- every node holds the change back the same way (presence.Pacing).
local function commit(key, rec, sess, now, auth_csv, retention, cause)
  local auth = {}
  for d in string.gmatch(auth_csv, '[^,]+') do auth[d] = true end
  local p = aggregate(rec, sess, auth)
  p.pv = privacy(rec) -- issue 22
  local sig = signature(p)
  local changed = (rec.v == nil or rec.v == '' or rec.sig ~= sig)
  if changed then
    rec.v = fmt(stamp(tonumber(rec.v or '0') or 0, now))
    local since = tonumber(rec.since or '0') or 0
    if p.st ~= rec.st or since == 0 then
      since = now
      if p.st == 'offline' and p.ls ~= '' then since = tonumber(p.ls) end
    end
    rec.since = fmt(since)
    rec.st = p.st
    rec.tx = p.tx
    rec.sig = sig
  end
  local flat = {}
  for f, v in pairs(rec) do
    if loaded[f] ~= v then
      table.insert(flat, f)
      table.insert(flat, v)
    end
  end
  for f, v in pairs(staged) do
    table.insert(flat, f)
    table.insert(flat, v)
  end
  if #flat > 0 then redis.call('HSET', key, unpack(flat)) end
  if p.st == 'offline' then
    redis.call('PEXPIRE', key, retention)
  elseif changed and loaded.st == 'offline' then
    redis.call('PERSIST', key)
  end
  if changed then
    local ss = {}
    for i, s in ipairs(p.views) do
      ss[i] = with_conn({id = s.id, e = s.e, n = s.n, d = s.d, st = s.st, c = fmt(s.c)}, s)
    end
    local msg = {u = rec.name, v = rec.v, st = p.st, tx = p.tx, since = rec.since, ls = p.ls, ss = ss}
    msg.pv = p.pv -- nil (absent) when it hides nothing
    if p.rs and p.rs ~= '' then msg.rs = p.rs end
    if p.nx then msg.nx = p.nx end
    if #retired > 0 then
      local x = {}
      for i, s in ipairs(retired) do
        x[i] = with_conn({id = s.id, e = s.e, n = s.n, d = s.d, st = s.st, c = fmt(s.c), r = s.r, ea = fmt(s.ea)}, s)
      end
      msg.x = x
    end
    if cause then
      msg.r = cause.r
      if cause.wd and cause.wd ~= '' and cause.wd ~= '0' then msg.wd = cause.wd end
    end
    local payload = cjson.encode(msg)
    redis.call('SPUBLISH', KEYS[2], payload)
    redis.call('SPUBLISH', KEYS[3], payload)
  end
  return changed
end
