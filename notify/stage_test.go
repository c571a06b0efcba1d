package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/presenced/presenced/internal/testkit"
	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/webhook"
)

// fakes: one node "a" and its broker, the store, the other nodes, the
// webhooks.
type fakes struct {
	mu        sync.Mutex
	users     map[string]presence.User
	subs      map[string]bool // user -> a connection of it subscribes here
	published []string        // topic=payload
	sent      []string        // node:user:payload
	pushes    []webhook.Event
	follows   map[string]int
}

func newFakes() *fakes {
	return &fakes{users: map[string]presence.User{}, subs: map[string]bool{}, follows: map[string]int{}}
}

func (f *fakes) User(_ context.Context, user string) (presence.User, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	u, ok := f.users[user]
	return u, ok, nil
}

func (f *fakes) Subscribed(user, _ string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.subs[user]
}

func (f *fakes) Publish(topic string, payload []byte, _ byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.published = append(f.published, topic+"="+string(payload))
	return nil
}

func (f *fakes) SendNotify(_ context.Context, node string, m Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = append(f.sent, node+":"+m.User+":"+string(m.Payload))
	return nil
}

func (f *fakes) SendHere(e webhook.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pushes = append(f.pushes, e)
}

func (f *fakes) Follow(user string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.follows[user]++
}

func (f *fakes) Unfollow(user string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.follows[user]--
}

func (f *fakes) set(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

func (f *fakes) counts() (published, sent, pushes int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.published), len(f.sent), len(f.pushes)
}

func live(user string, nodes ...string) presence.User {
	u := presence.User{Name: user}
	for i, n := range nodes {
		u.Sessions = append(u.Sessions, presence.Session{User: user, ID: fmt.Sprintf("d%d", i), Epoch: 1, Node: n, State: presence.Active})
	}
	return u
}

func left(user string, ago time.Duration) presence.User {
	return presence.User{Name: user, LastSeen: time.Now().Add(-ago)}
}

const grace = 300 * time.Millisecond

func startStage(t *testing.T, f *fakes) *Stage {
	t.Helper()
	s := New(Options{Node: "a", Prefix: "presence", Grace: grace, MaxPerUser: 4, MaxPending: 100,
		Store: f, Sender: f, Local: f, Follow: f, Pusher: f})
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

func TestStageOnlineIsDeliveredNotPushed(t *testing.T) {
	f := newFakes()
	f.users["alice"] = live("alice", "a", "b")
	f.subs["alice"] = true
	s := startStage(t, f)
	s.Publish("alice", []byte("hi"), 1)
	testkit.Wait(t, 5*time.Second, "delivered here and sent to b", func() error {
		p, sent, _ := f.counts()
		return testkit.Why(p == 1 && sent == 1, fmt.Sprintf("published %d sent %d", p, sent))
	})
	if f.published[0] != "presence/notify/alice=hi" || f.sent[0] != "b:alice:hi" {
		t.Errorf("published %v sent %v", f.published, f.sent)
	}
	if _, _, pushes := f.counts(); pushes != 0 || s.Stats.Pushed.Load() != 0 {
		t.Errorf("%d pushes for an online user", pushes)
	}
}

func TestStageOfflineIsPushedAtOnce(t *testing.T) {
	f := newFakes()
	f.users["bob"] = left("bob", time.Hour)
	s := startStage(t, f)
	s.Publish("bob", []byte{0xff, 0x00}, 0)
	testkit.Wait(t, 5*time.Second, "pushed", func() error {
		_, _, n := f.counts()
		return testkit.Why(n == 1, fmt.Sprintf("%d pushes", n))
	})
	e := f.pushes[0]
	var d eventData
	if err := json.Unmarshal(e.Data, &d); err != nil {
		t.Fatal(err)
	}
	if e.Type != "notify" || e.User != "bob" || e.ID == "" || d.Reason != ReasonOffline || d.Encoding != "base64" || d.Payload != "/wA=" || d.Topic != "presence/notify/bob" {
		t.Errorf("event %+v data %+v", e, d)
	}
	// A user never seen is offline too.
	s.Publish("nobody", []byte("x"), 0)
	testkit.Wait(t, 5*time.Second, "pushed", func() error {
		_, _, n := f.counts()
		return testkit.Why(n == 2, fmt.Sprintf("%d pushes", n))
	})
}

func TestStageStillOfflineAtGraceEndIsPushed(t *testing.T) {
	f := newFakes()
	f.users["carol"] = left("carol", 0)
	s := startStage(t, f)
	begin := time.Now()
	s.Publish("carol", []byte("wake"), 1)
	testkit.Wait(t, 5*time.Second, "pushed after the grace", func() error {
		_, _, n := f.counts()
		return testkit.Why(n == 1, fmt.Sprintf("%d pushes", n))
	})
	if d := time.Since(begin); d < grace-10*time.Millisecond {
		t.Errorf("pushed after %v, before the grace %v ended", d, grace)
	}
	var d eventData
	_ = json.Unmarshal(f.pushes[0].Data, &d)
	if d.Reason != ReasonGraceEnded {
		t.Errorf("reason %q", d.Reason)
	}
	testkit.Wait(t, 5*time.Second, "unfollowed", func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		return testkit.Why(f.follows["carol"] == 0, fmt.Sprint(f.follows))
	})
}

