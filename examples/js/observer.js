#!/usr/bin/env node
// observer.js: watches presenced with MQTT.js and prints one line per change.
//
//   node observer.js --url mqtt://127.0.0.1:1883 --group team
//   node observer.js --url ws://127.0.0.1:1882/mqtt --user alice --user bob
//
// It subscribes to presence/users/+ (or to presence/users/{user} for each
// --user) and to presence/groups/{group} for each --group, keeps each user's
// and group's state with presence-state.js (drops a version not above the
// one held, applies a group delta only on its follows, subscribes again on a
// gap) and prints what changed. It also subscribes to presence/clock, the
// node's heartbeat: when none has come for two of its intervals (the link
// or the node died silently) it prints "stale ..." and every user as
// "unknown", and "fresh ..." and every user again at the next one. It
// prints "ready" once every subscription is granted, and ends cleanly (a
// DISCONNECT) on SIGINT or SIGTERM.
'use strict'

const mqtt = require('mqtt')
const { newState, handle, tick, shown } = require('./presence-state')

function usage (msg) {
  if (msg) console.error('observer.js: ' + msg)
  console.error('usage: node observer.js [--url URL] [--username U] [--password P] [--client-id ID]\n' +
    '         [--group G]... [--user U]... [--prefix presence] [--protocol 5|4]')
  process.exit(2)
}

function parseArgs (argv) {
  const o = { url: 'mqtt://127.0.0.1:1883', groups: [], users: [], prefix: 'presence', protocol: 5 }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    const v = () => { if (i + 1 >= argv.length) usage(a + ' needs a value'); return argv[++i] }
    switch (a) {
      case '--url': o.url = v(); break
      case '--username': o.username = v(); break
      case '--password': o.password = v(); break
      case '--client-id': o.clientId = v(); break
      case '--group': o.groups.push(v()); break
      case '--user': o.users.push(v()); break
      case '--prefix': o.prefix = v(); break
      case '--protocol': o.protocol = Number(v()); break
      case '-h': case '--help': usage()
      default: usage('unknown argument ' + a) // eslint-disable-line no-fallthrough
    }
  }
  return o
}

function main () {
  const o = parseArgs(process.argv.slice(2))
  const filters = (o.users.length ? o.users.map((u) => o.prefix + '/users/' + u) : [o.prefix + '/users/+'])
    .concat(o.groups.map((g) => o.prefix + '/groups/' + g))
    .concat([o.prefix + '/clock'])
  const state = newState(o.prefix)
  const say = (line) => process.stdout.write(line + '\n')

  const client = mqtt.connect(o.url, {
    protocolVersion: o.protocol,
    clientId: o.clientId || 'observer-' + process.pid + '-' + Date.now(),
    username: o.username,
    password: o.password,
    clean: true, // the retained snapshots come again on every connection
    keepalive: 30,
    reconnectPeriod: 1000
  })

  let ready = false
  client.on('connect', () => {
    say('connected ' + o.url)
    // A new connection has no subscriptions (clean start): subscribe, and
    // take every retained snapshot as it comes.
    client.subscribe(filters, { qos: 1 }, (err, granted) => {
      if (err) { say('error subscribe: ' + err.message); return }
      const refused = (granted || []).filter((g) => g.qos > 2)
      if (refused.length) { say('error refused ' + refused.map((g) => g.topic).join(' ')); return }
      if (!ready) { ready = true; say('ready') }
    })
  })
  client.on('reconnect', () => say('reconnecting'))
  client.on('error', (err) => say('error ' + err.message))

  // Every user as the view shows them now (after stale or fresh).
  const showAll = () => {
    for (const [u, p] of state.users) say('user ' + u + ' ' + shown(state, u) + ' v' + p.version)
  }
  // The staleness check: the state decides, on this process's clock.
  const ticker = setInterval(() => {
    for (const e of tick(state, Date.now())) {
      say(e.line)
      showAll()
    }
  }, 100)

  client.on('message', (topic, payload) => {
    let events
    try {
      events = handle(state, topic, payload.toString('utf8'), Date.now())
    } catch (err) {
      say('bad ' + topic + ': ' + err.message)
      return
    }
    for (const e of events) {
      say(e.line)
      if (e.kind === 'fresh') showAll()
      if (e.resubscribe) {
        // Subscribing again to a filter we hold replaces the subscription
        // and sends its retained message, the snapshot, first. MQTT.js
        // sends a SUBSCRIBE for a filter it holds only with resubscribe.
        client.subscribe({ [e.resubscribe]: { qos: 1 }, resubscribe: true }, (err) => {
          if (err) say('error resubscribe ' + e.resubscribe + ': ' + err.message)
        })
      }
    }
  })

  let ending = false
  const end = () => {
    if (ending) return
    ending = true
    clearInterval(ticker)
    client.end(false, {}, () => { say('end'); process.exit(0) })
  }
  process.on('SIGINT', end)
  process.on('SIGTERM', end)
}

main()
