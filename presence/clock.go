package presence

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// ErrBadClock: a presence/clock payload that cannot be used.
var ErrBadClock = errors.New("bad clock message")

// Clock is the payload of presence/clock, the heartbeat each node sends
// (not retained, QoS 0) to its own subscribers every Interval, so that an
// observer knows whether its view is fresh:
//
//	{"node":"A","incarnation":"m1x2-ab12","seq":42,"version":1796173236456001,"time":"2026-12-02T01:00:36.122Z","interval_ms":5000}
//
// Seq counts the clock messages of this incarnation from 1 (a gap is a
// message lost on the way; a smaller one, with a new incarnation, is a
// restart). Version is the highest presence/users version the node has
// published (0: none yet, or not told: presence.visibility other than
// open, where it would tell a user when others changed). Time is the
// node's clock when it sent the message. Interval is the period, so that
// an observer needs no configuration: it shows its view as stale once
// StaleAfter(Interval) has passed without a clock message.
type Clock struct {
	Node        string
	Incarnation string
	Seq         uint64
	Version     uint64
	Time        time.Time
	Interval    time.Duration
}

// StaleAfter is how long after its last clock message an observer shows
// its view as stale: two intervals (one message may be late by up to an
// interval on a busy node without greying anyone out).
func StaleAfter(interval time.Duration) time.Duration { return 2 * interval }

// ClockStale reports whether a view whose last clock message (with its
// interval) came at last is stale at now. A view that never had one
// (last zero) is never stale: the node may run with the clock off.
func ClockStale(last time.Time, interval time.Duration, now time.Time) bool {
	return !last.IsZero() && now.Sub(last) > StaleAfter(interval)
}

// AppendJSON appends the payload: fields in a fixed order, Time in
// TimeLayout (UTC, ms), Interval in whole milliseconds.
func (c Clock) AppendJSON(b []byte) []byte {
	b = append(b, `{"node":`...)
	b = appendString(b, c.Node)
	b = append(b, `,"incarnation":`...)
	b = appendString(b, c.Incarnation)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, c.Seq, 10)
	b = append(b, `,"version":`...)
	b = strconv.AppendUint(b, c.Version, 10)
	b = append(b, `,"time":`...)
	b = appendTime(b, c.Time)
	b = append(b, `,"interval_ms":`...)
	b = strconv.AppendInt(b, c.Interval.Milliseconds(), 10)
	return append(b, '}')
}

// Validate checks every field.
func (c Clock) Validate() error {
	if err := ValidNode(c.Node); err != nil {
		return fmt.Errorf("%w: %v", ErrBadClock, err)
	}
	if c.Incarnation == "" || len(c.Incarnation) > maxNodeBytes {
		return fmt.Errorf("%w: incarnation of %d bytes", ErrBadClock, len(c.Incarnation))
	}
	if c.Seq == 0 {
		return fmt.Errorf("%w: seq 0", ErrBadClock)
	}
	if c.Time.IsZero() {
		return fmt.Errorf("%w: no time", ErrBadClock)
	}
	if c.Interval < time.Millisecond {
		return fmt.Errorf("%w: interval %s", ErrBadClock, c.Interval)
	}
	return nil
}

// ParseClock reads a presence/clock payload strictly: unknown or missing
// fields and bad values are errors.
func ParseClock(b []byte) (Clock, error) {
	var w struct {
		Node        *string `json:"node"`
		Incarnation *string `json:"incarnation"`
		Seq         *uint64 `json:"seq"`
		Version     *uint64 `json:"version"`
		Time        *string `json:"time"`
		IntervalMS  *int64  `json:"interval_ms"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return Clock{}, fmt.Errorf("%w: %v", ErrBadClock, err)
	}
	if dec.More() {
		return Clock{}, fmt.Errorf("%w: more than one value", ErrBadClock)
	}
	if w.Node == nil || w.Incarnation == nil || w.Seq == nil || w.Version == nil || w.Time == nil || w.IntervalMS == nil {
		return Clock{}, fmt.Errorf("%w: a field is missing", ErrBadClock)
	}
	at, err := time.Parse(time.RFC3339Nano, *w.Time)
	if err != nil {
		return Clock{}, fmt.Errorf("%w: time %q", ErrBadClock, *w.Time)
	}
	if *w.IntervalMS <= 0 || *w.IntervalMS > int64(24*time.Hour/time.Millisecond) {
		return Clock{}, fmt.Errorf("%w: interval_ms %d", ErrBadClock, *w.IntervalMS)
	}
	c := Clock{Node: *w.Node, Incarnation: *w.Incarnation, Seq: *w.Seq, Version: *w.Version, Time: at.UTC(),
		Interval: time.Duration(*w.IntervalMS) * time.Millisecond}
	return c, c.Validate()
}
