package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/presenced/presenced/presence"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestDue(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		name     string
		n        int
		waited   time.Duration
		flushing bool
		due      bool
		wait     time.Duration
	}{
		{"empty", 0, 0, false, false, 0},
		{"empty, flushing", 0, 0, true, false, 0},
		{"one, fresh", 1, 0, false, false, 200 * ms},
		{"one, waited some", 1, 150 * ms, false, false, 50 * ms},
		{"one, waited max_wait", 1, 200 * ms, false, true, 0},
		{"one, waited longer", 1, time.Second, false, true, 0},
		{"a full batch", 10, 0, false, true, 0},
		{"more than a batch", 25, 0, false, true, 0},
		{"one, flushing", 1, 0, true, true, 0},
	} {
		due, wait := Due(c.n, t0, t0.Add(c.waited), 10, 200*ms, c.flushing)
		if due != c.due || wait != c.wait {
			t.Errorf("%s: Due = %v %v, want %v %v", c.name, due, wait, c.due, c.wait)
		}
	}
}

func TestBackoff(t *testing.T) {
	b := Backoff{Base: 100 * time.Millisecond, Max: time.Second}
	for _, c := range []struct {
		attempt  int
		rnd      float64
		min, max time.Duration
	}{
		{1, 0, 50 * time.Millisecond, 50 * time.Millisecond},
		{1, 0.999, 50 * time.Millisecond, 100 * time.Millisecond},
		{2, 0, 100 * time.Millisecond, 100 * time.Millisecond},
		{3, 0.5, 300 * time.Millisecond, 300 * time.Millisecond},
		{4, 0.999, 400 * time.Millisecond, 800 * time.Millisecond},
		{5, 0, 500 * time.Millisecond, 500 * time.Millisecond}, // capped: 1s, half of it
		{50, 0.999, 500 * time.Millisecond, time.Second},
	} {
		d := b.Delay(c.attempt, c.rnd)
		if d < c.min || d > c.max {
			t.Errorf("Delay(%d, %v) = %v, want within [%v, %v]", c.attempt, c.rnd, d, c.min, c.max)
		}
	}
}

func TestBreaker(t *testing.T) {
	b := Breaker{Threshold: 3, Cooldown: 10 * time.Second}
	now := t0
	step := func(what string, wantOK bool, wantState BreakerState) {
		t.Helper()
		ok, _ := b.Allow(now)
		if ok != wantOK || b.State(now) != wantState {
			t.Fatalf("%s: Allow %v state %v, want %v %v", what, ok, b.State(now), wantOK, wantState)
		}
	}
	step("fresh", true, Closed)
	if b.Failure(now) || b.Failure(now) {
		t.Fatal("opened before the threshold")
	}
	b.Success()
	b.Failure(now)
	b.Failure(now)
	step("a success resets the count", true, Closed)
	if !b.Failure(now) {
		t.Fatal("the third failure in a row does not open")
	}
	step("open", false, Open)
	if _, wait := b.Allow(now.Add(4 * time.Second)); wait != 6*time.Second {
		t.Fatalf("wait %v, want the cooldown's rest, 6s", wait)
	}
	now = now.Add(10 * time.Second)
	step("cooldown over: one attempt", true, HalfOpen)
	if !b.Failure(now) {
		t.Fatal("a failed half-open attempt does not open again")
	}
	step("open again", false, Open)
	now = now.Add(10 * time.Second)
	step("half-open again", true, HalfOpen)
	b.Success()
	step("closed after a half-open success", true, Closed)
}

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		status int
		err    error
		want   Outcome
	}{
		{200, nil, Delivered}, {204, nil, Delivered}, {302, nil, Rejected}, {307, nil, Rejected},
		{400, nil, Rejected}, {401, nil, Rejected}, {404, nil, Rejected}, {410, nil, Rejected}, {413, nil, Rejected},
		{408, nil, Retry}, {429, nil, Retry}, {500, nil, Retry}, {502, nil, Retry}, {503, nil, Retry},
		{0, errors.New("connection refused"), Retry},
	} {
		if got := Classify(c.status, c.err); got != c.want {
			t.Errorf("Classify(%d, %v) = %v, want %v", c.status, c.err, got, c.want)
		}
	}
}

// verify is a receiver's check of Presenced-Signature, written apart
// from Signature: parse t and every v1, recompute, compare in constant
// time, refuse a timestamp older than tolerance.
func verify(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts string
	var sigs []string
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return fmt.Errorf("bad part %q", part)
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("bad t: %w", err)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("timestamp %s off by %v", ts, d)
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ts + "." + string(body)))
	want := mac.Sum(nil)
	for _, s := range sigs {
		got, err := hex.DecodeString(s)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return errors.New("no matching v1 signature")
}

