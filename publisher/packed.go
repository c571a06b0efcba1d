package publisher

import (
	"encoding/binary"
	"time"
	"unsafe"

	"github.com/presenced/presenced/presence"
)

// A view keeps its user's payload packed: the fields the view holds anyway
// (status, text, version, since, last_seen) as fields, and the rest of the
// payload (reason, link, next_expected, the sessions) in a few dozen bytes
// (packRest), from which payload writes the same bytes as were published
// (presence.Aggregate.AppendJSON of the same fields). A node holds a view
// for every user its subscribers watch, and the payload was most of it
// (260 of 492 bytes for a user with one session); the bytes sent are made
// again when a subscriber needs them (a SUBSCRIBE's retained message, a
// message sent again, the admin API), not on a change.
//
// The packed form, every number a varint (encoding/binary):
//
//	flags (1 byte: reason, link, next_expected present)
//	[reason string] [link string] [next_expected time]
//	session count, each: id string, epoch, node string, device string,
//	  status, connected_at time
//
// A string is its length and bytes; a status its code (statusCode), and
// when codeOther the string after it; a time 0 for the zero time, else its
// millisecond of the second + 1 and its Unix second (a payload writes
// times to the millisecond, presence.TimeLayout).

const (
	packReason = 1 << iota
	packLink
	packNextExpected
)

// packRest appends what of a's payload a view does not hold as fields.
func packRest(b []byte, a presence.Aggregate) []byte {
	var flags byte
	if a.Reason != "" {
		flags |= packReason
	}
	if a.Link != "" {
		flags |= packLink
	}
	if !a.NextExpected.IsZero() {
		flags |= packNextExpected
	}
	b = append(b, flags)
	if a.Reason != "" {
		b = packString(b, string(a.Reason))
	}
	if a.Link != "" {
		b = packString(b, a.Link)
	}
	if !a.NextExpected.IsZero() {
		b = packTime(b, a.NextExpected)
	}
	b = binary.AppendUvarint(b, uint64(len(a.Sessions)))
	for _, s := range a.Sessions {
		b = packString(b, s.ID)
		b = binary.AppendUvarint(b, s.Epoch)
		b = packString(b, s.Node)
		b = packString(b, s.Device)
		b = packStatus(b, s.Status)
		b = packTime(b, s.ConnectedAt)
	}
	return b
}

// unpackRest sets a's reason, link, next_expected and sessions from b, made
// by packRest, the sessions in scratch when it has room (nil: new ones).
// Its strings are views of b, which is never written after packRest made
// it (a view's rest): they live as long as b does.
func unpackRest(b []byte, a *presence.Aggregate, scratch []presence.SessionView) bool {
	r := unpacker{b: b, ok: true}
	flags := r.byte()
	if flags&packReason != 0 {
		a.Reason = presence.EndReason(r.string())
	}
	if flags&packLink != 0 {
		a.Link = r.string()
	}
	if flags&packNextExpected != 0 {
		a.NextExpected = r.time()
	}
	n := r.uvarint()
	if n > uint64(len(b)) { // each session takes bytes: a count above that is not packRest's
		return false
	}
	if uint64(cap(scratch)) >= n {
		a.Sessions = scratch[:n]
		clear(a.Sessions)
	} else {
		a.Sessions = make([]presence.SessionView, n)
	}
	for i := range a.Sessions {
		s := &a.Sessions[i]
		s.ID = r.string()
		s.Epoch = r.uvarint()
		s.Node = r.string()
		s.Device = r.string()
		s.Status = r.status()
		s.ConnectedAt = r.time()
	}
	return r.ok && len(r.b) == 0
}

func packString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func packStatus(b []byte, s presence.Status) []byte {
	code, ok := codeOf(s)
	b = append(b, byte(code))
	if !ok {
		b = packString(b, string(s))
	}
	return b
}

func packTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(t.Nanosecond()/1e6)+1)
	return binary.AppendVarint(b, t.Unix())
}

// unpacker reads packRest's form; ok goes false, for good, at the first
// read past the end or a value that is not packRest's.
type unpacker struct {
	b  []byte
	ok bool
}

func (r *unpacker) byte() byte {
	if len(r.b) == 0 {
		r.ok = false
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *unpacker) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.ok = false
		return 0
	}
	r.b = r.b[n:]
	return v
}

// varint reads binary.AppendVarint's zig-zag form.
func (r *unpacker) varint() int64 {
	u := r.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

func (r *unpacker) string() string {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.ok = false
		return ""
	}
	if n == 0 {
		return ""
	}
	s := unsafe.String(&r.b[0], int(n))
	r.b = r.b[n:]
	return s
}

func (r *unpacker) status() presence.Status {
	code := statusCode(r.byte())
	if code > codeOffline {
		r.ok = false
		return ""
	}
	if code == codeOther {
		return presence.Status(r.string())
	}
	return code.status()
}

func (r *unpacker) time() time.Time {
	ms := r.uvarint()
	if ms == 0 {
		return time.Time{}
	}
	if ms > 1000 {
		r.ok = false
		return time.Time{}
	}
	return time.Unix(r.varint(), int64(ms-1)*1e6).UTC()
}
