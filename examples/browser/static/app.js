// The page: MQTT.js over WebSocket to presenced. Settings come from the
// query string (see examples/browser/doc.go): ws, group, users, username,
// password, prefix. presence-state.js holds the client rules (drop a version
// not above the one held; apply a group delta on its follows; on a gap,
// subscribe to the group topic again; a view with no presence/clock for two
// of its intervals is stale: everyone grey, "unknown"); this file only draws.
'use strict'
;(function () {
  const q = new URLSearchParams(location.search)
  const wsURL = q.get('ws') || 'ws://' + (location.hostname || '127.0.0.1') + ':1882/mqtt'
  const group = q.get('group') || 'team'
  const prefix = q.get('prefix') || 'presence'
  const users = (q.get('users') || '').split(',').map((u) => u.trim()).filter(Boolean)
  const filters = (users.length ? users.map((u) => prefix + '/users/' + u) : [prefix + '/users/+'])
    .concat(group ? [prefix + '/groups/' + group] : [])
    .concat([prefix + '/clock'])

  const state = PresenceState.newState(prefix)
  const $ = (id) => document.getElementById(id)
  const order = { online: 0, idle: 1, away: 2, busy: 3, dnd: 4, offline: 5 }

  function setConn (s, text) {
    $('conn').dataset.state = s
    $('conn').textContent = text
  }

  function person (name, status, detail) {
    const li = document.createElement('li')
    li.dataset.user = name
    li.dataset.status = status
    const dot = document.createElement('span')
    dot.className = 'dot'
    dot.title = status
    const n = document.createElement('span')
    n.className = 'name'
    n.textContent = name
    const st = document.createElement('span')
    st.className = 'status'
    st.textContent = status
    const d = document.createElement('span')
    d.className = 'detail'
    d.textContent = detail
    li.append(dot, n, st, d)
    return li
  }

  function sorted (entries) {
    return entries.sort((a, b) => (order[a[1].status] - order[b[1].status]) || (a[0] < b[0] ? -1 : 1))
  }

  function since (p) {
    if (p.status === 'offline') return p.last_seen ? 'last seen ' + new Date(p.last_seen).toLocaleTimeString() : ''
    return p.text || ''
  }

  function drawGroup () {
    const g = state.groups.get(group)
    if (!g || g.resyncing) return
    $('group-title').textContent = group
    $('group-count').textContent = g.online + ' of ' + g.total + ' online (version ' + g.version + ')'
    $('group-count').dataset.online = g.online
    $('members').replaceChildren(...sorted([...g.members.entries()]).map(([name, m]) => person(name, state.stale ? 'unknown' : m.status, since(m))))
  }

  function drawUsers () {
    $('users').replaceChildren(...sorted([...state.users.entries()]).map(([name, p]) => {
      const devices = (p.sessions || []).map((s) => s.device || s.id).join(', ')
      return person(name, PresenceState.shown(state, name), [since(p), devices].filter(Boolean).join(' · '))
    }))
  }

  function log (line) {
    const li = document.createElement('li')
    li.textContent = new Date().toLocaleTimeString() + '  ' + line
    $('log').prepend(li)
    while ($('log').children.length > 200) $('log').lastChild.remove()
  }

  $('group-title').textContent = group
  setConn('connecting', 'connecting to ' + wsURL)
  const client = mqtt.connect(wsURL, {
    protocolVersion: 5,
    clientId: 'browser-' + Math.random().toString(16).slice(2, 10),
    username: q.get('username') || undefined,
    password: q.get('password') || undefined,
    clean: true,
    keepalive: 30,
    reconnectPeriod: 2000
  })
  client.on('connect', () => {
    setConn('connected', 'connected to ' + wsURL)
    // A clean session holds no subscription: subscribe on every connection;
    // the retained snapshots come first.
    client.subscribe(filters, { qos: 1 }, (err) => { if (err) log('error subscribe: ' + err.message) })
  })
  client.on('reconnect', () => setConn('connecting', 'reconnecting to ' + wsURL))
  client.on('offline', () => setConn('offline', 'offline: ' + wsURL))
  client.on('error', (err) => log('error ' + err.message))
  client.on('message', (topic, payload) => {
    let events
    try {
      events = PresenceState.handle(state, topic, payload.toString())
    } catch (err) {
      log('bad ' + topic + ': ' + err.message)
      return
    }
    for (const e of events) {
      log(e.line)
      // A gap: subscribe again, the retained snapshot comes first (MQTT.js
      // sends a SUBSCRIBE for a filter it holds only with resubscribe).
      if (e.resubscribe) client.subscribe({ [e.resubscribe]: { qos: 1 }, resubscribe: true })
    }
    if (events.length) {
      drawUsers()
      drawGroup()
    }
  })
  // The staleness check, on the page's clock: grey everyone out when the
  // node's clock went silent (the link or the node died silently).
  setInterval(() => {
    for (const e of PresenceState.tick(state, Date.now())) {
      log(e.line)
      drawUsers()
      drawGroup()
    }
  }, 250)
  window.presenceClient = client // for the console
})()