func TestSignature(t *testing.T) {
	secret, body := []byte("whsec_test"), []byte(`{"events":[]}`)
	h := Signature(secret, t0, body)
	if !strings.HasPrefix(h, "t="+strconv.FormatInt(t0.Unix(), 10)+",v1=") {
		t.Fatalf("header %q", h)
	}
	if err := verify(secret, h, body, t0.Add(time.Minute), 5*time.Minute); err != nil {
		t.Fatalf("verify: %v", err)
	}
	// A vector computed apart (Python's hmac): HMAC-SHA256("key", "1.body").
	if got, want := Signature([]byte("key"), time.Unix(1, 0), []byte("body")), "t=1,v1=91b5374b153842ad05b2c4eab9349b8321b14703165bd3fb8b034dfb8be98ae5"; got != want {
		t.Fatalf("Signature = %q, want %q", got, want)
	}
	for name, bad := range map[string]func() error{
		"another secret": func() error { return verify([]byte("other"), h, body, t0, time.Minute) },
		"another body":   func() error { return verify(secret, h, []byte(`{"events":[1]}`), t0, time.Minute) },
		"too old":        func() error { return verify(secret, h, body, t0.Add(10*time.Minute), 5*time.Minute) },
		"another t":      func() error { return verify(secret, strings.Replace(h, "t=", "t=1", 1), body, time.Unix(0, 0), 1<<62) },
		"no v1":          func() error { return verify(secret, "t="+strconv.FormatInt(t0.Unix(), 10), body, t0, time.Minute) },
	} {
		if bad() == nil {
			t.Errorf("%s: verified", name)
		}
	}
}

func TestFromShown(t *testing.T) {
	on := func(st presence.Status, text string, v uint64) presence.Aggregate {
		return presence.Aggregate{User: "alice", Status: st, Text: text, Version: v, Since: t0,
			Sessions: []presence.SessionView{{ID: "alice/phone", Epoch: 1}}}
	}
	off := presence.Aggregate{User: "alice", Status: presence.Offline, Version: 9, Since: t0, LastSeen: t0.Add(time.Minute)}
	shown := func(a presence.Aggregate) presence.Shown { return a.Shown() }
	for _, c := range []struct {
		name   string
		a      presence.Aggregate
		before presence.Shown
		want   string
	}{
		{"first shown online", on(presence.Online, "", 1), presence.Shown{}, UserOnline},
		{"first shown offline: nothing", off, presence.Shown{}, ""},
		{"came online", on(presence.Online, "", 10), shown(off), UserOnline},
		{"came online busy", on(presence.Busy, "", 10), shown(off), UserOnline},
		{"went offline", off, shown(on(presence.Online, "", 8)), UserOffline},
		{"status", on(presence.Away, "", 3), shown(on(presence.Online, "", 2)), UserStatus},
		{"text", on(presence.Online, "lunch", 3), shown(on(presence.Online, "", 2)), UserStatus},
		{"sessions only: nothing", on(presence.Online, "", 3), shown(on(presence.Online, "", 2)), ""},
		{"offline to offline: nothing", off, shown(presence.Aggregate{User: "alice", Status: presence.Offline, Version: 3}), ""},
	} {
		ev, ok := FromShown(c.a, c.before)
		if ok != (c.want != "") || ev.Type != c.want {
			t.Errorf("%s: %v %q, want %q", c.name, ok, ev.Type, c.want)
			continue
		}
		if !ok {
			continue
		}
		if ev.ID != UserID("alice", c.a.Version) || ev.Version != c.a.Version || ev.User != "alice" {
			t.Errorf("%s: event %+v", c.name, ev)
		}
		var d UserData
		if err := json.Unmarshal(ev.Data, &d); err != nil || d.Status != c.a.Status || d.Sessions != len(c.a.Sessions) {
			t.Errorf("%s: data %s (%v)", c.name, ev.Data, err)
		}
		if (d.LastSeen != nil) != (c.want == UserOffline) {
			t.Errorf("%s: last_seen %v", c.name, d.LastSeen)
		}
	}
}

func TestFromLifecycle(t *testing.T) {
	s := presence.SessionView{ID: "alice/phone", Epoch: 4, Node: "n1", ConnectedAt: t0}
	open, ok := FromLifecycle(presence.LifecycleEvent{Kind: presence.LifecycleConnected, User: "alice", Session: s, At: t0, Version: 7})
	if !ok || open.Type != SessionOpened || open.ID != "alice@7/opened/alice/phone/4" {
		t.Fatalf("opened: %+v", open)
	}
	end, ok := FromLifecycle(presence.LifecycleEvent{Kind: presence.LifecycleDisconnected, User: "alice", Session: s, Reason: presence.EndTimeout, At: t0, Version: 8})
	if !ok || end.Type != SessionEnded || !strings.Contains(string(end.Data), `"reason":"timeout"`) {
		t.Fatalf("ended: %+v %s", end, end.Data)
	}
	if _, ok := FromLifecycle(presence.LifecycleEvent{Kind: presence.LifecycleConnectFailed, User: "alice"}); ok {
		t.Fatal("a refused CONNECT is no webhook event")
	}
}
