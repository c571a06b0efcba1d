// Package node composes the presenced binary from its parts: a mochi
// server with presenced's listeners (TCP and WebSocket, with TLS when
// configured), authentication (package auth's Hook, or none on loopback),
// presence attached through the same API an embedding program uses
// (package presenced) as the access authority, and the admin HTTP port
// behind its token. It is wiring only; nothing imports it but cmd/presenced
// and the tests.
package node
