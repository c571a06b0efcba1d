// presenced console: plain JavaScript, no framework, no build step.
// The admin token is typed once and kept for the tab (sessionStorage); it
// is sent as "Authorization: Bearer", never in a cookie or a URL. Data is
// put in the page as text only (textContent), never as HTML.
'use strict';

const KEY = 'presenced.token';
const PAGE = 50;          // users per page
const POLL_LIST = 2000;   // the list is read again this often (new users, counts)
const POLL_OTHER = 3000;  // groups and nodes
const STATUSES = ['online', 'idle', 'away', 'busy', 'dnd', 'offline'];

const S = {
  token: sessionStorage.getItem(KEY) || '',
  view: '',
  list: { status: '', group: '', node: '', prefix: '', cursor: '', back: [], next: '', users: [] },
  user: null,               // the user page's name
  shown: new Map(),         // user -> retained JSON, of what the page shows
  nodes: [],
  groups: {},
  timer: 0,
  stream: null,             // { key, ctl }
  seq: 0,                   // renders started: a late answer of an old one is dropped
};

const $ = (id) => document.getElementById(id);

// el builds an element: el('td', {class: 'x'}, 'text', child...).
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(e.dataset, v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const k of kids.flat()) {
    if (k === undefined || k === null || k === false) continue;
    e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return e;
}

class APIError extends Error {
  constructor(status, msg) { super(msg); this.status = status; }
}

function headers(extra) {
  const h = Object.assign({ Accept: 'application/json' }, extra);
  if (S.token) h.Authorization = 'Bearer ' + S.token;
  return h;
}

async function api(method, path, body) {
  const opt = { method, headers: headers(), cache: 'no-store', credentials: 'omit' };
  if (method !== 'GET') opt.headers['X-Presenced-Operator'] = 'console'; // the action's log line says who asked
  if (body !== undefined) {
    opt.headers['Content-Type'] = 'application/json';
    opt.body = JSON.stringify(body);
  }
  const r = await fetch(path, opt);
  if (r.status === 401) {
    signOut('The token was refused.');
    throw new APIError(401, 'token refused');
  }
  const text = await r.text();
  let data = null;
  if (text) { try { data = JSON.parse(text); } catch { data = null; } }
  if (!r.ok) throw new APIError(r.status, (data && data.error) || r.status + ' ' + r.statusText);
  return data;
}

const enc = encodeURIComponent;

// ---- time -----------------------------------------------------------------

function ago(iso) {
  if (!iso) return '';
  const t = Date.parse(iso);
  if (isNaN(t)) return '';
  let s = Math.round((Date.now() - t) / 1000);
  const sign = s < 0 ? 'in ' : '';
  s = Math.abs(s);
  const v = s < 60 ? s + 's' : s < 3600 ? Math.floor(s / 60) + 'm' : s < 86400 ? Math.floor(s / 3600) + 'h' : Math.floor(s / 86400) + 'd';
  return sign ? sign + v : v + ' ago';
}
const when = (iso) => el('time', { datetime: iso, title: iso }, ago(iso));

function toast(msg, bad) {
  const t = $('toast');
  t.textContent = msg;
  t.className = bad ? 'show bad' : 'show';
  clearTimeout(toast.t);
  toast.t = setTimeout(() => { t.className = ''; }, 4000);
}

function confirmAction(text) {
  const d = $('confirm');
  $('confirmtext').textContent = text;
  d.returnValue = '';
  d.showModal();
  return new Promise((resolve) => {
    d.addEventListener('close', () => resolve(d.returnValue === 'ok'), { once: true });
  });
}

const badge = (status) => el('span', { class: 'badge s-' + (status || 'none') }, status || '—');

// ---- sign in ----------------------------------------------------------------

function signOut(msg) {
  S.token = '';
  sessionStorage.removeItem(KEY);
  stopAll();
  $('nav').hidden = true;
  $('signout').hidden = true;
  $('view').replaceChildren();
  $('login').hidden = false;
  $('loginerr').textContent = msg || '';
  $('token').focus();
}

async function probe() {
  const r = await fetch('/api/v1/stats', { headers: headers(), cache: 'no-store', credentials: 'omit' });
  return r.status;
}

