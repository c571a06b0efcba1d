package hooks

import (
	"testing"

	"github.com/mochi-mqtt/server/v2/packets"
)

// An operator may end a session with a DISCONNECT code that says the
// server ended it, not with one that means something else to the client
// (success, a takeover, a protocol error of the client's).
func TestKickCode(t *testing.T) {
	for _, c := range KickCodes {
		if got, ok := KickCode(c.Code); !ok || got != c || c.Code < packets.ErrUnspecifiedError.Code {
			t.Errorf("KickCode(0x%02X) = %v %v", c.Code, got, ok)
		}
	}
	if c, ok := KickCode(0x98); !ok || c != packets.ErrAdministrativeAction {
		t.Errorf("0x98: %v %v", c, ok)
	}
	for _, b := range []byte{0x00, 0x04, 0x81, 0x82, 0x8E, 0x8D, 0x9C, 0x9D, 0xA2, 0xFF} {
		if _, ok := KickCode(b); ok {
			t.Errorf("KickCode(0x%02X) accepted", b)
		}
	}
}