func TestStageReturnWithinGraceDeliversNoPush(t *testing.T) {
	for _, where := range []string{"here", "elsewhere"} {
		t.Run(where, func(t *testing.T) {
			f := newFakes()
			f.users["dave"] = left("dave", 0)
			s := startStage(t, f)
			s.Publish("dave", []byte("m"), 1)
			testkit.Wait(t, 5*time.Second, "held", func() error {
				return testkit.Why(s.Stats.Held.Load() == 1, "not held")
			})
			node := "a"
			if where == "elsewhere" {
				node = "b"
			}
			back := live("dave", node)
			f.set(func() {
				f.users["dave"] = back
				f.subs["dave"] = node == "a"
			})
			s.Changed(presence.Aggregate{User: "dave", Sessions: []presence.SessionView{{ID: "d0", Epoch: 1, Node: node}}})
			if node == "a" {
				s.Subscribed("dave")
			}
			testkit.Wait(t, 5*time.Second, "delivered", func() error {
				p, sent, _ := f.counts()
				return testkit.Why(p+sent == 1, fmt.Sprintf("published %d sent %d", p, sent))
			})
			time.Sleep(2 * grace) // the deadline passes: no push
			if p, sent, n := f.counts(); n != 0 || p+sent != 1 {
				t.Errorf("published %d sent %d pushes %d", p, sent, n)
			}
		})
	}
}

func TestStageMissedHereWaitsForTheSubscription(t *testing.T) {
	f := newFakes()
	f.users["erin"] = live("erin", "a") // the store says live here; nobody subscribes yet
	s := startStage(t, f)
	s.Publish("erin", []byte("m"), 1)
	testkit.Wait(t, 5*time.Second, "held", func() error { return testkit.Why(s.Stats.Held.Load() == 1, "not held") })
	f.set(func() { f.subs["erin"] = true })
	s.Subscribed("erin")
	testkit.Wait(t, 5*time.Second, "delivered on subscribe", func() error {
		p, _, _ := f.counts()
		return testkit.Why(p == 1, fmt.Sprintf("published %d", p))
	})
}

func TestStageQueueFullIsCounted(t *testing.T) {
	f := newFakes()
	s := New(Options{Node: "a", Prefix: "presence", Queue: 1, Store: f, Local: f})
	if !s.Publish("a", nil, 0) || s.Publish("a", nil, 0) {
		t.Fatal("a queue of one took two, or none")
	}
	if s.Stats.QueueFull.Load() != 1 || s.Stats.Taken.Load() != 1 {
		t.Errorf("queue full %d taken %d", s.Stats.QueueFull.Load(), s.Stats.Taken.Load())
	}
	s.Stop() // never started: returns
}

// A message waits at most a grace after it was taken, wherever it waits:
// one another node took a while ago waits here only the rest of it, and a
// user online at the deadline (its session here never subscribed) is no
// push.
func TestStageWaitsAtMostAGraceAfterTaken(t *testing.T) {
	f := newFakes()
	f.users["gus"] = live("gus", "a")
	s := startStage(t, f)
	begin := time.Now()
	s.Deliver(Message{ID: "b:x:1", User: "gus", Payload: []byte("m"), QueuedAt: begin.Add(-grace + 50*time.Millisecond)})
	testkit.Wait(t, 5*time.Second, "dropped at the deadline", func() error {
		return testkit.Why(s.Stats.Unreceived.Load() == 1, fmt.Sprintf("unreceived %d", s.Stats.Unreceived.Load()))
	})
	if d := time.Since(begin); d > grace {
		t.Errorf("waited %v: more than the rest of its grace (50ms)", d)
	}
	if _, _, n := f.counts(); n != 0 {
		t.Errorf("%d pushes for an online user", n)
	}
}
