package store

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// A Redis client that may SPUBLISH forges changes on alice's channel: one
// with a version far ahead of Redis's clock (it would hold every real
// change of hers back for ever), one of bob's on alice's channel, one with
// a control character in the text. None is reported; each is counted as a
// feed error; the node reads alice's record instead of the first; her next
// real change is reported.
func TestRedisForgedChangesNotBelieved(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	w, _ := quietStore(t, srv.Client(t), "writer", nil)
	l, col := quietStore(t, srv.Client(t), "listener", nil)
	a, err := w.Open(ctx, presence.OpenArgs{User: "alice", ID: "a", Node: "writer", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Listen(ctx, []string{"alice"}); err != nil {
		t.Fatal(err)
	}
	col.WaitFor(t, 10*time.Second, "alice", "online", func(p presence.Aggregate) bool { return p.Status == presence.Online })
	forger := srv.Client(t)
	ch := l.k.userChannel("alice")
	forged := []string{
		`{"u":"alice","v":"18446744073709551615","st":"dnd","tx":"forged","since":"1","ss":{}}`,
		`{"u":"bob","v":"5","st":"dnd","tx":"forged","since":"1","ss":{}}`,
		`{"u":"alice","v":"6","st":"dnd","tx":"forged\u001b[31m","since":"1","ss":{}}`,
	}
	for _, f := range forged {
		if err := forger.SPublish(ctx, ch, f).Err(); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Wait(t, 10*time.Second, "the forged changes counted", func() error {
		n := l.Stats().FeedErrors
		return testkit.Why(n >= 3, fmt.Sprintf("%d feed errors", n))
	})
	busy := presence.Busy
	if err := w.Update(ctx, presence.SessionRef{User: "alice", ID: "a", Epoch: a.Epoch}, presence.Update{Status: &busy}); err != nil {
		t.Fatal(err)
	}
	col.WaitFor(t, 10*time.Second, "alice", "busy", func(p presence.Aggregate) bool { return p.Status == presence.Busy })
	for _, p := range col.All() {
		if p.Text == "forged" || strings.Contains(p.Text, "\x1b") || p.User == "bob" || p.Status == presence.DND {
			t.Errorf("a forged change was reported: %+v", p)
		}
	}
	if n := l.Stats().FeedErrors; n != 3 {
		t.Errorf("%d feed errors, want 3", n)
	}
}

// Everything decoded from Redis is checked as if a client sent it: status
// texts, session ids, node ids, device labels, user names, account status
// and text, the number of sessions.
func TestRedisDecodeChecksEverything(t *testing.T) {
	ok := `{"u":"alice","v":"5","st":"online","tx":"hi","since":"1","ss":[{"id":"a","e":"1","n":"node-1","d":"phone","st":"online","c":"1"}]}`
	if _, _, err := decodeChange([]byte(ok)); err != nil {
		t.Fatalf("a good change: %v", err)
	}
	many := make([]string, maxWireSessions+1)
	for i := range many {
		many[i] = fmt.Sprintf(`{"id":"s%d","e":"1","n":"n","d":"d","st":"online","c":"1"}`, i)
	}
	bad := map[string]string{
		"text with ESC":        strings.Replace(ok, `"tx":"hi"`, `"tx":"\u001b[2J"`, 1),
		"text with bidi":       strings.Replace(ok, `"tx":"hi"`, `"tx":"\u202eevil"`, 1),
		"text too long":        strings.Replace(ok, `"tx":"hi"`, `"tx":"`+strings.Repeat("x", presence.MaxTextBytes+1)+`"`, 1),
		"device with ESC":      strings.Replace(ok, `"d":"phone"`, `"d":"\u001bphone"`, 1),
		"node id with a slash": strings.Replace(ok, `"n":"node-1"`, `"n":"node/1"`, 1),
		"empty session id":     strings.Replace(ok, `"id":"a"`, `"id":""`, 1),
		"session id with NUL":  strings.Replace(ok, `"id":"a"`, `"id":"a\u0000"`, 1),
		"a session twice":      strings.Replace(ok, `"ss":[`, `"ss":[{"id":"a","e":"1","n":"node-1","d":"phone","st":"online","c":"1"},`, 1),
		"too many sessions":    strings.Replace(ok, `"ss":[{"id":"a","e":"1","n":"node-1","d":"phone","st":"online","c":"1"}]`, "["+strings.Join(many, ",")+"]", 1),
	}
	for name, b := range bad {
		if _, _, err := decodeChange([]byte(b)); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	rec := func(edit func(h map[string]string)) map[string]string {
		h := map[string]string{"name": "alice", "v": "5", "st": "online", "tx": "", "since": "1",
			"s:a": `{"id":"a","e":"1","n":"node-1","d":"phone","st":"online","tx":"","c":1,"rn":1,"x":2}`}
		edit(h)
		return h
	}
	if _, _, _, err := decodeUser("alice", rec(func(map[string]string) {})); err != nil {
		t.Fatalf("a good record: %v", err)
	}
	badRec := map[string]func(h map[string]string){
		"account text with ESC":  func(h map[string]string) { h["as"], h["at"] = "away", "\x1b[2J" },
		"account status online":  func(h map[string]string) { h["as"] = "online" },
		"account status unknown": func(h map[string]string) { h["as"] = "sleeping" },
		"session text with ESC": func(h map[string]string) {
			h["s:a"] = `{"id":"a","e":"1","n":"node-1","d":"phone","st":"online","tx":"\u001b[2J","c":1,"rn":1,"x":2}`
		},
		"session device with NUL": func(h map[string]string) {
			h["s:a"] = `{"id":"a","e":"1","n":"node-1","d":"ph\u0000one","st":"online","tx":"","c":1,"rn":1,"x":2}`
		},
		"session status unknown": func(h map[string]string) {
			h["s:a"] = `{"id":"a","e":"1","n":"node-1","d":"phone","st":"sleeping","tx":"","c":1,"rn":1,"x":2}`
		},
		"ended session node with a space": func(h map[string]string) {
			h["ended"] = `[{"id":"b","e":"1","n":"node 1","d":"phone","st":"online","tx":"","c":1,"rn":1,"x":2,"r":"clean","ea":3}]`
		},
		"ended session reason unknown": func(h map[string]string) {
			h["ended"] = `[{"id":"b","e":"1","n":"node-1","d":"phone","st":"online","tx":"","c":1,"rn":1,"x":2,"r":"vanished","ea":3}]`
		},
	}
	for name, edit := range badRec {
		if _, _, _, err := decodeUser("alice", rec(edit)); err == nil {
			t.Errorf("record with %s: decoded", name)
		}
	}
	if _, _, _, err := decodeUser("al/ice", rec(func(map[string]string) {})); err == nil {
		t.Errorf("a record of the user al/ice: decoded")
	}
}
