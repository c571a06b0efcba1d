// The client rules of presence-state.js on crafted messages:
// node --test test/presence-state.test.js
// (TestExamplesNode runs it). The broker never sends a stale version or a
// group gap on its own, so these cases are made up here.
'use strict'

const test = require('node:test')
const assert = require('node:assert/strict')
const { newState, handle, tick, shown } = require('../presence-state')

const user = (name, status, version, sessions) => JSON.stringify({
  user: name, status, text: '', version, since: '2026-11-30T03:30:00.000Z', last_seen: null, sessions: sessions || []
})
const member = (name, status, version) => ({ user: name, status, last_seen: null, version })
const snapshot = (version, members) => JSON.stringify({
  group: 'team', version, members, online: members.filter((m) => m.status !== 'offline').length, total: members.length, by_status: {}
})
const delta = (follows, changes, removed) => JSON.stringify(Object.assign({
  group: 'team', version: follows + 1, follows, changes, online: 0, total: 0, by_status: {}
}, removed ? { removed } : {}))
const lines = (events) => events.map((e) => e.line)

test('a user version not above the one held is dropped', () => {
  const s = newState()
  assert.deepEqual(lines(handle(s, 'presence/users/alice', user('alice', 'online', 10, [{}]))), ['user alice online v10 sessions=1'])
  assert.deepEqual(lines(handle(s, 'presence/users/alice', user('alice', 'away', 10))), ['drop user alice v10 held v10'])
  assert.deepEqual(lines(handle(s, 'presence/users/alice', user('alice', 'offline', 9))), ['drop user alice v9 held v10'])
  assert.equal(s.users.get('alice').status, 'online')
  assert.deepEqual(lines(handle(s, 'presence/users/alice', user('alice', 'away', 11, [{}]))), ['user alice away v11 sessions=1'])
  assert.equal(s.users.get('alice').status, 'away')
})

test('an empty payload forgets the user; users are held apart', () => {
  const s = newState()
  handle(s, 'presence/users/alice', user('alice', 'offline', 5))
  handle(s, 'presence/users/bob', user('bob', 'online', 3, [{}]))
  assert.deepEqual(lines(handle(s, 'presence/users/alice', '')), ['user alice forgotten'])
  assert.equal(s.users.has('alice'), false)
  assert.equal(s.users.get('bob').version, 3)
  assert.deepEqual(handle(s, 'presence/users/alice', ''), [])
})

test('a group snapshot, then deltas that follow it', () => {
  const s = newState()
  const ev = handle(s, 'presence/groups/team', snapshot(7, [member('ann', 'busy', 100), member('bob', 'offline', 90)]))
  assert.deepEqual(lines(ev), ['group team snapshot v7 online=1 total=2 ann=busy bob=offline'])
  assert.deepEqual(lines(handle(s, 'presence/groups/team', delta(7, [member('bob', 'online', 120)], ['ann']))),
    ['group team v8 bob online', 'group team v8 ann removed', 'group team v8 online=0 total=0'])
  const g = s.groups.get('team')
  assert.equal(g.version, 8)
  assert.deepEqual([...g.members.keys()], ['bob'])
  assert.equal(g.members.get('bob').status, 'online')
})

test('a duplicate or older delta is dropped', () => {
  const s = newState()
  handle(s, 'presence/groups/team', snapshot(7, [member('ann', 'online', 100)]))
  handle(s, 'presence/groups/team', delta(7, [member('ann', 'away', 110)]))
  assert.deepEqual(lines(handle(s, 'presence/groups/team', delta(7, [member('ann', 'dnd', 105)]))), ['drop group team v8 held v8'])
  assert.deepEqual(lines(handle(s, 'presence/groups/team', delta(6, [member('ann', 'dnd', 99)]))), ['drop group team v7 held v8'])
  assert.equal(s.groups.get('team').members.get('ann').status, 'away')
})

test('a gap asks for the group topic again, and the snapshot heals it', () => {
  const s = newState()
  handle(s, 'presence/groups/team', snapshot(7, [member('ann', 'online', 100)]))
  const ev = handle(s, 'presence/groups/team', delta(8, [member('ann', 'away', 120)])) // v8 was missed
  assert.deepEqual(lines(ev), ['gap group team follows v8 held v7: resubscribe'])
  assert.equal(ev[0].resubscribe, 'presence/groups/team')
  assert.equal(s.groups.get('team').members.get('ann').status, 'online') // not applied
  // Deltas before the snapshot arrives are dropped, and ask nothing more.
  assert.deepEqual(lines(handle(s, 'presence/groups/team', delta(9, [member('ann', 'dnd', 130)]))), ['drop group team v10 awaiting snapshot'])
  // The snapshot replaces what was held; the next delta follows it.
  handle(s, 'presence/groups/team', snapshot(10, [member('ann', 'dnd', 130)]))
  assert.equal(s.groups.get('team').resyncing, false)
  assert.deepEqual(lines(handle(s, 'presence/groups/team', delta(10, [member('ann', 'online', 140)]))),
    ['group team v11 ann online', 'group team v11 online=0 total=0'])
})

