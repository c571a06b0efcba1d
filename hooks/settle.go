package hooks

import (
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
)

// takeoverSettle is how long a CONNECT whose client id is in the takeover
// battle detector's records waits for the live connection with that id to
// end on its own before it counts as a takeover. A client that sends
// DISCONNECT and connects again at once (the Eclipse paho interoperability
// suite does, test after test) often reaches the broker before the old
// connection's DISCONNECT is read: that is a reconnect, not two devices
// fighting over the id, and on a busy machine five of them made a battle
// whose refusal (CONNACK 0x9F) failed the suite (issue 18). A connection in
// a real battle stays live, and its taker waits this long once per
// takeover; a first takeover of an id never waits.
const takeoverSettle = 100 * time.Millisecond

// settle waits until old has closed, at most takeoverSettle, when id has
// been taken over lately (a battle could be in the making). It runs on the
// new connection's goroutine before its CONNACK.
func (h *Presence) settle(id string, old *mqtt.Client) {
	if !h.battles.watching(id) || old.Closed() {
		return
	}
	deadline := time.Now().Add(takeoverSettle)
	for !old.Closed() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // mochi offers no channel for a client's end
	}
}

// watching reports whether the detector holds takeovers of id.
func (b *battles) watching(id string) bool {
	if !b.enabled() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.ids[id]
	return ok
}