async function signIn(ev) {
  ev.preventDefault();
  S.token = $('token').value.trim();
  const status = await probe().catch(() => 0);
  if (status === 401) {
    S.token = '';
    $('loginerr').textContent = 'The token was refused.';
    $('token').select();
    return;
  }
  if (status !== 200) {
    $('loginerr').textContent = 'The admin API did not answer (' + status + ').';
    return;
  }
  sessionStorage.setItem(KEY, S.token);
  $('token').value = '';
  start();
}

function start() {
  $('login').hidden = true;
  $('nav').hidden = false;
  $('signout').hidden = !S.token;
  route();
}

// ---- routing ----------------------------------------------------------------

function stopAll() {
  clearTimeout(S.timer);
  S.timer = 0;
  closeStream();
}

function route() {
  if (!$('login').hidden) return;
  stopAll();
  S.seq++;
  const h = decodeURIComponent(location.hash.replace(/^#\/?/, ''));
  S.shown.clear();
  S.user = null;
  if (h.startsWith('user/')) {
    S.view = 'user';
    S.user = h.slice(5);
    userPage(S.seq);
  } else if (h === 'groups') {
    S.view = 'groups';
    groupsPage(S.seq);
  } else if (h === 'nodes') {
    S.view = 'nodes';
    nodesPage(S.seq);
  } else {
    S.view = 'users';
    listPage(S.seq);
  }
  for (const a of document.querySelectorAll('#nav a')) {
    a.classList.toggle('here', a.dataset.view === S.view || (S.view === 'user' && a.dataset.view === 'users'));
  }
}

// poll runs fn now and again every ms while the same page shows.
function poll(seq, ms, fn) {
  const tick = async () => {
    if (seq !== S.seq) return;
    try { await fn(); } catch (e) { if (e.status !== 401) toast(e.message, true); }
    if (seq === S.seq) S.timer = setTimeout(tick, ms);
  };
  return tick();
}

// ---- the events stream -----------------------------------------------------
// fetch + ReadableStream (EventSource cannot send a header). The stream names
// the users the page shows: the node hears them meanwhile, so a change made on
// any node reaches this page.

function setLive(state) {
  const l = $('live');
  l.className = 'live ' + state;
  l.textContent = state === 'on' ? 'live' : state === 'wait' ? 'connecting' : 'offline';
}

function closeStream() {
  if (S.stream) S.stream.ctl.abort();
  S.stream = null;
  setLive('off');
}

// follow opens (or keeps) the stream of users' changes.
function follow(users, onOpen) {
  const list = [...new Set(users)].sort();
  const key = list.join('\n');
  if (S.stream && S.stream.key === key) return;
  closeStream();
  if (!list.length) return;
  const ctl = new AbortController();
  const st = { key, ctl };
  S.stream = st;
  readStream(st, list, onOpen);
}

async function readStream(st, list, onOpen) {
  const q = list.map((u) => 'user=' + enc(u)).join('&') + '&only=1';
  let backoff = 500;
  while (S.stream === st) {
    setLive('wait');
    try {
      const r = await fetch('/api/v1/events?' + q, { headers: headers({ Accept: 'text/event-stream' }), signal: st.ctl.signal, cache: 'no-store', credentials: 'omit' });
      if (r.status === 401) { signOut('The token was refused.'); return; }
      if (!r.ok || !r.body) throw new Error('events: ' + r.status);
      setLive('on');
      backoff = 500;
      if (onOpen) onOpen(); // read the state again: nothing falls between
      const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          onBlock(block);
        }
      }
    } catch (e) {
      if (st.ctl.signal.aborted) return;
    }
    if (S.stream !== st) return;
    setLive('wait');
    await new Promise((res) => setTimeout(res, backoff));
    backoff = Math.min(backoff * 2, 8000);
  }
}

function onBlock(block) {
  let kind = 'message';
  let data = '';
  for (const line of block.split('\n')) {
    if (line.startsWith('event: ')) kind = line.slice(7);
    else if (line.startsWith('data: ')) data += line.slice(6);
  }
  if (!data) return;
  let v;
  try { v = JSON.parse(data); } catch { return; }
  if (kind === 'user') onUser(v);
  else if (kind === 'node') onNode(v);
}

