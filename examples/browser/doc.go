// Command browser serves a web page that shows presence live: who of a
// group is online (presence/groups/{group}: the retained snapshot, then
// deltas) and every change of the users (presence/users/+), over MQTT.js
// in the browser, connected to presenced's WebSocket listener.
//
// The page (static/) is built into the program; MQTT.js's browser bundle
// (mqtt.min.js) and the client rules it shares with the Node observer
// (presence-state.js) are served from examples/js, where `npm ci` installs
// MQTT.js (make deps does). Nothing comes from a CDN.
//
//	go run ./cmd/presenced                     # MQTT on 1883, WebSocket on 1882
//	cd examples/js && npm ci && cd ../..
//	go run ./examples/browser                  # http://127.0.0.1:8090/
//
// The page takes its settings from the query string: ws (the WebSocket URL,
// default ws://{the page's host}:1882/mqtt), group (default team), users (a
// comma-separated list to watch instead of presence/users/+), username and
// password (where presenced requires them; a demo only: the query string is
// not a secret), prefix (default presence). For example
// http://127.0.0.1:8090/?ws=ws://127.0.0.1:1882/mqtt&group=team.
package main
