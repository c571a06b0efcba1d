package tracker

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// maxBytesPerSession bounds the tracker's live heap per idle session
// (TestTrackerBytesPerSession): about 15 % above the 251 B it measured
// (a 224-byte slot in the 224-byte size class, and its map entry; 267 B
// with a 240-byte slot, 347 B with a 320-byte one, 411 B with a 376-byte
// slot in the 384-byte class, before issue 23 compacted it; 443 B with a
// 416-byte slot), so that a regression of the per-session state (slot,
// its wantState, haveState and slotRare) fails it.
const maxBytesPerSession = 290

// epochStore is a store that keeps nothing: it gives each open the next
// epoch, so that what TestTrackerBytesPerSession measures is the
// tracker's alone.
type epochStore struct{ epoch uint64 }

func (s *epochStore) Open(context.Context, presence.OpenArgs) (presence.Session, error) {
	s.epoch++
	return presence.Session{Epoch: s.epoch}, nil
}
func (*epochStore) End(context.Context, presence.EndArgs) error { return nil }
func (*epochStore) Update(context.Context, presence.SessionRef, presence.Update) error {
	return nil
}
func (*epochStore) SetAccount(context.Context, string, presence.AccountUpdate) error { return nil }
func (*epochStore) Renew(context.Context, []presence.SessionRef, time.Duration) ([]presence.SessionRef, error) {
	return nil, nil
}
func (*epochStore) Own(context.Context) ([]presence.StoredSession, error) { return nil, nil }

// TestTrackerBytesPerSession measures the tracker's live heap per idle
// session (connected, established, its open written), for 20,000
// sessions of their own users with realistic connection facts, and fails
// above maxBytesPerSession.
func TestTrackerBytesPerSession(t *testing.T) {
	if testing.Short() {
		t.Skip("tracks 20,000 sessions")
	}
	const n = 20_000
	users := make([]string, n) // made before the first reading: the broker's, not the tracker's
	keys := make([]string, n)
	for i := range users {
		users[i] = "user-" + strconv.Itoa(i)
		keys[i] = presence.ClientKey(users[i], users[i])
	}
	sync := func(tr *Tracker, sc *scratch) { // as the shards' workers do (no worker runs)
		for _, q := range tr.shards {
			if its := q.take(); len(its) > 0 {
				tr.syncItems(its, sc)
			}
		}
	}

	before := testkit.LiveHeap()
	tr := New(&epochStore{}, Options{Node: "node-a", TTL: 90 * time.Second})
	var sc scratch
	for i := range n {
		c := presence.ConnID(i + 1)
		tr.Connect(c, keys[i], users[i], "", nil, presence.Conn{Username: users[i], IP: "127.0.0.1", Port: 1883, Listener: "tcp", ProtoVer: 4, KeepAlive: 60, CleanStart: true})
		tr.Established(c, keys[i])
		if i%256 == 0 {
			sync(tr, &sc)
		}
	}
	sync(tr, &sc)
	sc = scratch{}
	after := testkit.LiveHeap()
	if got := tr.Stats.Opened.Load(); got != n {
		t.Fatalf("%d opens written, want %d", got, n)
	}
	runtime.KeepAlive(tr)
	runtime.KeepAlive(keys)

	per := float64(int64(after)-int64(before)) / n
	t.Logf("tracker: %.0f B live heap per idle session (%d sessions)", per, n)
	if per > maxBytesPerSession {
		t.Errorf("the tracker holds %.0f B per idle session, want at most %d", per, maxBytesPerSession)
	}
}

// TestSlotIsCompact: a slot fits the 224-byte size class (64-bit; it was
// 376 bytes, in the 384-byte class, before issue 23 made it 320, then 240
// with its rare fields kept aside (slotRare), then 224 with its listener
// as a code).
func TestSlotIsCompact(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are for a 64-bit platform")
	}
	if n := unsafe.Sizeof(slot{}); n > 224 {
		t.Fatalf("a slot is %d bytes, want at most 224 (a size class)", n)
	}
}