function onUser(u) {
  const old = S.shown.get(u.user);
  if (!old || old.version >= u.version) return; // not shown here, or not newer
  S.shown.set(u.user, u);
  if (S.view === 'users') {
    const row = document.querySelector('#users tr[data-user="' + CSS.escape(u.user) + '"]');
    if (row) row.replaceWith(userRow(u));
  } else if (S.view === 'user' && S.user === u.user) {
    userHead(u);
    clearTimeout(onUser.t);
    onUser.t = setTimeout(() => sessions(S.seq).catch(() => {}), 50);
  }
}

function onNode(n) {
  const i = S.nodes.findIndex((x) => x.node === n.node);
  if (i >= 0) S.nodes[i] = n; else S.nodes.push(n);
  if (S.view === 'nodes') nodesTable();
}

// ---- the users list ----------------------------------------------------------

function listQuery() {
  const L = S.list;
  const q = new URLSearchParams({ limit: String(PAGE) });
  if (L.status) q.set('status', L.status);
  if (L.group) q.set('group', L.group);
  if (L.node) q.set('node', L.node);
  if (L.prefix) q.set('prefix', L.prefix);
  if (L.cursor) q.set('cursor', L.cursor);
  return q.toString();
}

function listPage(seq) {
  const L = S.list;
  const opts = (all, list, cur) => [el('option', { value: '' }, all), ...list.map((v) => el('option', { value: v, selected: v === cur }, v))];
  const search = el('input', { id: 'search', type: 'search', placeholder: 'user name starts with…', value: L.prefix, 'aria-label': 'search' });
  const status = el('select', { id: 'fstatus', 'aria-label': 'status' }, opts('any status', STATUSES, L.status));
  const group = el('select', { id: 'fgroup', 'aria-label': 'group' }, opts('any group', Object.keys(S.groups).sort(), L.group));
  const node = el('select', { id: 'fnode', 'aria-label': 'node' }, opts('any node', S.nodes.map((n) => n.node), L.node));
  const reset = () => { L.cursor = ''; L.back = []; refresh(); };
  let typing = 0;
  search.addEventListener('input', () => { clearTimeout(typing); typing = setTimeout(() => { L.prefix = search.value.trim(); reset(); }, 250); });
  status.addEventListener('change', () => { L.status = status.value; reset(); });
  group.addEventListener('change', () => { L.group = group.value; reset(); });
  node.addEventListener('change', () => { L.node = node.value; reset(); });
  const prev = el('button', { id: 'prev', type: 'button', onclick: () => { L.cursor = L.back.pop() || ''; refresh(); } }, '‹ Previous');
  const next = el('button', { id: 'next', type: 'button', onclick: () => { L.back.push(L.cursor); L.cursor = L.next; refresh(); } }, 'Next ›');
  $('view').replaceChildren(
    el('h2', {}, 'Users'),
    el('div', { class: 'filters' }, search, status, group, node),
    el('p', { id: 'counts', class: 'counts' }),
    el('table', { id: 'users' }, el('thead', {}, el('tr', {}, ['User', 'Status', 'Text', 'Sessions', 'Nodes', 'Since / last seen'].map((h) => el('th', {}, h)))), el('tbody')),
    el('p', { class: 'pager' }, prev, ' ', next),
  );
  // The filters' choices come from the groups and nodes, read once a page.
  Promise.all([api('GET', '/api/v1/groups').catch(() => null), api('GET', '/api/v1/nodes').catch(() => null)]).then(([g, n]) => {
    if (seq !== S.seq) return;
    if (g && g.groups) { S.groups = g.groups; group.replaceChildren(...opts('any group', Object.keys(S.groups).sort(), L.group)); }
    if (n && n.nodes) { S.nodes = n.nodes; node.replaceChildren(...opts('any node', S.nodes.map((x) => x.node), L.node)); }
  });
  let busy = false;
  const load = async () => {
    if (busy) return;
    busy = true;
    try {
      const q = listQuery();
      const d = await api('GET', '/api/v1/users?' + q);
      if (seq !== S.seq || q !== listQuery()) return;
      showList(d);
      follow(d.users.map((u) => u.user), () => load().catch(() => {}));
    } finally { busy = false; }
  };
  const refresh = () => load().catch((e) => { if (e.status !== 401) toast(e.message, true); });
  poll(seq, POLL_LIST, load);
}

