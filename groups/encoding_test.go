package groups

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/roster"
	"github.com/presenced/presenced/store"
)

// inflate is what a client does with a reply in raw DEFLATE.
func inflate(t testing.TB, b []byte) []byte {
	t.Helper()
	out, err := io.ReadAll(flate.NewReader(bytes.NewReader(b)))
	if err != nil {
		t.Fatalf("inflate: %v", err)
	}
	return out
}

// plain is e's payload as JSON: inflated when its properties say it is
// in raw DEFLATE.
func plain(t testing.TB, e sent) []byte {
	t.Helper()
	if contentEncoding(e.props) == EncodingDeflate {
		return inflate(t, e.payload)
	}
	return e.payload
}

func contentEncoding(p packets.Properties) string {
	for _, u := range p.User {
		if u.Key == ContentEncodingProperty {
			return u.Val
		}
	}
	return ""
}

// bigDelta is a merged delta of n members of 12-byte names come online,
// as a resume's reply after n changes.
func bigDelta(n int) []byte {
	d := roster.Delta{Group: "team", Version: 1796040000123000 + uint64(n), Follows: 1796040000123000}
	for i := range n {
		d.Changes = append(d.Changes, roster.Member{User: fmt.Sprintf("member-%05d", i*100), Status: presence.Online, Version: 1796040000123000 + uint64(i)})
	}
	b, _ := json.Marshal(d)
	return b
}

func TestDeflateRoundTrip(t *testing.T) {
	for _, n := range []int{1, 10, 100, 1000} {
		b := bigDelta(n)
		z, ok := deflate(b)
		if !ok {
			t.Fatalf("%d changes: not smaller (%d bytes)", n, len(b))
		}
		if got := inflate(t, z); !bytes.Equal(got, b) {
			t.Fatalf("%d changes: the round trip differs", n)
		}
		t.Logf("%d changes: %d bytes of JSON, %d deflated", n, len(b), len(z))
	}
	// Reused writers: the pool gives a reset writer each time.
	for range 3 {
		b := bigDelta(100)
		z, _ := deflate(b)
		if !bytes.Equal(inflate(t, z), b) {
			t.Fatal("a reused writer's output differs")
		}
	}
}

// What would not come out smaller is not deflated (the reply is sent as
// it is).
func TestDeflateNotSmaller(t *testing.T) {
	noise := make([]byte, 4096)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range noise {
		noise[i] = byte(r.Uint32())
	}
	for _, b := range [][]byte{noise, []byte("{}"), nil} {
		if z, ok := deflate(b); ok {
			t.Fatalf("%d bytes deflated to %d: want not smaller", len(b), len(z))
		}
	}
}

