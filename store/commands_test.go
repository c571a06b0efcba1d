package store

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/presenced/presenced/integration/redistest"
	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
)

// A command message is checked before anything acts on it: hostile or
// broken ones are refused.
func TestDecodeCommand(t *testing.T) {
	good := []string{
		`{"op":"kick","node":"A","user":"alice","id":"phone","epoch":7,"code":152,"by":"jo"}`,
		`{"op":"forget","user":"alice"}`,
		`{"op":"notify","node":"B","user":"alice","msg":"A:x:1","payload":"aGk=","qos":1,"at":"2026-12-02T04:00:00Z"}`,
		`{"op":"notify","node":"B","user":"alice","msg":"A:x:1","payload":"` + base64.StdEncoding.EncodeToString(make([]byte, MaxNotifyPayload)) + `"}`,
	}
	for _, b := range good {
		if _, err := decodeCommand([]byte(b)); err != nil {
			t.Errorf("%.120s: %v", b, err)
		}
	}
	bad := []string{
		``, `{`, `[]`, `{"op":"kick"}`, `{"op":"reboot","user":"alice"}`,
		`{"op":"forget","user":"+"}`, `{"op":"forget","user":"a/b"}`,
		`{"op":"kick","node":"A","user":"alice","id":"phone"}`,             // no epoch
		`{"op":"kick","user":"alice","id":"phone","epoch":7}`,              // no node
		`{"op":"kick","node":"A","user":"alice","id":"","epoch":7}`,        // no id
		`{"op":"kick","node":"A","user":"alice","id":"a\u0001","epoch":7}`, // a control
		`{"op":"kick","node":"A","user":"alice","id":"p","epoch":-1}`,
		`{"op":"forget","user":"alice","by":"` + strings.Repeat("x", 600) + `"}`,
		`{"op":"forget","user":"alice","by":"` + strings.Repeat("x", 5000) + `"}`,
		`{"op":"notify","user":"alice","msg":"m"}`,                                                                                                    // no node
		`{"op":"notify","node":"B","user":"alice"}`,                                                                                                   // no message id
		`{"op":"notify","node":"B","user":"alice","msg":"m","qos":2}`,                                                                                 // QoS 2
		`{"op":"notify","node":"B","user":"alice","msg":"m","payload":"` + base64.StdEncoding.EncodeToString(make([]byte, MaxNotifyPayload+1)) + `"}`, // too large
	}
	for _, b := range bad {
		if _, err := decodeCommand([]byte(b)); !errors.Is(err, ErrBadCommand) {
			t.Errorf("%.80s: %v, want ErrBadCommand", b, err)
		}
	}
}