// newer returns u, or what the page holds of u's user when that is newer: a
// read of the API answered before a change whose event the stream has
// already brought must not undo it (versions only grow).
function newer(u) {
  const held = S.shown.get(u.user);
  return held && held.version > u.version ? held : u;
}

function showList(d) {
  const L = S.list;
  L.users = (d.users || []).map(newer);
  L.next = d.next || '';
  S.shown.clear();
  for (const u of L.users) S.shown.set(u.user, u);
  const tbody = document.querySelector('#users tbody');
  if (!tbody) return;
  tbody.replaceChildren(...L.users.map(userRow));
  if (!L.users.length) tbody.append(el('tr', {}, el('td', { colspan: 6, class: 'empty' }, 'No user matches.')));
  const c = d.counts || {};
  $('counts').replaceChildren(...['total', 'online', 'idle', 'away', 'busy', 'dnd', 'offline'].filter((k) => k in c).map((k) =>
    el('span', { class: 'count c-' + k, 'data-count': k }, el('b', {}, String(c[k])), ' ' + k)));
  $('prev').disabled = !L.cursor;
  $('next').disabled = !L.next;
}

function userRow(u) {
  const sessions = u.sessions || [];
  const nodes = [...new Set(sessions.map((s) => s.node))].sort().join(', ');
  const online = u.status !== 'offline';
  return el('tr', { dataset: { user: u.user, status: u.status, version: String(u.version) } },
    el('td', {}, el('a', { href: '#/user/' + enc(u.user) }, u.user)),
    el('td', {}, badge(u.status)),
    el('td', { class: 'text' }, u.text || ''),
    el('td', { class: 'num' }, String(sessions.length)),
    el('td', {}, nodes),
    el('td', {}, online ? when(u.since) : u.last_seen ? when(u.last_seen) : ''));
}

// ---- a user's page -----------------------------------------------------------

function userPage(seq) {
  const name = S.user;
  sessions.last = '';
  $('view').replaceChildren(
    el('p', {}, el('a', { href: '#/users' }, '‹ Users')),
    el('div', { id: 'uhead', class: 'uhead' }, el('h2', {}, name)),
    el('section', { class: 'actions' },
      el('h3', {}, 'Actions'),
      el('button', { id: 'kickall', type: 'button', class: 'danger', onclick: () => act('Kick every session of ' + name + '?', 'POST', '/api/v1/users/' + enc(name) + '/kick', {}, (d) => 'kicked ' + (d && d.kicked)) }, 'Kick all sessions'),
      ' ',
      el('select', { id: 'acctstatus', 'aria-label': 'account status' }, ['online', 'away', 'dnd', 'offline'].map((s) => el('option', { value: s }, s))),
      el('input', { id: 'accttext', placeholder: 'text (optional)', maxlength: 256, 'aria-label': 'account text' }),
      el('button', { id: 'acctset', type: 'button', onclick: () => {
        const status = $('acctstatus').value;
        const text = $('accttext').value;
        act('Set the account status of ' + name + ' to ' + status + '?', 'PUT', '/api/v1/users/' + enc(name) + '/account', { status, text }, () => 'account set');
      } }, 'Set account status'),
      ' ',
      el('button', { id: 'acctclear', type: 'button', onclick: () => act('Clear the account status of ' + name + '?', 'DELETE', '/api/v1/users/' + enc(name) + '/account', undefined, () => 'account cleared') }, 'Clear'),
      ' ',
      el('button', { id: 'forget', type: 'button', class: 'danger', onclick: () => act('Forget ' + name + '? Only an offline user can be forgotten.', 'DELETE', '/api/v1/users/' + enc(name), undefined, () => 'forgotten') }, 'Forget user')),
    el('h3', {}, 'Live sessions'),
    el('table', { id: 'live-sessions' }, el('thead', {}, el('tr', {}, ['Client id', 'Device', 'Node', 'Status', 'Connected', ''].map((h) => el('th', {}, h)))), el('tbody')),
    el('h3', {}, 'Recently ended'),
    el('ol', { id: 'ended', class: 'timeline' }),
    el('p', { id: 'held', class: 'held', hidden: true }),
  );
  const load = async () => {
    const u = await api('GET', '/api/v1/users/' + enc(name)).catch((e) => { if (e.status === 404) return null; throw e; });
    if (seq !== S.seq) return;
    if (u) {
      const shown = newer(u);
      S.shown.set(name, shown);
      userHead(shown);
    } else S.shown.set(name, { user: name, version: 0 });
    await sessions(seq);
  };
  poll(seq, POLL_OTHER, load).then(() => follow([name], () => load().catch(() => {})));
}

