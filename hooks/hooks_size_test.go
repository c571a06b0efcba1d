package hooks

import (
	"bytes"
	"errors"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// The bounds of the hooks' live heap per idle connection
// (TestHooksBytesPerConnection), about 15 % above what it measured (issue
// 23), so that a regression of the per-connection state fails it:
//   - Presence: 137 B (a 48-byte link and its links entry, the user's
//     24-byte byUser slot and name; 169 B with an 80-byte link holding its
//     presence/set limiter; 228 B before, with a 96-byte link and a
//     40-byte map slot and a []*mqtt.Client array per user);
//   - Limits: 30 B (a 16-byte conns slot; 44 B before, with a 24-byte
//     one).
const (
	maxPresenceBytesPerConn = 160
	maxLimitsBytesPerConn   = 35
)

// TestHooksBytesPerConnection measures the live heap the Presence and
// Limits hooks keep per idle connection (established, every connection of
// its own user, all from one address as in a load test), for 20,000
// connections, and fails above the bounds.
func TestHooksBytesPerConnection(t *testing.T) {
	if testing.Short() {
		t.Skip("connects 20,000 clients")
	}
	const n = 20_000
	srv := mqtt.New(&mqtt.Options{Logger: slog.New(slog.DiscardHandler)})
	cls := make([]*mqtt.Client, n) // made before the first reading: the broker's, not the hooks'
	for i := range cls {
		user := "user-" + strconv.Itoa(i)
		cl := srv.NewClient(nil, "t", presence.ClientKey(user, user), false)
		cl.Net.Remote = "127.0.0.1:" + strconv.Itoa(10_000+i)
		cl.Properties.Username = []byte(user)
		cl.Properties.ProtocolVersion = 4
		cl.Properties.Clean = true
		cl.State.Keepalive = 60
		cls[i] = cl
	}
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connect}, ProtocolVersion: 4,
		Connect: packets.ConnectParams{ProtocolName: []byte("MQTT"), Clean: true, Keepalive: 60}}

	before := testkit.LiveHeap()
	lim := NewLimits(LimitsOptions{Server: srv, ServerKeepAlive: time.Minute, MaxPerAddress: n + 1})
	for _, cl := range cls {
		if err := lim.OnConnect(cl, pk); err != nil {
			t.Fatal(err)
		}
		lim.OnSessionEstablished(cl, pk)
	}
	mid := testkit.LiveHeap()
	h := New(Options{Prefix: "presence", Server: srv, Tracker: testkit.NopTracker{}, SetRate: 5, SetBurst: 10})
	for _, cl := range cls {
		if err := h.OnConnect(cl, pk); err != nil {
			t.Fatal(err)
		}
		h.OnSessionEstablish(cl, pk)
		h.OnSessionEstablished(cl, pk)
	}
	after := testkit.LiveHeap()
	if got := h.Sessions(); got != n {
		t.Fatalf("%d sessions, want %d", got, n)
	}
	if got := lim.counted("127.0.0.1"); got != n {
		t.Fatalf("%d connections counted, want %d", got, n)
	}
	runtime.KeepAlive(cls)
	runtime.KeepAlive(lim)
	runtime.KeepAlive(h)

	limits := float64(int64(mid)-int64(before)) / n
	pres := float64(int64(after)-int64(mid)) / n
	t.Logf("Limits: %.0f B, Presence: %.0f B live heap per idle connection (%d connections)", limits, pres, n)
	if limits > maxLimitsBytesPerConn {
		t.Errorf("Limits holds %.0f B per idle connection, want at most %d", limits, maxLimitsBytesPerConn)
	}
	if pres > maxPresenceBytesPerConn {
		t.Errorf("Presence holds %.0f B per idle connection, want at most %d", pres, maxPresenceBytesPerConn)
	}
}