test('a delta with no snapshot held is a gap; an older snapshot is dropped', () => {
  const s = newState()
  const ev = handle(s, 'presence/groups/team', delta(3, [member('ann', 'online', 1)]))
  assert.equal(ev[0].kind, 'gap')
  assert.equal(ev[0].resubscribe, 'presence/groups/team')
  handle(s, 'presence/groups/team', snapshot(5, [member('ann', 'online', 1)]))
  assert.deepEqual(lines(handle(s, 'presence/groups/team', snapshot(4, []))), ['drop group team snapshot v4 held v5'])
  assert.equal(s.groups.get('team').version, 5)
})

test('another prefix, and topics that are not presence', () => {
  const s = newState('tenant/presence')
  assert.equal(handle(s, 'tenant/presence/users/alice', user('alice', 'online', 1, [{}])).length, 1)
  assert.deepEqual(handle(s, 'presence/users/alice', user('alice', 'online', 2, [{}])), [])
  assert.deepEqual(handle(s, 'tenant/presence/nodes/n1', '{}'), [])
  assert.deepEqual(handle(s, 'tenant/presence/users/a/b', '{}'), [])
})

// presence/clock, on an injected clock (milliseconds): the view goes stale
// 2 intervals after the last clock message, shows every user unknown, and
// is fresh again on the next one.
const clock = (seq, opts) => JSON.stringify(Object.assign({
  node: 'node-a', incarnation: 'inc-1', seq, version: 0, time: '2026-12-02T07:00:00.000Z', interval_ms: 1000
}, opts || {}))

test('without a clock message the view is never stale', () => {
  const s = newState()
  handle(s, 'presence/users/alice', user('alice', 'online', 1, [{}]), 0)
  assert.deepEqual(tick(s, 3600 * 1000), [])
  assert.equal(s.stale, false)
  assert.equal(shown(s, 'alice'), 'online')
  assert.equal(shown(s, 'nobody'), undefined)
})

test('stale 2 intervals after the last clock, every user unknown, fresh on the next', () => {
  const s = newState()
  assert.deepEqual(lines(handle(s, 'presence/clock', clock(1), 10_000)), ['clock node=node-a interval=1000ms'])
  handle(s, 'presence/users/alice', user('alice', 'online', 1, [{}]), 10_100)
  handle(s, 'presence/users/bob', user('bob', 'away', 2, [{}]), 10_200)
  assert.deepEqual(handle(s, 'presence/clock', clock(2), 11_000), []) // nothing to say
  assert.deepEqual(tick(s, 13_000), []) // exactly 2 intervals: not yet
  assert.equal(shown(s, 'alice'), 'online')
  assert.deepEqual(lines(tick(s, 13_001)), ['stale node=node-a silent=2001ms: 2 users unknown'])
  assert.equal(s.stale, true)
  assert.equal(shown(s, 'alice'), 'unknown')
  assert.equal(shown(s, 'bob'), 'unknown')
  assert.deepEqual(tick(s, 20_000), []) // said once
  // A user message does not make the view fresh: only the clock does.
  handle(s, 'presence/users/alice', user('alice', 'busy', 3, [{}]), 20_100)
  assert.equal(shown(s, 'alice'), 'unknown')
  assert.deepEqual(lines(handle(s, 'presence/clock', clock(3), 21_000)), ['fresh node=node-a seq=3 silent=10000ms'])
  assert.equal(s.stale, false)
  assert.equal(shown(s, 'alice'), 'busy')
  assert.equal(shown(s, 'bob'), 'away')
  assert.deepEqual(tick(s, 23_000), [])
})

test('the interval comes from the message; a new node or incarnation is told', () => {
  const s = newState('tenant/presence')
  assert.deepEqual(handle(s, 'presence/clock', clock(1), 0), []) // another prefix
  assert.equal(s.clock, null)
  handle(s, 'tenant/presence/clock', clock(1, { interval_ms: 5000 }), 0)
  assert.deepEqual(tick(s, 10_000), [])
  assert.equal(tick(s, 10_001)[0].kind, 'stale')
  const ev = handle(s, 'tenant/presence/clock', clock(1, { node: 'node-b', incarnation: 'inc-9', interval_ms: 2000 }), 30_000)
  assert.deepEqual(lines(ev), ['clock node=node-b interval=2000ms', 'fresh node=node-b seq=1 silent=30000ms'])
  assert.deepEqual(tick(s, 34_000), [])
  assert.equal(tick(s, 34_001)[0].kind, 'stale')
})