function userHead(u) {
  const h = $('uhead');
  if (!h) return;
  h.replaceChildren(
    el('h2', {}, u.user, ' ', badge(u.status)),
    el('p', { id: 'utext' }, u.text || ''),
    el('p', { class: 'meta' }, 'version ' + u.version + ' · ',
      u.status === 'offline' ? ['last seen ', when(u.last_seen)] : ['since ', when(u.since)]));
  h.dataset.status = u.status;
  h.dataset.version = String(u.version);
}

async function sessions(seq) {
  const name = S.user;
  if (!name) return;
  let d;
  try {
    d = await api('GET', '/api/v1/users/' + enc(name) + '/sessions');
  } catch (e) {
    if (e.status === 404) { if (seq === S.seq) $('uhead').replaceChildren(el('h2', {}, name), el('p', {}, 'Never seen.')); return; }
    throw e;
  }
  if (seq !== S.seq || name !== S.user) return;
  // Unchanged: the rows (and the buttons under the pointer) stay as they are.
  const key = JSON.stringify(d);
  if (key === sessions.last) return;
  sessions.last = key;
  const live = document.querySelector('#live-sessions tbody');
  const byTime = (a, b) => Date.parse(a.connected_at) - Date.parse(b.connected_at) || a.id.localeCompare(b.id);
  live.replaceChildren(...[...d.live].sort(byTime).map((s) => el('tr', { dataset: { client: s.id } },
    el('td', {}, el('code', {}, s.id)), el('td', {}, s.device || ''), el('td', {}, s.node), el('td', {}, badge(s.status)),
    el('td', {}, when(s.connected_at)),
    el('td', {}, el('button', { type: 'button', class: 'danger kick', onclick: () => act('Kick session ' + s.id + ' of ' + name + '? The client gets a DISCONNECT.', 'POST',
      '/api/v1/users/' + enc(name) + '/sessions/' + enc(s.id) + '/kick', {}, (r) => 'kicked ' + (r && r.kicked)) }, 'Kick')))));
  if (!d.live.length) live.append(el('tr', {}, el('td', { colspan: 6, class: 'empty' }, 'No live session.')));
  const ended = [...d.ended].sort((a, b) => Date.parse(b.ended_at) - Date.parse(a.ended_at));
  $('ended').replaceChildren(...ended.map((s) => el('li', { dataset: { client: s.id, reason: s.end_reason || '' } },
    when(s.ended_at), ' ', el('span', { class: 'reason r-' + (s.end_reason || 'none') }, s.end_reason || '?'), ' ',
    el('code', {}, s.id), s.device ? ' · ' + s.device : '', ' · ' + s.node, ' · connected ', when(s.connected_at))));
  if (!ended.length) $('ended').append(el('li', { class: 'empty' }, 'None.'));
  const acct = d.account || {};
  const head = $('uhead');
  head.querySelector('.acct')?.remove();
  head.append(el('p', { class: 'acct' }, 'Account status: ', acct.status ? [badge(acct.status), acct.text ? ' ' + acct.text : ''] : 'none (the devices decide)'));
  const held = $('held');
  held.hidden = !d.held;
  held.textContent = d.held ? 'Held back from observers: ' + JSON.stringify(d.held) : '';
}

