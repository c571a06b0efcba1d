// presence-state.js: what a presenced client must do with what it receives,
// as one pure function with no I/O (examples/README.md states the rules):
//
//   - presence/users/{user}: keep the payload whose version is above the
//     one held, drop any other (a stale or duplicate delivery); an empty
//     payload means the broker forgot the user.
//   - presence/groups/{group}: a message with "members" is a snapshot and
//     replaces what is held (unless it is older); a delta applies only when
//     its "follows" is the version held; one at or below it is dropped; a
//     gap (follows above it, or a delta with no snapshot held) means
//     subscribing to the group topic again, which brings the retained
//     snapshot first. Deltas that come meanwhile are dropped.
//   - presence/clock: the node's heartbeat, every interval_ms. Once one has
//     come, a view that hears none for 2 x interval_ms is stale (the link
//     or the node died silently): every user is shown unknown (grey), not
//     as last heard, until the next clock message. A broker with the clock
//     off sends none, and the view is never stale.
//
// handle(state, topic, payload, now) folds one message into state and
// returns the events it made, each with a one-line text (line) and, for a
// gap, the topic to subscribe to again (resubscribe). tick(state, now),
// called on a timer, returns the stale event when the clock went silent.
// now is the time in milliseconds (Date.now() when left out): the state
// reads no clock of its own, so tests drive it. shown(state, user) is what
// to show for a user: its status, or 'unknown' while the view is stale.
// Node's observer.js and the browser page both use it;
// test/presence-state.test.js tests it.
(function (root, factory) {
  if (typeof module === 'object' && module.exports) module.exports = factory()
  else root.PresenceState = factory()
})(typeof self !== 'undefined' ? self : this, function () {
  'use strict'

  function newState (prefix) {
    // clock: the last presence/clock heard (null: none yet), with the
    // local time it came at; stale: no clock for 2 intervals since.
    return { prefix: prefix || 'presence', users: new Map(), groups: new Map(), clock: null, stale: false }
  }

  function summary (p) {
    return p.status + ' v' + p.version + ' sessions=' + (p.sessions ? p.sessions.length : 0)
  }

  function handleUser (state, user, text) {
    if (text === '') {
      if (!state.users.has(user)) return []
      state.users.delete(user)
      return [{ kind: 'user', user, forgotten: true, line: 'user ' + user + ' forgotten' }]
    }
    const p = JSON.parse(text)
    const held = state.users.get(user)
    if (held && !(p.version > held.version)) {
      return [{ kind: 'drop', user, line: 'drop user ' + user + ' v' + p.version + ' held v' + held.version }]
    }
    state.users.set(user, p)
    return [{ kind: 'user', user, presence: p, previous: held, line: 'user ' + user + ' ' + summary(p) }]
  }

  function occupancy (g) {
    return 'online=' + g.online + ' total=' + g.total
  }

  function handleGroup (state, name, topic, text) {
    if (text === '') { // the group was deleted
      if (!state.groups.has(name)) return []
      state.groups.delete(name)
      return [{ kind: 'group', group: name, line: 'group ' + name + ' deleted' }]
    }
    const m = JSON.parse(text)
    const held = state.groups.get(name)
    if (Array.isArray(m.members)) {
      if (held && !held.resyncing && m.version < held.version) {
        return [{ kind: 'drop', group: name, line: 'drop group ' + name + ' snapshot v' + m.version + ' held v' + held.version }]
      }
      const g = { version: m.version, members: new Map(), online: m.online, total: m.total, by_status: m.by_status, resyncing: false }
      for (const mem of m.members) g.members.set(mem.user, mem)
      state.groups.set(name, g)
      const list = m.members.map((mem) => mem.user + '=' + mem.status).join(' ')
      return [{ kind: 'snapshot', group: name, line: 'group ' + name + ' snapshot v' + m.version + ' ' + occupancy(g) + (list ? ' ' + list : '') }]
    }
    if (held && held.resyncing) {
      return [{ kind: 'drop', group: name, line: 'drop group ' + name + ' v' + m.version + ' awaiting snapshot' }]
    }
    if (held && m.version <= held.version) {
      return [{ kind: 'drop', group: name, line: 'drop group ' + name + ' v' + m.version + ' held v' + held.version }]
    }
    if (!held || m.follows !== held.version) {
      if (held) held.resyncing = true
      else state.groups.set(name, { version: 0, members: new Map(), online: 0, total: 0, by_status: {}, resyncing: true })
      return [{
        kind: 'gap',
        group: name,
        resubscribe: topic,
        line: 'gap group ' + name + ' follows v' + m.follows + ' held v' + (held ? held.version : 0) + ': resubscribe'
      }]
    }
    const out = []
    for (const mem of m.changes || []) {
      held.members.set(mem.user, mem)
      out.push({ kind: 'member', group: name, user: mem.user, member: mem, line: 'group ' + name + ' v' + m.version + ' ' + mem.user + ' ' + mem.status })
    }
    for (const user of m.removed || []) {
      held.members.delete(user)
      out.push({ kind: 'removed', group: name, user, line: 'group ' + name + ' v' + m.version + ' ' + user + ' removed' })
    }
    held.version = m.version
    held.online = m.online
    held.total = m.total
    held.by_status = m.by_status
    out.push({ kind: 'occupancy', group: name, line: 'group ' + name + ' v' + m.version + ' ' + occupancy(held) })
    return out
  }

  // handleClock takes a presence/clock message heard at now: the view is
  // fresh again if it was stale.
  function handleClock (state, text, now) {
    const c = JSON.parse(text)
    const held = state.clock
    state.clock = { node: c.node, incarnation: c.incarnation, seq: c.seq, version: c.version, interval: c.interval_ms, at: now }
    const out = []
    if (!held || held.node !== c.node || held.incarnation !== c.incarnation) {
      out.push({ kind: 'clock', clock: state.clock, line: 'clock node=' + c.node + ' interval=' + c.interval_ms + 'ms' })
    }
    if (state.stale) {
      state.stale = false
      out.push({ kind: 'fresh', clock: state.clock, line: 'fresh node=' + c.node + ' seq=' + c.seq + ' silent=' + (now - held.at) + 'ms' })
    }
    return out
  }

  // staleAfter is how long a view may hear no clock: two intervals.
  function staleAfter (interval) {
    return 2 * interval
  }

  // tick tells whether the view went stale at now: once, when the last
  // clock is more than two intervals old.
  function tick (state, now) {
    const c = state.clock
    if (!c || state.stale || now - c.at <= staleAfter(c.interval)) return []
    state.stale = true
    return [{ kind: 'stale', line: 'stale node=' + c.node + ' silent=' + (now - c.at) + 'ms: ' + state.users.size + ' users unknown' }]
  }

  // shown is what to show for user: 'unknown' while the view is stale,
  // else the status held (undefined: not known).
  function shown (state, user) {
    const p = state.users.get(user)
    if (!p) return undefined
    return state.stale ? 'unknown' : p.status
  }

  // handle folds one message (topic, payload as a string) heard at now
  // (milliseconds; Date.now() when left out) into state.
  function handle (state, topic, text, now) {
    if (now === undefined) now = Date.now()
    const parts = topic.split('/')
    const pre = state.prefix.split('/')
    if (topic === state.prefix + '/clock') return handleClock(state, text, now)
    if (parts.length !== pre.length + 2 || pre.some((p, i) => parts[i] !== p)) return []
    const kind = parts[pre.length]
    const name = parts[pre.length + 1]
    if (kind === 'users') return handleUser(state, name, text)
    if (kind === 'groups') return handleGroup(state, name, topic, text)
    return []
  }

  return { newState, handle, tick, shown, staleAfter }
})
