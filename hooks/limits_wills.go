package hooks

import (
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// Delayed wills. mochi keeps a delayed will in memory, by client id, until
// its delay ends or the client comes back; checkWill holds every delay to
// MaxWillDelay, and OnWill bounds how many are waiting on this node: one
// over MaxDelayedWills is sent at once instead (a will is never dropped).
// Limits follows them by client id: from OnWill until the delay ends (Tidy
// forgets it), the will is sent (OnWillSent) or the client connects again
// (OnSessionEstablished, where mochi drops the delayed will).

// OnWill counts a delayed will, or sends it at once when MaxDelayedWills
// are already waiting.
func (l *Limits) OnWill(cl *mqtt.Client, will mqtt.Will) (mqtt.Will, error) {
	d := cl.Properties.Will.WillDelayInterval
	if l.o.MaxDelayedWills <= 0 || d == 0 {
		return will, nil
	}
	now := time.Now()
	l.wmu.Lock()
	_, again := l.wills[cl.ID]
	full := !again && len(l.wills) >= l.o.MaxDelayedWills
	if full {
		l.expireWills(now) // only when needed: Tidy does it every second
		full = len(l.wills) >= l.o.MaxDelayedWills
	}
	if !full {
		l.wills[cl.ID] = now.Add(time.Duration(d) * time.Second)
	}
	l.wmu.Unlock()
	if full {
		// mochi reads the delay from the client after the hooks.
		cl.Properties.Will.WillDelayInterval = 0
		l.Stats.WillsUndelayed.Add(1)
		l.o.Log.Debug("will sent at once: too many delayed wills", "client", ClientID(cl))
	}
	return will, nil
}

// OnWillSent forgets a delayed will sent.
func (l *Limits) OnWillSent(cl *mqtt.Client, _ packets.Packet) { l.forgetWill(cl.ID) }

func (l *Limits) forgetWill(id string) {
	if l.o.MaxDelayedWills <= 0 {
		return
	}
	l.wmu.Lock()
	delete(l.wills, id)
	l.wmu.Unlock()
}

// expireWills forgets the delayed wills whose delay has ended (mochi sends
// them then, or drops them with their expired session). l.wmu is held.
func (l *Limits) expireWills(now time.Time) {
	for id, at := range l.wills {
		if now.After(at) {
			delete(l.wills, id)
		}
	}
}