async function act(question, method, path, body, done) {
  if (!(await confirmAction(question))) return;
  try {
    const d = await api(method, path, body);
    toast(done(d));
    if (S.view === 'user') sessions(S.seq).catch(() => {});
  } catch (e) {
    if (e.status !== 401) toast(e.message, true);
  }
}

// ---- groups -------------------------------------------------------------------

function groupsPage(seq) {
  $('view').replaceChildren(el('h2', {}, 'Groups'),
    el('table', { id: 'groups' }, el('thead', {}, el('tr', {}, ['Group', 'Members', 'Online', 'Occupancy'].map((h) => el('th', {}, h)))), el('tbody')));
  poll(seq, POLL_OTHER, async () => {
    const d = await api('GET', '/api/v1/groups').catch((e) => { if (e.status === 404) return { groups: {} }; throw e; });
    const names = Object.keys(d.groups || {}).sort();
    const snaps = await Promise.all(names.slice(0, 100).map((g) => api('GET', '/api/v1/groups/' + enc(g) + '?limit=1').catch(() => null)));
    if (seq !== S.seq) return;
    S.groups = d.groups || {};
    const tbody = document.querySelector('#groups tbody');
    tbody.replaceChildren(...names.map((g, i) => {
      const s = snaps[i];
      const total = s ? s.total : S.groups[g];
      const online = s ? s.online : 0;
      const pct = total ? Math.round((100 * online) / total) : 0;
      return el('tr', { dataset: { group: g } },
        el('td', {}, el('a', { href: '#/users', onclick: () => { Object.assign(S.list, { group: g, cursor: '', back: [] }); } }, g)),
        el('td', { class: 'num' }, String(total)), el('td', { class: 'num' }, String(online)),
        el('td', {}, el('meter', { min: 0, max: 100, value: pct, title: pct + '%' }), ' ' + pct + '%'));
    }));
    if (!names.length) tbody.append(el('tr', {}, el('td', { colspan: 4, class: 'empty' }, 'No group.')));
  });
}

// ---- nodes --------------------------------------------------------------------

function nodesPage(seq) {
  $('view').replaceChildren(el('h2', {}, 'Nodes'),
    el('table', { id: 'nodes' }, el('thead', {}, el('tr', {}, ['Node', 'State', 'Sessions', 'Incarnation', 'Said'].map((h) => el('th', {}, h)))), el('tbody')));
  poll(seq, POLL_OTHER, async () => {
    const d = await api('GET', '/api/v1/nodes');
    if (seq !== S.seq) return;
    S.nodes = d.nodes || [];
    nodesTable();
  });
}

function nodesTable() {
  const tbody = document.querySelector('#nodes tbody');
  if (!tbody) return;
  tbody.replaceChildren(...[...S.nodes].sort((a, b) => a.node.localeCompare(b.node)).map((n) => el('tr', { dataset: { node: n.node, state: n.state } },
    el('td', {}, el('a', { href: '#/users', onclick: () => { Object.assign(S.list, { node: n.node, cursor: '', back: [] }); } }, n.node)),
    el('td', {}, el('span', { class: 'badge n-' + n.state }, n.state), n.reported_by ? ' (reported by ' + n.reported_by + ')' : ''),
    el('td', { class: 'num' }, String(n.sessions)), el('td', {}, el('code', {}, n.incarnation)), el('td', {}, when(n.at)))));
}

// ---- start --------------------------------------------------------------------

document.addEventListener('DOMContentLoaded', async () => {
  $('login').addEventListener('submit', signIn);
  $('signout').addEventListener('click', () => signOut(''));
  $('confirm').addEventListener('cancel', () => { $('confirm').returnValue = 'cancel'; });
  window.addEventListener('hashchange', route);
  // Relative times age: they are written again every 10 s.
  setInterval(() => { for (const t of document.querySelectorAll('time[datetime]')) t.textContent = ago(t.getAttribute('datetime')); }, 10000);
  if (S.token) { start(); return; }
  // Without a stored token: an API with none (loopback) answers at once.
  const status = await probe().catch(() => 0);
  if (status === 200) start(); else signOut(status === 401 ? '' : 'The admin API did not answer (' + status + ').');
});
