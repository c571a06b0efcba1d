package delivery

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/listener"
)

// snapStore is a Snapshots of fixed payloads, "{user} v{version}".
type snapStore struct {
	mu sync.Mutex
	m  map[string]uint64
}

func (s *snapStore) set(user string, version uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[user] = version
}

func (s *snapStore) Snapshots(user string, all bool, fn func(string, uint64, []byte)) {
	s.mu.Lock()
	m := map[string]uint64{}
	for u, v := range s.m {
		if all || u == user {
			m[u] = v
		}
	}
	s.mu.Unlock()
	for u, v := range m {
		fn(u, v, fmt.Appendf(nil, `{"user":%q,"version":%d}`, u, v))
	}
}

// retainedServer is a mochi server with presenced's listener, a Delivery
// serving s, and, with guard, a Guard whose Sees lets nobody see "hidden".
func retainedServer(t *testing.T, s Snapshots, guard bool) (*mqtt.Server, *Delivery, string) {
	t.Helper()
	srv := mqtt.New(&mqtt.Options{InlineClient: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	d := NewDelivery(DeliveryOptions{Prefix: "presence", Server: srv})
	d.Serve(s)
	if err := srv.AddHook(d, nil); err != nil {
		t.Fatal(err)
	}
	if guard {
		g := NewGuard(GuardOptions{Delivery: d, Viewers: idViewers{}, Sees: func(_, user string) bool { return user != "hidden" }})
		if err := srv.AddHook(g, nil); err != nil {
			t.Fatal(err)
		}
	} else if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		t.Fatal(err)
	}
	if err := srv.AddHook(new(connectAll), nil); err != nil {
		t.Fatal(err)
	}
	l := listener.NewTCP(listener.Config{ID: "tcp", Address: "127.0.0.1:0", Server: srv})
	if err := srv.AddListener(l); err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve() }()
	t.Cleanup(func() { _ = srv.Close() })
	return srv, d, l.Address()
}

// idViewers: a connection's user is its client id; those whose id starts
// with "e" are service accounts.
type idViewers struct{}

func (idViewers) Viewer(cl *mqtt.Client) (string, bool) { return cl.ID, strings.HasPrefix(cl.ID, "e") }

// connectAll lets every client connect, deciding no access.
type connectAll struct{ mqtt.HookBase }

func (*connectAll) ID() string                                              { return "connect-all" }
func (*connectAll) Provides(b byte) bool                                    { return b == mqtt.OnConnectAuthenticate }
func (*connectAll) OnConnectAuthenticate(*mqtt.Client, packets.Packet) bool { return true }

// subscriber is a paho client that records every PUBLISH.
type subscriber struct {
	*paho.Client
	mu   sync.Mutex
	msgs []*paho.Publish
}

func dialSub(t *testing.T, addr, id string) *subscriber {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	s := &subscriber{}
	s.Client = paho.NewClient(paho.ClientConfig{ClientID: id, Conn: conn,
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			s.mu.Lock()
			s.msgs = append(s.msgs, pr.Packet)
			s.mu.Unlock()
			return true, nil
		}}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.Connect(ctx, &paho.Connect{ClientID: id, KeepAlive: 30, CleanStart: true}); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *subscriber) sub(t *testing.T, opts ...paho.SubscribeOptions) {
	t.Helper()
	s.subWith(t, nil, opts...)
}

func (s *subscriber) subWith(t *testing.T, props *paho.SubscribeProperties, opts ...paho.SubscribeOptions) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.Subscribe(ctx, &paho.Subscribe{Subscriptions: opts, Properties: props}); err != nil {
		t.Fatal(err)
	}
}

// take returns what arrived since the last take, once n have (or, n 0,
// after a ping round trip: everything sent before it).
func (s *subscriber) take(t *testing.T, n int) []*paho.Publish {
	t.Helper()
	if n == 0 {
		// A SUBSCRIBE to nothing presence has: its SUBACK follows
		// everything queued before it.
		s.sub(t, paho.SubscribeOptions{Topic: "flush/" + fmt.Sprint(time.Now().UnixNano()), QoS: 0})
	}
	testkit.Wait(t, 5*time.Second, fmt.Sprintf("%d messages", n), func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.msgs) < n {
			return fmt.Errorf("%d of %d", len(s.msgs), n)
		}
		return nil
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.msgs
	s.msgs = nil
	return out
}

func topics(ps []*paho.Publish) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Topic)
	}
	sort.Strings(out)
	return out
}

