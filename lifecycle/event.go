package lifecycle

import (
	"crypto/sha1" //nolint:gosec // a name-based UUID (RFC 9562 version 5) is SHA-1 by definition
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/presenced/presenced/presence"
)

// Dialect turns an event into the message one output publishes; ok is
// false when the dialect has nothing to say of it (a kind it does not
// publish, or a client id that cannot be a topic level).
type Dialect interface {
	Encode(ev presence.LifecycleEvent) (topic string, payload []byte, ok bool)
}

// Why a CONNECT was refused (LifecycleEvent.Reason of a ConnectFailed).
const (
	RefusedAuth     presence.EndReason = "auth"     // bad credentials, not authorized, bad identity
	RefusedThrottle presence.EndReason = "throttle" // a limit, a rate, a takeover battle, a busy server
	RefusedProtocol presence.EndReason = "protocol" // a protocol error, an invalid client id or will topic
	RefusedServer   presence.EndReason = "server"   // the node drains, shuts down or sends clients elsewhere
)

// topicLevel reports whether id can be one topic level of a published
// topic: AWS IoT sends no lifecycle event for a client id with "#" or "+",
// and neither do we (nor for an empty one).
func topicLevel(id string) bool { return id != "" && !strings.ContainsAny(id, "#+") }

// uuidSpace is the namespace of presenced's session identifiers (a
// version 4 UUID drawn once).
var uuidSpace = [16]byte{0x5c, 0x2e, 0x8b, 0x61, 0x0f, 0x3d, 0x4a, 0x7e, 0x9b, 0x14, 0x6d, 0x52, 0xa0, 0xc3, 0x77, 0x19}

// SessionIdentifier is the UUID of one session, derived from its user,
// client id and epoch only (RFC 9562 version 5, name-based), so every node
// names a session alike; written as 32 hex digits, as AWS's samples are.
func SessionIdentifier(user, clientID string, epoch uint64) string {
	h := sha1.New() //nolint:gosec // see the import
	h.Write(uuidSpace[:])
	h.Write([]byte(user))
	h.Write([]byte{0})
	h.Write([]byte(clientID))
	h.Write([]byte{0})
	h.Write([]byte(strconv.FormatUint(epoch, 10)))
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = u[6]&0x0f | 0x50 // version 5
	u[8] = u[8]&0x3f | 0x80 // RFC 9562 variant
	return hex.EncodeToString(u[:])
}

// millis is t in milliseconds since the epoch (0 for the zero time).
func millis(ev presence.LifecycleEvent) int64 {
	if ev.At.IsZero() {
		return 0
	}
	return ev.At.UnixMilli()
}
