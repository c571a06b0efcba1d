package store

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// maxBytesPerSession bounds the memory store's live heap per idle user with
// one session (TestMemoryBytesPerSession): about 15 % above the 308 B it
// measured (340 B while a liveSession held its node and listener as
// strings, 176 bytes; 420 B while a record and a liveSession held their times as
// time.Times, 112 and 224 bytes; 531 B while the users' map held records
// inline and a due index beside them; 563 B with a 256-byte liveSession; 754 B while a record held
// every field of a User but the aggregate inline and each session as a
// presence.Session, record.go; 1,570 B while presence.User held its
// Dormant session inline, 1,186 B while presence.Conn was 72 bytes,
// 1,170 B while the store kept each user's aggregate and its session
// views), so that a regression of the user record fails it.
const maxBytesPerSession = 355

// TestMemoryBytesPerSession measures the memory store's live heap per idle
// user holding one session with realistic connection facts, the store's
// share of presence's per-session cost (issue 23), and fails above
// maxBytesPerSession.
func TestMemoryBytesPerSession(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 20,000 users")
	}
	const n = 20_000
	clock := time.Unix(1_700_000_000, 0)
	now := func() time.Time { return clock }
	feed := NewFeed()
	ctx := context.Background()
	names := make([]string, n) // made before the first reading: not the store's
	for i := range names {
		names[i] = "user-" + strconv.Itoa(i)
	}

	before := testkit.LiveHeap()
	m := NewMemory(presence.Rules{}, now, feed.Push)
	for i, name := range names {
		_, err := m.Open(ctx, presence.OpenArgs{User: name, ID: name, Node: "node-a", TTL: 90 * time.Second,
			Conn: presence.Conn{Username: name, IP: "127.0.0.1", Port: 1883, Listener: "tcp", ProtoVer: 4, KeepAlive: 60, CleanStart: true}})
		if err != nil {
			t.Fatal(err)
		}
		if i%256 == 0 {
			feed.Recycle(feed.Take())
		}
	}
	feed.Recycle(feed.Take())
	after := testkit.LiveHeap()
	runtime.KeepAlive(m)
	runtime.KeepAlive(names)

	per := float64(int64(after)-int64(before)) / n
	t.Logf("memory store: %.0f B live heap per idle session (%d users)", per, n)
	if per > maxBytesPerSession {
		t.Errorf("memory store holds %.0f B per idle session, want at most %d", per, maxBytesPerSession)
	}
}