// TestLinkIsCompact: a link fits the 48-byte size class (64-bit; 80
// before its presence/set limiter was kept aside), and an address the
// 24-byte one.
func TestLinkIsCompact(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are for a 64-bit platform")
	}
	if n := unsafe.Sizeof(link{}); n > 48 {
		t.Errorf("a link is %d bytes, want at most 48 (a size class)", n)
	}
	if n := unsafe.Sizeof(address{}); n > 24 {
		t.Errorf("an address is %d bytes, want at most 24 (a size class)", n)
	}
}

// userList returns user's connections as h.byUser holds them, oldest first.
func userList(h *Presence, user string) []*mqtt.Client {
	if c, ok := h.byUser.one[user]; ok {
		if _, both := h.byUser.many[user]; both {
			return []*mqtt.Client{nil} // never both: shows as a mismatch
		}
		return []*mqtt.Client{c}
	}
	return h.byUser.many[user]
}

// TestUserConnsLikeSlices: admit and forget keep each user's connections,
// oldest first, and pick the oldest to end, exactly as the one slice per
// user they replace did (the model below is that code), over random
// admits, ends and closes with shared client ids, for several limits.
func TestUserConnsLikeSlices(t *testing.T) {
	srv := mqtt.New(&mqtt.Options{Logger: slog.New(slog.DiscardHandler)})
	users := []string{"ann", "bob", "cy"}
	for max := range 4 {
		h := New(Options{Prefix: "presence", MaxSessionsPerUser: max})
		model := make(map[string][]*mqtt.Client)
		modelAdmit := func(cl *mqtt.Client, user string) *mqtt.Client {
			list := model[user]
			live := list[:0]
			var oldest *mqtt.Client
			count := 0
			for _, c := range list {
				if c.Closed() {
					continue
				}
				live = append(live, c)
				if c.ID != cl.ID {
					count++
					if oldest == nil {
						oldest = c
					}
				}
			}
			clear(list[len(live):])
			model[user] = append(live, cl)
			if max <= 0 || count < max {
				return nil
			}
			return oldest
		}
		modelForget := func(cl *mqtt.Client, user string) {
			live := model[user]
			for i, c := range live {
				if c == cl {
					live = append(live[:i:i], live[i+1:]...)
					break
				}
			}
			if len(live) == 0 {
				delete(model, user)
			} else {
				model[user] = live
			}
		}
		rng := rand.New(rand.NewPCG(1, uint64(max)))
		var all []*mqtt.Client
		owner := make(map[*mqtt.Client]string)
		for step := range 3000 {
			switch op := rng.IntN(10); {
			case op < 5 || len(all) == 0: // a new connection
				user := users[rng.IntN(len(users))]
				cl := srv.NewClient(nil, "t", "id-"+strconv.Itoa(rng.IntN(3)), false)
				all = append(all, cl)
				owner[cl] = user
				want := modelAdmit(cl, user)
				if got := h.admit(cl, user); got != want {
					t.Fatalf("max %d, step %d: admit ends %p, want %p", max, step, got, want)
				}
				if want != nil {
					modelForget(want, owner[want])
					h.byUser.remove(owner[want], want)
				}
			case op < 8: // an end
				cl := all[rng.IntN(len(all))]
				modelForget(cl, owner[cl])
				h.byUser.remove(owner[cl], cl)
			default: // a connection closed, not yet forgotten
				all[rng.IntN(len(all))].Stop(nil)
			}
			for _, u := range users {
				got, want := userList(h, u), model[u]
				if len(got) != len(want) {
					t.Fatalf("max %d, step %d: %s has %d connections, want %d", max, step, u, len(got), len(want))
				}
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("max %d, step %d: %s's connection %d differs", max, step, u, i)
					}
				}
				if l, ok := h.byUser.many[u]; ok && len(l) < 2 {
					t.Fatalf("max %d, step %d: %s in many with %d connections", max, step, u, len(l))
				}
			}
		}
	}
}