// FuzzDecodeCommand: never a panic, and what is accepted is valid.
func FuzzDecodeCommand(f *testing.F) {
	f.Add([]byte(`{"op":"kick","node":"A","user":"alice","id":"phone","epoch":7,"code":152}`))
	f.Add([]byte(`{"op":"forget","user":"alice"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeCommand(b)
		if err == nil && c.Validate() != nil {
			t.Fatalf("accepted an invalid command %+v", c)
		}
	})
}

// The memory store forgets an offline user, refuses while a session is
// live, and knows when there was nothing to forget.
func TestMemoryForgetUser(t *testing.T) {
	ctx := context.Background()
	m := NewMemory(presence.NewRules(nil), time.Now, func(Event) {})
	s, err := m.Open(ctx, presence.OpenArgs{User: "alice", ID: "phone", Node: "n1", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if found, err := m.ForgetUser(ctx, "alice"); !found || !errors.Is(err, ErrLive) {
		t.Fatalf("forget while live: %v %v, want ErrLive", found, err)
	}
	if err := m.End(ctx, presence.EndArgs{User: "alice", ID: "phone", Epoch: s.Epoch, Reason: presence.EndClean}); err != nil {
		t.Fatal(err)
	}
	if found, err := m.ForgetUser(ctx, "alice"); !found || err != nil {
		t.Fatalf("forget offline: %v %v", found, err)
	}
	if _, ok, _ := m.User(ctx, "alice"); ok {
		t.Fatal("alice still kept")
	}
	// The list's name index forgets her too: no empty user is listed.
	page, err := m.List(ctx, presence.ListQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Users) != 0 || page.Examined != 0 {
		t.Fatalf("list after forget: %+v, want nobody", page)
	}
	if found, err := m.ForgetUser(ctx, "alice"); found || err != nil {
		t.Fatalf("forget again: %v %v, want not found", found, err)
	}
	if _, err := m.ForgetUser(ctx, "a/b"); err == nil {
		t.Fatal("a bad name forgotten")
	}
}

// With Redis: the forget is one script (refused while live), and a
// command reaches the node it names, or every node, and no other.
func TestRedisForgetAndCommands(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	a, colA := newRedisStore(t, c, "A")
	b, colB := newRedisStore(t, c, "B") // the same key prefix: one cluster of two nodes
	s, err := a.Open(ctx, presence.OpenArgs{User: "alice", ID: "phone", Node: "A", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if found, err := a.ForgetUser(ctx, "alice"); !found || !errors.Is(err, ErrLive) {
		t.Fatalf("forget while live: %v %v", found, err)
	}
	if err := a.End(ctx, presence.EndArgs{User: "alice", ID: "phone", Epoch: s.Epoch, Reason: presence.EndClean}); err != nil {
		t.Fatal(err)
	}
	if found, err := a.ForgetUser(ctx, "alice"); !found || err != nil {
		t.Fatalf("forget: %v %v", found, err)
	}
	if _, ok, _ := a.User(ctx, "alice"); ok {
		t.Fatal("alice's record still there")
	}
	if found, err := a.ForgetUser(ctx, "alice"); found || err != nil {
		t.Fatalf("forget again: %v %v", found, err)
	}

	commands := func(col *events) []Command {
		col.mu.Lock()
		defer col.mu.Unlock()
		var out []Command
		for _, e := range col.others {
			if e.Kind == CommandReceived {
				out = append(out, *e.Command)
			}
		}
		return out
	}
	kick := Command{Op: CommandKick, Node: "B", User: "alice", ID: "phone", Epoch: 9, Code: 0x98, By: "jo"}
	if heard, err := a.SendCommand(ctx, kick); !heard || err != nil {
		t.Fatalf("kick to B: %v %v", heard, err)
	}
	note := Command{Op: CommandNotify, Node: "B", User: "alice", Msg: "A:x:1", Payload: []byte("wake"), QoS: 1, At: time.UnixMilli(1764648000000).UTC()}
	if heard, err := a.SendCommand(ctx, note); !heard || err != nil {
		t.Fatalf("notify to B: %v %v", heard, err)
	}
	if heard, err := a.SendCommand(ctx, Command{Op: CommandKick, Node: "Z", User: "alice", ID: "phone", Epoch: 9}); heard || err != nil {
		t.Fatalf("kick to a node nobody runs: heard %v %v, want false", heard, err)
	}
	if heard, err := b.SendCommand(ctx, Command{Op: CommandForget, User: "alice"}); !heard || err != nil {
		t.Fatalf("forget to all: %v %v", heard, err)
	}
	if _, err := a.SendCommand(ctx, Command{Op: "reboot", User: "alice"}); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("a bad command sent: %v", err)
	}
	if err := c.Publish(ctx, a.k.commands(), `{"op":"kick","user":"+"}`).Err(); err != nil {
		t.Fatal(err)
	}
	testkit.Wait(t, 10*time.Second, "the commands heard", func() error {
		ca, cb := commands(colA), commands(colB)
		ok := len(ca) == 1 && ca[0].Op == CommandForget && len(cb) == 3 && reflect.DeepEqual(cb[0], kick) && reflect.DeepEqual(cb[1], note) && cb[2].Op == CommandForget &&
			a.Stats().FeedErrors == 1 && b.Stats().FeedErrors == 1
		return testkit.Why(ok, fmt.Sprintf("A heard %+v, B heard %+v, feed errors %d %d", ca, cb, a.Stats().FeedErrors, b.Stats().FeedErrors))
	})
}
