package wire

import mqtt "github.com/mochi-mqtt/server/v2"

// NeverBlocks reports whether the client's connection says its writes
// never block (presenced's listener).
func NeverBlocks(cl *mqtt.Client) bool {
	nb, ok := cl.Net.Conn.(interface{ WritesNeverBlock() bool })
	return ok && nb.WritesNeverBlock()
}

// Idle reports whether nothing holds the client's lock right now: mochi
// writes to the socket under it, so a held lock may be a write stuck on a
// client that does not read.
func Idle(cl *mqtt.Client) bool {
	if !cl.TryLock() {
		return false
	}
	cl.Unlock()
	return true
}