// The limiter of a connection's refused publishes' logs is made at its
// first refused publish, holds back as the link's own did, and is
// forgotten with the connection.
func TestRefusalLimiter(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1000, 0)
	h := New(Options{Prefix: "presence", Tracker: testkit.NopTracker{}, Log: slog.New(slog.NewTextHandler(&buf, nil)),
		Now: func() time.Time { return now }})
	srv := mqtt.New(&mqtt.Options{Logger: slog.New(slog.DiscardHandler)})
	cl := srv.NewClient(nil, "t", "alice-phone", false)
	cl.Properties.Username = []byte("alice")
	cl.Properties.ProtocolVersion = 4
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connect}, ProtocolVersion: 4}
	if err := h.OnConnect(cl, pk); err != nil {
		t.Fatal(err)
	}
	h.OnSessionEstablish(cl, pk)
	h.OnSessionEstablished(cl, pk)
	if len(h.refusals) != 0 {
		t.Fatalf("%d limiters before any refusal", len(h.refusals))
	}
	pub := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish}, TopicName: "presence/x"}
	logged := func() int { return strings.Count(buf.String(), "publish refused") }
	for range 3 {
		if _, err := h.OnPublish(cl, pub); !errors.Is(err, packets.ErrRejectPacket) {
			t.Fatalf("OnPublish: %v", err)
		}
	}
	if n := logged(); n != 1 || len(h.refusals) != 1 {
		t.Fatalf("%d lines logged, %d limiters; want 1 and 1", n, len(h.refusals))
	}
	now = now.Add(refusalLogEvery)
	_, _ = h.OnPublish(cl, pub)
	if n := logged(); n != 2 || !strings.Contains(buf.String(), "held_back=2") {
		t.Fatalf("%d lines logged, want 2, the last with held_back=2:\n%s", n, buf.String())
	}
	h.OnDisconnect(cl, nil, false)
	if len(h.refusals) != 0 || len(h.links) != 0 {
		t.Fatalf("after the end: %d limiters, %d links", len(h.refusals), len(h.links))
	}
}

// An address's connections not yet established, the first inline and the
// others in a map, stop counting once closed, established or ended.
func TestLimitsWaiting(t *testing.T) {
	srv := mqtt.New(nil)
	l := NewLimits(LimitsOptions{MaxPerAddress: 3})
	var cls []*mqtt.Client
	for i := range 3 {
		cl := clientFrom(srv, "c"+strconv.Itoa(i), "10.0.0.1:"+strconv.Itoa(i+1))
		if err := l.OnConnect(cl, packets.Packet{}); err != nil {
			t.Fatal(err)
		}
		cls = append(cls, cl)
	}
	a := l.addrs["10.0.0.1"]
	if a.waiting != cls[0] || len(a.more) != 2 {
		t.Fatalf("waiting %v, %d more; want the first and 2", a.waiting, len(a.more))
	}
	fourth := clientFrom(srv, "c3", "10.0.0.1:4")
	if err := l.OnConnect(fourth, packets.Packet{}); err == nil {
		t.Fatal("a fourth connection was counted")
	}
	cls[0].Stop(nil) // inline
	cls[2].Stop(nil) // in the map
	if err := l.OnConnect(fourth, packets.Packet{}); err != nil {
		t.Fatalf("after two closed: %v", err)
	}
	if got := l.counted("10.0.0.1"); got != 2 || len(l.conns) != 2 {
		t.Fatalf("%d counted, %d connections; want 2 and 2", got, len(l.conns))
	}
	l.OnSessionEstablished(cls[1], packets.Packet{})
	l.OnSessionEstablished(fourth, packets.Packet{})
	if a.waiting != nil || len(a.more) != 0 {
		t.Fatalf("established, still waiting: %v, %d more", a.waiting, len(a.more))
	}
	l.OnDisconnect(cls[1], nil, false)
	l.OnDisconnect(fourth, nil, false)
	l.OnDisconnect(fourth, nil, false) // twice: nothing more
	if len(l.addrs) != 0 || len(l.conns) != 0 {
		t.Fatalf("after the ends: %d addresses, %d connections", len(l.addrs), len(l.conns))
	}
}
