package store

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/presence"
)

// slowChange decodes a feed message the way every message was decoded
// before the fast path: encoding/json only.
func slowChange(b []byte) (presence.Aggregate, presence.Cause, error) {
	var w wireChange
	if err := json.Unmarshal(b, &w); err != nil {
		return presence.Aggregate{}, presence.Cause{}, err
	}
	p, err := w.presence()
	if err != nil {
		return presence.Aggregate{}, presence.Cause{}, err
	}
	c, err := w.cause()
	return p, c, err
}

// sameDecoding fails t when the fast path read b and its result is not
// encoding/json's.
func sameDecoding(t *testing.T, b []byte) bool {
	t.Helper()
	var w wireChange
	if !fastChange(b, &w) {
		return false
	}
	fp, fc, ferr := decodeChange(b)
	sp, sc, serr := slowChange(b)
	if (ferr == nil) != (serr == nil) || !reflect.DeepEqual(fp, sp) || fc != sc {
		t.Fatalf("%s:\nfast %+v %+v %v\nslow %+v %+v %v", b, fp, fc, ferr, sp, sc, serr)
	}
	return true
}

// FuzzFastChange holds the fast path to encoding/json: whatever it reads
// gives the aggregate, cause and verdict encoding/json gives.
func FuzzFastChange(f *testing.F) {
	for _, s := range []string{
		`{"u":"alice","v":"1764670000000001","st":"online","tx":"","since":"1764670000000","ls":"","ss":[{"id":"c1","e":"1764670000000001","n":"n1","d":"phone","st":"online","c":"1764670000000","un":"alice","ip":"127.0.0.1","pt":1883,"l":"tcp","pv":4,"ka":30,"cs":true}]}`,
		`{"u":"alice","v":"1764670000000009","st":"offline","tx":"","since":"1764670001000","ls":"1764670001000","ss":{},"rs":"clean","r":"clean","wd":"5000","x":[{"id":"c1","e":"1764670000000001","n":"n1","d":"","st":"away","c":"1764670000000","r":"clean","ea":"1764670001000","se":3600}]}`,
		`{"u":"bob","v":"7","st":"dormant","tx":"x","since":"5","ls":"6","ss":{},"nx":"9","pv":{"i":"1","m":"quarter","d":"5","e":""}}`,
		`{"u":"bob","v":"7","st":"online","tx":"","since":"5","ls":"","ss":[],"pv":{"i":"1"},"pv":{"m":"hidden"}}`,
		`{"u":"bob","v":"7","st":"online","tx":"","since":"5","ls":"","ss":[{"id":"a","e":"1","n":"n","d":"","st":"online","c":"1","pv":256}]}`,
		`{"u":"b\u00f6b","v":"7"}`,
		`{"u":"bob","v":"7","wd":"05"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sameDecoding(t, b)
	})
}

// What the scripts publish takes the fast path: every change of a session's
// life, with its connection's facts, an end's reason and will delay, a
// privacy setting and a dormant device, read from a real redis-server's
// firehose channel.
func TestFastChangeReadsWhatLuaWrites(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	r := NewRedis(RedisOptions{Client: c, Prefix: "t:" + t.Name() + ":", Node: "n1", Authoritative: []string{"desktop"}, NodeTTL: 3 * time.Second, Retention: time.Hour, Report: func(Event) {}})
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	sub := c.SSubscribe(ctx, r.k.slotChannel("alice"))
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	conn := presence.Conn{Username: "alice", IP: "192.0.2.1", Port: 8883, Listener: "tls", ProtoVer: 5, KeepAlive: 30, CleanStart: true, Expiry: 3600}
	s1, err := r.Open(ctx, presence.OpenArgs{User: "alice", ID: "phone", Node: "n1", Device: "phone", TTL: time.Hour, Conn: conn})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := r.Open(ctx, presence.OpenArgs{User: "alice", ID: "desk", Node: "n1", Device: "desktop", TTL: time.Hour, Expect: time.Hour, Margin: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	busy, text := presence.Busy, "in a meeting"
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(r.Update(ctx, presence.SessionRef{User: "alice", ID: "desk", Epoch: s2.Epoch}, presence.Update{Status: &busy, Text: &text}))
	invisible, mode := true, presence.LastSeenQuarter
	must(r.SetAccount(ctx, "alice", presence.AccountUpdate{Invisible: &invisible, LastSeen: &mode}))
	words := "gone"
	must(r.End(ctx, presence.EndArgs{User: "alice", ID: "phone", Epoch: s1.Epoch, Reason: presence.EndNetwork, LastWords: &words, WillDelay: 5 * time.Second}))
	must(r.End(ctx, presence.EndArgs{User: "alice", ID: "desk", Epoch: s2.Epoch, Reason: presence.EndClean})) // dormant: it declared a check-in
	const want = 6
	for i := range want {
		m, err := sub.ReceiveMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !sameDecoding(t, []byte(m.Payload)) {
			t.Fatalf("change %d took the slow path: %s", i+1, m.Payload)
		}
		if _, _, err := decodeChange([]byte(m.Payload)); err != nil {
			t.Fatalf("change %d: %v: %s", i+1, err, m.Payload)
		}
	}
}

// BenchmarkDecodeChange decodes a change as a node receives one from the
// feed (an online session with its connection's facts; an end with the
// session it ended), by the fast path and by encoding/json.
func BenchmarkDecodeChange(b *testing.B) {
	msgs := [][]byte{
		[]byte(`{"u":"alice","v":"1764670000000001","st":"online","tx":"","since":"1764670000000","ls":"","ss":[{"id":"c1","e":"1764670000000001","n":"n1","d":"phone","st":"online","c":"1764670000000","un":"alice","ip":"127.0.0.1","pt":1883,"l":"tcp","pv":4,"ka":30,"cs":true}]}`),
		[]byte(`{"u":"alice","v":"1764670000000009","st":"offline","tx":"","since":"1764670001000","ls":"1764670001000","ss":{},"rs":"clean","r":"clean","x":[{"id":"c1","e":"1764670000000001","n":"n1","d":"phone","st":"away","c":"1764670000000","un":"alice","ip":"127.0.0.1","pt":1883,"l":"tcp","pv":4,"ka":30,"cs":true,"r":"clean","ea":"1764670001000"}]}`),
	}
	for _, c := range []struct {
		name   string
		decode func([]byte) (presence.Aggregate, presence.Cause, error)
	}{{"fast", decodeChange}, {"encoding-json", slowChange}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, _, err := c.decode(msgs[i%2]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