// The retained presence/users/{user} is delivered on SUBSCRIBE from the
// Snapshots, as mochi delivers a retained message: for an exact topic and
// for "+" and "#" wildcards, with the retain flag, at QoS min(granted, 1),
// with the subscription identifier; with retain handling 1 only for a new
// subscription, never with 2, never to a shared subscription; and the
// Guard's read decision per topic.
func TestRetainedOnSubscribe(t *testing.T) {
	s := &snapStore{m: map[string]uint64{"amy": 3, "bob": 5, "hidden": 1}}
	srv, d, addr := retainedServer(t, s, true)
	c := dialSub(t, addr, "c")

	c.sub(t, paho.SubscribeOptions{Topic: "presence/users/amy", QoS: 1})
	got := c.take(t, 1)
	if len(got) != 1 || got[0].Topic != "presence/users/amy" || !got[0].Retain || got[0].QoS != 1 || string(got[0].Payload) != `{"user":"amy","version":3}` {
		t.Fatalf("exact: %+v", got)
	}
	// Retain handling 1: the subscription exists now, nothing again.
	c.sub(t, paho.SubscribeOptions{Topic: "presence/users/amy", QoS: 1, RetainHandling: 1})
	if got := c.take(t, 0); len(got) != 0 {
		t.Fatalf("retain handling 1 of an existing subscription: %v", topics(got))
	}
	// Retain handling 0 of the same: delivered again (MQTT 5 3.8.3.1).
	c.sub(t, paho.SubscribeOptions{Topic: "presence/users/amy", QoS: 1})
	if got := c.take(t, 1); len(got) != 1 || !got[0].Retain {
		t.Fatalf("retain handling 0, again: %v", topics(got))
	}
	// Retain handling 2: never.
	c.sub(t, paho.SubscribeOptions{Topic: "presence/users/bob", QoS: 1, RetainHandling: 2})
	if got := c.take(t, 0); len(got) != 0 {
		t.Fatalf("retain handling 2: %v", topics(got))
	}
	// Shared: never (MQTT 5 4.8.2, as mochi does).
	c.sub(t, paho.SubscribeOptions{Topic: "$share/g/presence/users/+", QoS: 1})
	if got := c.take(t, 0); len(got) != 0 {
		t.Fatalf("shared: %v", topics(got))
	}
	// "+" at QoS 0, with an identifier; the Guard keeps "hidden" back
	// from d (a user; c is one too, hidden was never matched above).
	d2 := dialSub(t, addr, "d")
	id := 7
	d2.subWith(t, &paho.SubscribeProperties{SubscriptionIdentifier: &id}, paho.SubscribeOptions{Topic: "presence/users/+", QoS: 0})
	got = d2.take(t, 2)
	if fmt.Sprint(topics(got)) != "[presence/users/amy presence/users/bob]" {
		t.Fatalf("+: %v", topics(got))
	}
	for _, p := range got {
		if !p.Retain || p.QoS != 0 || p.Properties.SubscriptionIdentifier == nil || *p.Properties.SubscriptionIdentifier != 7 {
			t.Fatalf("+: %+v %+v", p, p.Properties)
		}
	}
	if extra := d2.take(t, 0); len(extra) != 0 {
		t.Fatalf("+: more: %v", topics(extra))
	}
	// Service accounts (e...: "#" and "+/users/+" are theirs only) see
	// every user, hidden too; at QoS 2: granted 2, delivered at 1.
	for _, f := range []string{"#", "+/users/+", "presence/users/bob/#", "presence/+/bob"} {
		e := dialSub(t, addr, "e"+strings.NewReplacer("/", "", "+", "p", "#", "h").Replace(f))
		e.sub(t, paho.SubscribeOptions{Topic: f, QoS: 2})
		want := map[string]int{"#": 3, "+/users/+": 3, "presence/users/bob/#": 1, "presence/+/bob": 1}[f]
		got := e.take(t, want)
		if extra := e.take(t, 0); len(got) != want || len(extra) != 0 {
			t.Fatalf("%s: %v then %v", f, topics(got), topics(extra))
		}
		for _, p := range got {
			if !p.Retain || p.QoS != 1 {
				t.Fatalf("%s: %+v", f, p)
			}
		}
	}
	if n := d.Stats.Retained.Load(); n != 1+1+2+3+3+1+1 {
		t.Fatalf("Stats.Retained = %d", n)
	}
	// mochi's own retained store holds nothing of presence/users/...
	if n := len(srv.Topics.Messages("presence/users/#")); n != 0 {
		t.Fatalf("mochi retains %d presence/users messages", n)
	}
}

