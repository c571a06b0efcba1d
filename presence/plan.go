package presence

import "time"

// This file holds the tracker's decision, as pure functions: given what a
// connection's session should be in the store (Wanted) and what the store
// was last told (Written), which write comes next, and what the store's
// answer to it means. The tracker only runs the loop:
//
//	for more := true; more; {
//		w := plan.Next(id, wanted, written)
//		if w.Kind == WriteNone { break }
//		outcome, epoch := do(w)
//		written, more = Applied(written, wanted.Conn, w, outcome, epoch)
//	}

// ConnID names one MQTT connection for as long as it lives. A takeover by
// the same client id is a new connection with a new ConnID, so late events
// of the old one are told apart. Zero means no connection.
type ConnID uint64

// Wanted is what the store should hold for one client id: the session of
// connection Conn while it is live, ended with Reason once it is not.
type Wanted struct {
	Conn        ConnID
	User        string
	Device      string
	Status      Status // its own status: the one the client last set, or online
	Text        string
	Established bool          // CONNACK has been sent
	Live        bool          // the connection has not ended
	AutoIdle    bool          // its node shows it idle for want of activity (see IdleDecide); with the other bools: no padding
	Reason      EndReason     // why it ended, once it has
	LastWords   *string       // its will's text, applied if it ends uncleanly
	WillDelay   time.Duration // its will's delay (MQTT 5), carried by its unclean end
	Net         Conn          // the connection's facts, written with each open of it
	LastSign    time.Time     // its last sign of life, when its node knows it earlier than the end (EndArgs.LastSign)
	// Expect and Margin are the check-in period its device declared and
	// its margin (dormant.go), written with each open of it.
	Expect, Margin time.Duration
}

// Written is what the store was last told for one client id.
type Written struct {
	Conn   ConnID
	User   string
	Epoch  uint64
	Open   bool
	Device string
	Status Status
	Text   string
}

// WriteKind is the kind of a store write.
type WriteKind uint8

// The store writes the tracker makes.
const (
	WriteNone   WriteKind = iota
	WriteEnd              // end the written session
	WriteOpen             // open the wanted session (ending a live one with the same id as a takeover)
	WriteUpdate           // change the written session's own status, text or device
)

// Write is one store write. Only the fields of its Kind are set.
type Write struct {
	Kind   WriteKind
	End    EndArgs
	Open   OpenArgs
	Ref    SessionRef
	Update Update
}

// Outcome is what the store answered to a write.
type Outcome uint8

// Outcomes.
const (
	Done    Outcome = iota // applied
	Stale                  // refused as stale: that session is not live at that epoch
	Refused                // refused for good: a bad name, status or payload
	Failed                 // the store could not be reached: try again later
)

// Plan holds what every session this node opens has in common.
type Plan struct {
	Node string        // this node, written into each session
	TTL  time.Duration // the store-side expiry given to each session
}

// Next returns the next write that brings the store from written
// towards wanted for session id, or a Write of kind WriteNone:
//
//  1. End the written session when it is no longer wanted: its connection
//     ended (with its reason), or another connection with the same id
//     replaced it and that one ended or belongs to another user (takeover).
//     While the replacing connection is still between CONNECT and CONNACK,
//     the written session stays: a takeover must never show the user
//     offline, and the store ends the old session when it opens the new one.
//  2. Open the wanted session once it is established and not yet written.
//  3. Bring the written session's status, text and device up to date.
//
// The status written is the one shown (Shown): idle while the node shows
// the session auto-idle over an own status of online.
func (p Plan) Next(id string, w Wanted, h Written) Write {
	status := ShownStatus(w.Status, w.AutoIdle)
	if h.Open {
		replaced := w.Conn != h.Conn
		end := EndArgs{User: h.User, ID: id, Epoch: h.Epoch}
		switch {
		case !replaced && !w.Live:
			end.Reason, end.LastWords = w.Reason, w.LastWords
			if !w.Reason.Clean() {
				end.WillDelay = w.WillDelay
			}
			end.LastSign = w.LastSign
			return Write{Kind: WriteEnd, End: end}
		case replaced && w.Live && !w.Established:
			return Write{} // a takeover in progress: wait for its CONNACK
		case replaced && (!w.Live || w.User != h.User):
			end.Reason = EndTakeover
			return Write{Kind: WriteEnd, End: end}
		}
	}
	if w.Live && w.Established && (!h.Open || h.Conn != w.Conn) {
		return Write{Kind: WriteOpen, Open: OpenArgs{
			User: w.User, ID: id, Node: p.Node, Device: w.Device,
			Status: status, Text: w.Text, TTL: p.TTL, Conn: w.Net,
			Expect: w.Expect, Margin: w.Margin,
		}}
	}
	if h.Open && h.Conn == w.Conn && w.Live {
		// Pointers to copies, not into w: &w.Text would move all of w (a
		// few hundred bytes) to the heap on every call (issue 23).
		var upd Update
		if status != h.Status {
			st := status
			upd.Status = &st
		}
		if w.Text != h.Text {
			text := w.Text
			upd.Text = &text
		}
		if w.Device != h.Device {
			device := w.Device
			upd.Device = &device
		}
		if !upd.Empty() {
			return Write{Kind: WriteUpdate, Ref: SessionRef{User: h.User, ID: id, Epoch: h.Epoch}, Update: upd}
		}
	}
	return Write{}
}

// Applied returns what the store holds after write wr, planned for
// connection conn, met outcome o (epoch is the new session's when an open
// was Done), and whether the tracker should go on to the next write now.
// A Failed write changes nothing and stops: the tracker tries again later.
func Applied(h Written, conn ConnID, wr Write, o Outcome, epoch uint64) (Written, bool) {
	if o == Failed {
		return h, false
	}
	switch wr.Kind {
	case WriteEnd:
		// Done, or the store had already ended it: either way it is over.
		h.Open = false
		return h, true
	case WriteOpen:
		if o != Done {
			return h, false // refused: nothing to go on with until the next event
		}
		a := wr.Open
		return Written{Conn: conn, User: a.User, Epoch: epoch, Open: true, Device: a.Device, Status: a.Status, Text: a.Text}, true
	case WriteUpdate:
		switch o {
		case Done:
			u := wr.Update
			if u.Status != nil {
				h.Status = *u.Status
			}
			if u.Text != nil {
				h.Text = *u.Text
			}
			if u.Device != nil {
				h.Device = *u.Device
			}
			return h, true
		case Stale:
			// The store ended the session behind our back (its expiry
			// passed, or its node was swept): open a new one.
			h.Open = false
			return h, true
		}
		return h, false
	}
	return h, false
}

// Finished reports whether nothing is left to write for a client id whose
// connection has ended: the tracker may forget it.
func Finished(w Wanted, h Written) bool { return !w.Live && !h.Open }