// A resume with encoding=deflate gets its reply (the delta, or the
// snapshot it falls back to) in raw DEFLATE with the reply's properties,
// to it only; the same JSON once inflated as a plain resume's. Without the
// property, or with one not known (counted), the reply is plain JSON, and
// the batches after it are plain JSON for everyone.
func TestResumeDeflate(t *testing.T) {
	st := store.NewMemory(presence.NewRules(nil), time.Now, func(store.Event) {})
	out := &fenceOutlet{}
	s := New(Options{Prefix: "presence", Window: 10 * time.Millisecond, Store: st, Presence: &presenceMap{m: map[string]presence.Shown{}}, Outlet: out,
		Viewer: func(*mqtt.Client) (string, bool) { return "", true },
		Resume: roster.LogLimits{MaxAge: time.Minute, MaxDeltas: 1000, MaxBytes: 1 << 20}, Addressed: true})
	ctx := context.Background()
	users := make([]string, 300)
	members := make([]roster.Member, len(users))
	for i := range users {
		users[i] = fmt.Sprintf("member-%05d", i)
		members[i] = roster.Member{User: users[i], Status: presence.Offline}
	}
	if err := st.SetGroup(ctx, "team", users); err != nil {
		t.Fatal(err)
	}
	if err := s.Load(ctx); err != nil {
		t.Fatal(err)
	}
	// Not started: each resume is served by the next batch.
	s.mirror.Set(roster.Snapshot{Group: "team", Version: 10, Members: members})
	v := uint64(10)
	batch := func(n int) {
		d := &roster.Delta{Group: "team", Version: v + 1, Follows: v}
		for i := range n {
			d.Changes = append(d.Changes, roster.Member{User: users[(int(v)*7+i)%len(users)], Status: presence.Online, Version: v + 1})
		}
		v++
		s.Apply(d)
	}
	batch(1)
	held, _ := s.mirror.Get("team")
	for range 20 {
		batch(5)
	}
	srv := mqtt.New(nil)
	client := func(id string) *mqtt.Client {
		cl := srv.NewClient(nil, "t", id, false)
		cl.Properties.ProtocolVersion = 5
		return cl
	}
	deflateAsk := packets.UserProperty{Key: EncodingProperty, Val: EncodingDeflate}
	type reply struct {
		e     sent
		batch sent // the batch after it
	}
	resume := func(id, version string, more ...packets.UserProperty) reply {
		t.Helper()
		cl := client(id)
		mark := len(out.events)
		if rh := out.subscribe(s, cl, version, more...); rh != 2 {
			t.Fatalf("%s: retain handling %d", id, rh)
		}
		batch(1)
		var r []sent
		for _, e := range out.events[mark:] {
			if e.kind == "live" || e.kind == "to" && e.to[0] == cl {
				r = append(r, e)
			}
		}
		if len(r) != 2 {
			t.Fatalf("%s: %d messages, want the reply and the batch", id, len(r))
		}
		if r[1].kind != "live" || r[1].props.User != nil || !json.Valid(r[1].payload) {
			t.Fatalf("%s: the batch after the reply is not plain JSON: %+v", id, r[1])
		}
		return reply{e: r[0], batch: r[1]}
	}
	at := fmt.Sprint(held.Version)

	plainReply := resume("plain", at)
	if plainReply.e.props.User != nil || plainReply.e.props.ContentType != "" || !json.Valid(plainReply.e.payload) {
		t.Fatalf("a plain resume's reply: %+v", plainReply.e.props)
	}
	z := resume("deflate", at, deflateAsk)
	p := z.e.props
	if contentEncoding(p) != EncodingDeflate || p.ContentType != "application/json" || !p.PayloadFormatFlag || p.PayloadFormat != 0 {
		t.Fatalf("a deflate resume's reply properties: %+v", p)
	}
	if json.Valid(z.e.payload) || len(z.e.payload) >= len(plainReply.e.payload) {
		t.Fatalf("a deflate resume's reply: %d bytes, the plain one %d", len(z.e.payload), len(plainReply.e.payload))
	}
	// Both replies lead from the version held to the one before their
	// batch: apply each to what the client held, compare with the group.
	for _, r := range []reply{plainReply, z} {
		got, gaps, dups := rebuild(t, []sent{{kind: "sub", to: r.e.to}, r.e, r.batch}, 0, r.e.to[0], &held)
		want, _ := s.mirror.Get("team")
		if gaps+dups != 0 || got.Version != r.batch.versionOf(t) || got.Version > want.Version {
			t.Fatalf("%s: %d gaps, %d dups, at %d", r.e.to[0].ID, gaps, dups, got.Version)
		}
	}
	var d roster.Delta
	if err := json.Unmarshal(inflate(t, z.e.payload), &d); err != nil || d.Follows != held.Version || len(d.Changes) == 0 {
		t.Fatalf("the inflated reply: %v %+v", err, d)
	}
	if n := s.Resumes.Deflated.Load(); n != 1 {
		t.Fatalf("deflated replies %d, want 1", n)
	}
	if saved := s.Resumes.DeflateSaved.Load(); saved <= 0 {
		t.Fatalf("bytes saved %d", saved)
	}

	// Unknown encoding: counted, plain JSON.
	u := resume("gzip", at, packets.UserProperty{Key: EncodingProperty, Val: "gzip"})
	if u.e.props.User != nil || !json.Valid(u.e.payload) || s.Resumes.UnknownEncoding.Load() != 1 {
		t.Fatalf("unknown encoding: %+v, counted %d", u.e.props, s.Resumes.UnknownEncoding.Load())
	}
	// The snapshot it falls back to (a version below the log): deflated
	// too, and the members once inflated.
	snapZ := resume("old", "1", deflateAsk)
	if contentEncoding(snapZ.e.props) != EncodingDeflate || !strings.Contains(string(inflate(t, snapZ.e.payload)), `"members"`) {
		t.Fatalf("the snapshot fallback: %+v", snapZ.e.props)
	}
	if n := s.Resumes.Deflated.Load(); n != 2 {
		t.Fatalf("deflated replies %d, want 2", n)
	}
	// The property without a version: nothing asked, nothing counted.
	cl := client("no-version")
	if rh := out.subscribe(s, cl, "", deflateAsk); rh != 0 || s.Resumes.UnknownEncoding.Load() != 1 {
		t.Fatalf("encoding alone: retain handling %d", rh)
	}
}

// versionOf is the version of a group message.
func (e sent) versionOf(t testing.TB) uint64 {
	var m struct {
		Version uint64 `json:"version"`
	}
	if err := json.Unmarshal(plain(t, e), &m); err != nil {
		t.Fatal(err)
	}
	return m.Version
}