// A retained copy never reaches a subscriber after a newer live one of
// the same user, and with a Guard never repeats a version it had live: a
// subscriber that subscribes over and over while versions are published
// sees each user's versions rise.
func TestRetainedOrderedAgainstLive(t *testing.T) {
	s := &snapStore{m: map[string]uint64{}}
	srv, d, addr := retainedServer(t, s, true)
	o := NewOutlet(srv, d)
	c := dialSub(t, addr, "c")
	c.sub(t, paho.SubscribeOptions{Topic: "presence/users/amy", QoS: 0})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for v := uint64(1); v <= 300; v++ {
			payload := fmt.Appendf(nil, `{"user":"amy","version":%d}`, v)
			_ = o.Publish("amy", v, "presence/users/amy", payload, func() { s.set("amy", v) })
		}
	}()
	for range 30 { // QoS 0: mochi takes a SUBSCRIBE's packet id in use by a delivery in flight as a protocol error
		c.sub(t, paho.SubscribeOptions{Topic: "presence/users/+", QoS: 0})
		c.sub(t, paho.SubscribeOptions{Topic: "presence/users/amy", QoS: 0})
	}
	<-done
	got := c.take(t, 0)
	last := uint64(0)
	for _, p := range got {
		v, _ := Version(p.Payload)
		if v < last {
			t.Fatalf("version %d (retain %v) after %d", v, p.Retain, last)
		}
		last = v
	}
	if last != 300 {
		t.Fatalf("last version %d, want 300", last)
	}
}

// The go:linkname to mochi's publishToClient resolves (a different mochi
// would fail to link or deliver here).
func TestPublishToClientLinked(t *testing.T) {
	s := &snapStore{m: map[string]uint64{"amy": 1}}
	_, _, addr := retainedServer(t, s, false)
	c := dialSub(t, addr, "c")
	c.sub(t, paho.SubscribeOptions{Topic: "presence/users/amy", QoS: 1})
	if got := c.take(t, 1); len(got) != 1 || !got[0].Retain {
		t.Fatalf("%v", topics(got))
	}
	_ = packets.Packet{}
}

// usersOf matches as mochi's topic index does.
func TestUsersOfMatchesMochi(t *testing.T) {
	d := NewDelivery(DeliveryOptions{Prefix: "presence"})
	topicsOf := []string{"presence/users/amy", "presence/users/bob", "presence/users", "presence/groups/g"}
	for _, f := range []string{"#", "+/#", "+/+/+", "+/users/+", "presence/#", "presence/+/+", "presence/users/+",
		"presence/users/#", "presence/users/amy", "presence/users/amy/#", "presence/users/+/#", "presence/+/amy",
		"presence/users", "presence/users/amy/x", "presence/users/+/x", "presence/groups/+", "other/#", "+", "+/+", "presence/+/+/#", "+/+/amy/#", "+/users/amy/#", "presence/users/"} {
		ix := mqtt.NewTopicsIndex()
		ix.Subscribe("c", packets.Subscription{Filter: f})
		var want []string
		for _, tp := range topicsOf[:2] {
			if len(ix.Subscribers(tp).Subscriptions) > 0 {
				want = append(want, tp)
			}
		}
		user, all, ok := d.usersOf(f)
		var got []string
		for _, tp := range topicsOf[:2] {
			if ok && (all || "presence/users/"+user == tp) {
				got = append(got, tp)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: usersOf matches %v, mochi %v", f, got, want)
		}
	}
	if _, _, ok := d.usersOf("$share/g/presence/users/+"); ok {
		t.Error("a shared filter is delivered retained presence")
	}
}

// A change is published live, not retained: a subscriber sees retain 0 on
// it, Retain As Published included (the flag as published), and retain 1
// only on the copy delivered on SUBSCRIBE.
func TestRetainFlagLiveAndRetained(t *testing.T) {
	s := &snapStore{m: map[string]uint64{"amy": 1}}
	srv, d, addr := retainedServer(t, s, true)
	o := NewOutlet(srv, d)
	for _, rap := range []bool{false, true} {
		c := dialSub(t, addr, fmt.Sprintf("c-%v", rap))
		c.sub(t, paho.SubscribeOptions{Topic: "presence/users/amy", QoS: 1, RetainAsPublished: rap})
		if got := c.take(t, 1); len(got) != 1 || !got[0].Retain {
			t.Fatalf("rap %v: retained copy %+v", rap, got)
		}
		v := uint64(2)
		if rap {
			v = 3
		}
		if err := o.Publish("amy", v, "presence/users/amy", fmt.Appendf(nil, `{"user":"amy","version":%d}`, v), func() { s.set("amy", v) }); err != nil {
			t.Fatal(err)
		}
		if got := c.take(t, 1); len(got) != 1 || got[0].Retain {
			t.Fatalf("rap %v: live copy %+v", rap, got)
		}
	}
	if n := len(srv.Topics.Messages("presence/users/#")); n != 0 {
		t.Fatalf("mochi retains %d presence/users messages", n)
	}
}
