#!/usr/bin/env node
// reconnect.js: an MQTT.js client that calls client.reconnect() K times, as a
// browser or Node application does, for presenced's integration test
// TestMQTTJSReconnectNeverOffline (integration/mqttjs_test.go).
//
// It connects as --user to --url (mqtt://host:port or ws://host:port/mqtt),
// waits for the CONNACK, then K times: calls client.reconnect() and waits for
// the next 'connect' event. MQTT.js's reconnect() on a connected client sends
// a clean DISCONNECT, closes the socket and connects again at once.
//
// Then it prints {"event":"ready"} and holds the connection until its stdin
// closes (or at once with --no-hold), ends cleanly (client.end(): DISCONNECT)
// and prints {"event":"end"}. Every event is one JSON line on stdout, with
// t_ms (milliseconds since the script started, monotonic) and wall (the Unix
// time in milliseconds). The last line before "ready" is a summary with the
// time from each DISCONNECT to the next CONNECT and CONNACK.
//
// Exit status: 0 on success, 1 on an error (an "error" line says which), 2
// when --timeout-ms passes first.
//
// Usage:
//   node reconnect.js --url mqtt://127.0.0.1:1883 --user alice \
//     [--protocol 5|4] [--count 5] [--client-id id] [--timeout-ms 60000] [--no-hold]
'use strict'

const fs = require('fs')
const path = require('path')

const start = process.hrtime.bigint()
function emit (event, fields) {
  const ms = Number(process.hrtime.bigint() - start) / 1e6
  const line = Object.assign({ event, t_ms: Math.round(ms * 1000) / 1000, wall: Date.now() }, fields)
  process.stdout.write(JSON.stringify(line) + '\n')
  return ms
}

function fail (message, code) {
  emit('error', { message: String(message) })
  process.exit(code || 1)
}

function parseArgs (argv) {
  const o = { protocol: 5, count: 5, timeoutMs: 60000, hold: true }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    const next = () => {
      if (i + 1 >= argv.length) fail(`${a} needs a value`)
      return argv[++i]
    }
    switch (a) {
      case '--url': o.url = next(); break
      case '--user': o.user = next(); break
      case '--client-id': o.clientId = next(); break
      case '--protocol': o.protocol = Number(next()); break
      case '--count': o.count = Number(next()); break
      case '--timeout-ms': o.timeoutMs = Number(next()); break
      case '--no-hold': o.hold = false; break
      default: fail(`unknown argument ${a}`)
    }
  }
  if (!o.url || !/^(mqtt|ws):\/\//.test(o.url)) fail('--url mqtt://host:port or ws://host:port/path is required')
  if (!o.user) fail('--user is required')
  if (o.protocol !== 5 && o.protocol !== 4) fail('--protocol must be 5 or 4 (3.1.1)')
  if (!Number.isInteger(o.count) || o.count < 0) fail('--count must be an integer >= 0')
  if (!(o.timeoutMs > 0)) fail('--timeout-ms must be > 0')
  return o
}

let mqtt
try {
  mqtt = require('mqtt')
} catch (e) {
  fail(`cannot load mqtt (run \`make deps\`, or \`npm ci\` in ${__dirname}): ${e.message}`)
}
let mqttVersion = 'unknown'
try {
  mqttVersion = JSON.parse(fs.readFileSync(path.join(__dirname, 'node_modules', 'mqtt', 'package.json'), 'utf8')).version
} catch (e) { /* reported as unknown */ }

const opts = parseArgs(process.argv.slice(2))
const clientId = opts.clientId || `mqttjs-${opts.user}-${process.pid}`
const timer = setTimeout(() => fail(`timeout after ${opts.timeoutMs} ms`, 2), opts.timeoutMs)

emit('start', { url: opts.url, user: opts.user, client_id: clientId, protocol: opts.protocol, count: opts.count, mqtt: mqttVersion, node: process.version })

const client = mqtt.connect(opts.url, {
  protocolVersion: opts.protocol,
  clientId,
  username: opts.user,
  clean: true,
  connectTimeout: 5000
  // reconnectPeriod stays MQTT.js's default (1 s), as in an application:
  // an unexpected loss would show as an "offline" event and a connect of its own.
})

let connects = 0 // CONNACKs received
let ending = false
const cycles = [] // per reconnect: times of reconnect(), DISCONNECT, close, CONNECT, CONNACK
let cur = null

client.on('packetsend', (p) => {
  if (p.cmd === 'disconnect') {
    const ms = emit('disconnect_sent', { n: connects })
    if (cur) cur.disconnect = ms
  } else if (p.cmd === 'connect') {
    const ms = emit('connect_sent', { n: connects })
    if (cur) cur.connectSent = ms
  }
})
client.on('close', () => {
  const ms = emit('close', { n: connects })
  if (cur && cur.close === undefined) cur.close = ms
})
client.on('offline', () => emit('offline', { n: connects }))
client.on('error', (e) => fail(`client error: ${e.message}`))

client.on('connect', (ack) => {
  const ms = emit('connect', { n: connects, session_present: !!ack.sessionPresent, reason: ack.reasonCode === undefined ? ack.returnCode : ack.reasonCode })
  if (cur) {
    cur.connack = ms
    cycles.push(cur)
    cur = null
  }
  connects++
  if (ending) return
  if (connects <= opts.count) {
    // reconnect() from the 'connect' handler would run inside MQTT.js's
    // CONNACK handling: call it on the next turn, as an application's click would.
    setImmediate(() => {
      cur = { call: emit('reconnect_call', { n: connects }) }
      client.reconnect()
    })
    return
  }
  done()
})

function stats (xs) {
  if (xs.length === 0) return null
  const s = xs.slice().sort((a, b) => a - b)
  const r = (v) => Math.round(v * 1000) / 1000
  return { min: r(s[0]), median: r(s[Math.floor((s.length - 1) / 2)]), max: r(s[s.length - 1]) }
}

function done () {
  const gaps = cycles.map((c) => ({
    disconnect_to_connect_ms: c.connectSent - c.disconnect,
    disconnect_to_connack_ms: c.connack - c.disconnect,
    disconnect_to_close_ms: c.close === undefined ? null : c.close - c.disconnect
  }))
  emit('summary', {
    reconnects: cycles.length,
    disconnect_to_connect_ms: stats(gaps.map((g) => g.disconnect_to_connect_ms)),
    disconnect_to_connack_ms: stats(gaps.map((g) => g.disconnect_to_connack_ms)),
    cycles: gaps
  })
  emit('ready', { reconnects: cycles.length })
  if (!opts.hold) return finish()
  process.stdin.on('data', () => {})
  process.stdin.on('end', finish)
  process.stdin.resume()
}

function finish () {
  if (ending) return
  ending = true
  client.end(false, {}, (err) => {
    if (err) fail(`end: ${err.message}`)
    clearTimeout(timer)
    emit('end', { connects })
    process.exit(0)
  })
}
