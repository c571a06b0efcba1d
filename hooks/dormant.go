package hooks

import (
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/internal/connack"
	"github.com/presenced/presenced/presence"
)

// DormantOptions say how devices that sleep by design declare their
// check-in period (presence/dormant.go): by the MQTT 5 CONNECT user property
// expect (a Go duration, presence.MinExpect to presence.MaxExpect), or, for
// a connection without one, by their device label (Devices). The
// property wins over the label: the device knows its own cycle.
type DormantOptions struct {
	Devices map[string]time.Duration // device label -> check-in period
	// Margin is how late past its period a check-in may come before the
	// device is shown offline (missed); zero: presence.DormantMargin's
	// default, a tenth of the period and at least 5 s.
	Margin time.Duration
}

// errBadExpect stops a CONNECT whose user property expect cannot be used;
// the hook has already answered it.
var errBadExpect = packets.Code{Code: packets.ErrImplementationSpecificError.Code,
	Reason: "user property expect: want a duration from 1s to 168h (e.g. 90s, 1h)"}

// expectProperty returns the MQTT 5 CONNECT user property "expect" (the
// first one) and whether there is one.
func expectProperty(pk packets.Packet) (string, bool) {
	for _, p := range pk.Properties.User {
		if p.Key == "expect" {
			return p.Val, true
		}
	}
	return "", false
}

// checkExpect refuses a CONNECT whose user property expect is not a
// period presence takes (CONNACK 0x83 "implementation specific error",
// with a reason string that says what is wanted), counted and logged: a
// device that declares a cycle it does not get would be shown offline
// every time it sleeps, which is worse than a refusal its developer sees
// at once.
func (h *Presence) checkExpect(cl *mqtt.Client, pk packets.Packet) error {
	v, ok := expectProperty(pk)
	if !ok {
		return nil
	}
	if _, err := presence.ParseExpect(v); err != nil {
		h.Stats.ExpectRefused.Add(1)
		h.o.Log.Info("connection refused: bad user property expect", "client", ClientID(cl), "remote", cl.Net.Remote, "err", err)
		connack.Refuse(h.o.Server, cl, errBadExpect, packets.Code{})
		return errBadExpect
	}
	return nil
}

// expectation returns the check-in period a connection's device declared
// (its property expect, checked by OnConnect, else its device label's) and
// its margin; zero: none.
func (h *Presence) expectation(pk packets.Packet, device string) (period, margin time.Duration) {
	if v, ok := expectProperty(pk); ok {
		period, _ = presence.ParseExpect(v)
	} else if device != "" {
		period = h.o.Dormant.Devices[device]
	}
	if period <= 0 {
		return 0, 0
	}
	return period, presence.DormantMargin(period, h.o.Dormant.Margin)
}