// BenchmarkDeflateReply is the CPU cost of one resume's reply compressed:
// 100 changes of 12-byte members (the scenario), at each level.
func BenchmarkDeflateReply(b *testing.B) {
	js := bigDelta(100)
	for _, lv := range []struct {
		name  string
		level int
	}{{"best", flate.BestCompression}, {"default", flate.DefaultCompression}, {"speed", flate.BestSpeed}} {
		b.Run(lv.name, func(b *testing.B) {
			w, _ := flate.NewWriter(nil, lv.level)
			var buf bytes.Buffer
			b.SetBytes(int64(len(js)))
			for b.Loop() {
				buf.Reset()
				w.Reset(&buf)
				w.Write(js)
				w.Close()
			}
			b.ReportMetric(float64(buf.Len()), "bytes/reply")
		})
	}
	b.Run("pooled", func(b *testing.B) {
		b.SetBytes(int64(len(js)))
		for b.Loop() {
			deflate(js)
		}
	})
}

// bigSnapshot is a snapshot of n members of 12-byte names, one in 100
// online.
func bigSnapshot(n int) []byte {
	s := roster.Snapshot{Group: "team", Version: 1796040000123000 + uint64(n)}
	for i := range n {
		m := roster.Member{User: fmt.Sprintf("member-%05d", i), Status: presence.Offline}
		if i%100 == 0 {
			m.Status, m.Version = presence.Online, 1796040000123000+uint64(i*37)
		}
		s.Members = append(s.Members, m)
	}
	b, _ := json.Marshal(s)
	return b
}

// BenchmarkDeflateSnapshot is the CPU cost of a snapshot of 10,000
// members compressed (a resume that falls back to it), at each level.
func BenchmarkDeflateSnapshot(b *testing.B) {
	js := bigSnapshot(10000)
	for _, lv := range []struct {
		name  string
		level int
	}{{"best", flate.BestCompression}, {"default", flate.DefaultCompression}, {"speed", flate.BestSpeed}} {
		b.Run(lv.name, func(b *testing.B) {
			w, _ := flate.NewWriter(nil, lv.level)
			var buf bytes.Buffer
			b.SetBytes(int64(len(js)))
			for b.Loop() {
				buf.Reset()
				w.Reset(&buf)
				w.Write(js)
				w.Close()
			}
			b.ReportMetric(float64(buf.Len()), "bytes/reply")
		})
	}
}

// Without the delivery's Guard (Options.Addressed false) a resume's reply
// reaches every subscriber of the group on the node: it is never
// compressed, even when asked.
func TestResumeDeflateUnaddressed(t *testing.T) {
	st := store.NewMemory(presence.NewRules(nil), time.Now, func(store.Event) {})
	out := &fenceOutlet{}
	s := New(Options{Prefix: "presence", Window: 10 * time.Millisecond, Store: st, Presence: &presenceMap{m: map[string]presence.Shown{}}, Outlet: out,
		Viewer: func(*mqtt.Client) (string, bool) { return "", true },
		Resume: roster.LogLimits{MaxAge: time.Minute, MaxDeltas: 1000, MaxBytes: 1 << 20}})
	users := make([]string, 100)
	members := make([]roster.Member, len(users))
	for i := range users {
		users[i] = fmt.Sprintf("member-%05d", i)
		members[i] = roster.Member{User: users[i], Status: presence.Offline}
	}
	if err := st.SetGroup(context.Background(), "team", users); err != nil {
		t.Fatal(err)
	}
	if err := s.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.mirror.Set(roster.Snapshot{Group: "team", Version: 10, Members: members})
	d := &roster.Delta{Group: "team", Version: 11, Follows: 10}
	for _, u := range users {
		d.Changes = append(d.Changes, roster.Member{User: u, Status: presence.Online, Version: 11})
	}
	s.Apply(d)
	cl := mqtt.New(nil).NewClient(nil, "t", "back", false)
	cl.Properties.ProtocolVersion = 5
	mark := len(out.events)
	out.subscribe(s, cl, "10", packets.UserProperty{Key: EncodingProperty, Val: EncodingDeflate})
	s.Apply(&roster.Delta{Group: "team", Version: 12, Follows: 11, Changes: []roster.Member{{User: users[0], Status: presence.Away, Version: 12}}})
	var r []sent
	for _, e := range out.events[mark:] {
		if e.kind == "to" {
			r = append(r, e)
		}
	}
	if len(r) != 1 || r[0].props.User != nil || !json.Valid(r[0].payload) || s.Resumes.Deflated.Load() != 0 {
		t.Fatalf("unaddressed: %d replies, %+v", len(r), r)
	}
}
