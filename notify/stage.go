package notify

import (
	"context"
	"hash/fnv"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/presenced/presenced/presence"
)

// Store reads a user's record (its live sessions, with their nodes, and
// when it was last seen).
type Store interface {
	User(ctx context.Context, user string) (presence.User, bool, error)
}

// Sender sends a message to another node (a store command), which
// publishes it to its subscribers there. nil: one node (the memory store).
type Sender interface {
	SendNotify(ctx context.Context, node string, m Message) error
}

// Local is this node's broker: whether a connection of user here
// subscribes to topic, and a publish to the subscribers here.
type Local interface {
	Subscribed(user, topic string) bool
	Publish(topic string, payload []byte, qos byte) error
}

// Follower has the node hear a user's changes while a message waits for
// it (the interest stage's Follow), and stop.
type Follower interface {
	Follow(user string)
	Unfollow(user string)
}

// Options configure the stage.
type Options struct {
	Node   string
	Prefix string // the presence topic prefix: messages come on prefix/notify/{user}
	// Grace is how long a message waits for a user whose last session
	// ended (presence.offline_grace); 0: never.
	Grace      time.Duration
	MaxPerUser int // messages waiting for one user (notify.max_pending_per_user)
	MaxPending int // messages waiting on the node (notify.max_pending)
	Queue      int // messages and events waiting for the stage's goroutine (notify.queue)
	Now        func() time.Time
	Log        *slog.Logger
	Store      Store
	Sender     Sender // nil: one node
	Local      Local
	Follow     Follower
	Pusher     Pusher // nil: pushes are counted as lost
	// ReadTimeout bounds one store read or send (default 5 s).
	ReadTimeout time.Duration
}

// Stats are the stage's counts, read with atomic loads.
type Stats struct {
	Taken      atomic.Int64 // messages published here and taken
	Received   atomic.Int64 // messages another node sent here
	Delivered  atomic.Int64 // messages published to this node's subscribers
	Forwarded  atomic.Int64 // messages sent to another node
	Held       atomic.Int64 // messages that waited for the user (offline within the grace, or missed here)
	Returned   atomic.Int64 // held messages delivered to a session that came back
	Pushed     atomic.Int64 // push events handed to the webhooks
	Waiting    atomic.Int64 // messages waiting now
	Evicted    atomic.Int64 // the oldest waiting message of a user over max_pending_per_user, dropped
	Refused    atomic.Int64 // messages not held: max_pending waited already
	QueueFull  atomic.Int64 // messages or events dropped: the stage's queue was full
	Unreceived atomic.Int64 // held messages dropped at the deadline: the user was online, but no session that came back subscribed
	NoPusher   atomic.Int64 // pushes lost: no webhook configured
	Failures   atomic.Int64 // store reads and sends that failed
}

// job is one piece of work for the stage's goroutine.
type job struct {
	kind jobKind
	msg  Message
	user string
	live []Session
}

type jobKind uint8

const (
	jobPublish    jobKind = iota + 1 // a message published here
	jobDeliver                       // a message another node sent
	jobSubscribed                    // a connection of user subscribed here
	jobChanged                       // user's live sessions changed
)

// Stage is the notify stage: one goroutine owns the Machine and does
// every store read, send and push, so that neither the packet path nor the
// store's listener nor the pump waits on it.
type Stage struct {
	o      Options
	shards []*shard
	start  string // the node's start, part of every message id
	seq    atomic.Uint64

	waiting sync.Map // user -> struct{}: a message waits (Changed looks here)

	stop    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
	started atomic.Bool

	Stats Stats
}

// Shards is how many goroutines share the users (by a hash of the name):
// each owns its users' held messages and does their store reads and
// sends one at a time, so that a user's messages keep their order and a
// store round trip holds up an eighth of the users.
const Shards = 8

// shard is one goroutine's part of the stage: its users' held messages,
// its queue, the users it follows.
type shard struct {
	*Stage
	m        *Machine
	jobs     chan job
	followed map[string]struct{}
	held     int // s.m.Len() as last added to Stats.Waiting
}

// New returns the stage; Start starts its goroutine.
func New(o Options) *Stage {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Queue <= 0 {
		o.Queue = 4096
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = 5 * time.Second
	}
	s := &Stage{o: o, start: strconv.FormatInt(o.Now().UnixMilli(), 36), stop: make(chan struct{})}
	for range Shards {
		s.shards = append(s.shards, &shard{Stage: s, m: NewMachine(o.Node, o.MaxPerUser, max(o.MaxPending/Shards, 1)),
			jobs: make(chan job, max(o.Queue/Shards, 1)), followed: make(map[string]struct{})})
	}
	return s
}

// shardOf is user's shard.
func (s *Stage) shardOf(user string) *shard {
	h := fnv.New32a()
	_, _ = h.Write([]byte(user))
	return s.shards[h.Sum32()%Shards]
}

// Topic is user's notify topic.
func (s *Stage) Topic(user string) string { return s.o.Prefix + "/notify/" + user }

// offer queues j without waiting.
func (s *shard) offer(j job) bool {
	select {
	case s.jobs <- j:
		return true
	default:
		s.Stats.QueueFull.Add(1)
		return false
	}
}

// Publish takes a message published on user's notify topic here; false:
// the stage's queue is full (the publisher is told so).
func (s *Stage) Publish(user string, payload []byte, qos byte) bool {
	now := s.o.Now()
	m := Message{ID: s.o.Node + ":" + s.start + ":" + strconv.FormatUint(s.seq.Add(1), 10),
		User: user, Payload: payload, QoS: min(qos, 1), QueuedAt: now}
	if !s.shardOf(user).offer(job{kind: jobPublish, msg: m}) {
		return false
	}
	s.Stats.Taken.Add(1)
	return true
}

// Deliver takes a message another node sent (from the pump: it returns
// at once).
func (s *Stage) Deliver(m Message) {
	s.Stats.Received.Add(1)
	s.shardOf(m.User).offer(job{kind: jobDeliver, msg: m})
}

// Subscribed tells the stage that a connection of user subscribed to its
// notify topic here (from the hook: it returns at once).
func (s *Stage) Subscribed(user string) {
	if _, ok := s.waiting.Load(user); ok {
		s.shardOf(user).offer(job{kind: jobSubscribed, user: user})
	}
}

// Changed tells the stage of a user's committed change (from the pump:
// it returns at once, and costs a map lookup unless a message waits).
func (s *Stage) Changed(a presence.Aggregate) {
	if _, ok := s.waiting.Load(a.User); !ok {
		return
	}
	live := make([]Session, len(a.Sessions))
	for i, v := range a.Sessions {
		live[i] = Session{Node: v.Node, ID: v.ID, Epoch: v.Epoch}
	}
	s.shardOf(a.User).offer(job{kind: jobChanged, user: a.User, live: live})
}

// Start starts the stage's goroutines.
func (s *Stage) Start() {
	s.started.Store(true)
	for _, sh := range s.shards {
		s.wg.Add(1)
		go sh.run()
	}
}

// Stop stops the goroutines and waits for them. What waits is dropped.
func (s *Stage) Stop() {
	s.once.Do(func() { close(s.stop) })
	s.wg.Wait()
}

func (s *shard) run() {
	defer s.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-s.stop:
			return
		case j := <-s.jobs:
			s.do(j)
		case <-timer.C:
			s.expire()
		}
		s.tidy()
		timer.Stop()
		if next := s.m.Next(); !next.IsZero() {
			timer.Reset(max(next.Sub(s.o.Now()), 0))
		}
	}
}

func (s *shard) do(j job) {
	switch j.kind {
	case jobPublish:
		s.publish(j.msg)
	case jobDeliver:
		s.local(j.msg)
	case jobSubscribed:
		s.subscribed(j.user)
	case jobChanged:
		s.live(j.user, j.live)
	}
}

// read reads user's live sessions and when it was last seen.
func (s *shard) read(user string) (live []Session, lastSeen time.Time, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.o.ReadTimeout)
	defer cancel()
	u, _, err := s.o.Store.User(ctx, user)
	if err != nil {
		s.Stats.Failures.Add(1)
		return nil, time.Time{}, err
	}
	for _, v := range u.Sessions {
		if v.Live() {
			live = append(live, Session{Node: v.Node, ID: v.ID, Epoch: v.Epoch})
		}
	}
	return live, u.LastSeen, nil
}

// publish decides a message published here: routed to the nodes of the
// user's live sessions, held while the user may come back, or pushed.
func (s *shard) publish(m Message) {
	live, lastSeen, err := s.read(m.User)
	if err != nil {
		// The store cannot say: wait a grace, and read again then.
		s.o.Log.Debug("notify: the store did not answer; the message waits", "user", m.User, "err", err)
		s.hold(m, s.deadline(m), false)
		return
	}
	v, deadline := Decide(len(live), lastSeen, s.o.Now(), s.o.Grace)
	switch v {
	case Route:
		s.route(m, live)
	case Wait:
		s.hold(m, deadline, false)
	case Push:
		s.push(m, ReasonOffline)
	}
}

// route sends m to every node that holds a live session of its user.
func (s *shard) route(m Message, live []Session) {
	sent := map[string]bool{}
	for _, v := range live {
		if sent[v.Node] {
			continue
		}
		sent[v.Node] = true
		if v.Node == s.o.Node {
			s.local(m)
			continue
		}
		s.forward(v.Node, m)
	}
}

// forward sends m to node.
func (s *shard) forward(node string, m Message) {
	if s.o.Sender == nil {
		// One node: a session of another node is a stale record.
		s.local(m)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.o.ReadTimeout)
	defer cancel()
	if err := s.o.Sender.SendNotify(ctx, node, m); err != nil {
		s.Stats.Failures.Add(1)
		s.o.Log.Debug("notify: a message could not be sent to its node; it waits here", "node", node, "user", m.User, "err", err)
		s.hold(m, s.deadline(m), true)
		return
	}
	s.Stats.Forwarded.Add(1)
}

// local publishes m to the user's subscribers here or, when no connection
// of the user subscribes here (its session just ended, or came back and has
// not subscribed yet), holds it for a grace: the sessions live elsewhere
// had it already.
func (s *shard) local(m Message) {
	topic := s.Topic(m.User)
	if s.o.Local.Subscribed(m.User, topic) {
		s.deliver(m)
		return
	}
	s.hold(m, s.deadline(m), true)
}

// deliver publishes m to this node's subscribers.
func (s *shard) deliver(m Message) {
	if err := s.o.Local.Publish(s.Topic(m.User), m.Payload, m.QoS); err != nil {
		s.Stats.Failures.Add(1)
		s.o.Log.Warn("notify: publish failed", "user", m.User, "err", err)
		return
	}
	s.Stats.Delivered.Add(1)
}

// deadline is when a held message stops waiting: a grace after it was
// taken (on the node that took it), wherever it waits, so that a message
// that waits on one node, then on the node the user came back to, never
// waits more than one grace in all. A clock behind the taking node's by
// more than the grace waits at most a grace from now.
func (s *shard) deadline(m Message) time.Time {
	now := s.o.Now()
	d := m.QueuedAt.Add(s.o.Grace)
	if cap := now.Add(s.o.Grace); d.After(cap) {
		d = cap
	}
	return d
}

// hold keeps m until deadline, hearing its user meanwhile: the node
// follows the user first, then reads it (hear first, load second: a return
// after the read is heard, one before it is read). missed: m reached this
// node for a session here that has no subscriber; the sessions live on
// other nodes now had it.
func (s *shard) hold(m Message, deadline time.Time, missed bool) {
	s.waiting.Store(m.User, struct{}{})
	if _, ok := s.followed[m.User]; !ok {
		s.followed[m.User] = struct{}{}
		if s.o.Follow != nil {
			s.o.Follow.Follow(m.User)
		}
	}
	live, _, err := s.read(m.User)
	var seen []Session
	if missed && err == nil {
		for _, v := range live {
			if v.Node != s.o.Node {
				seen = append(seen, v)
			}
		}
	}
	evicted, refused := s.m.Hold(m, deadline, seen)
	s.Stats.Evicted.Add(int64(len(evicted)))
	if refused {
		s.Stats.Refused.Add(1)
		s.o.Log.Debug("notify: notify.max_pending messages wait: one dropped", "user", m.User)
		return
	}
	s.Stats.Held.Add(1)
	if err == nil {
		s.live(m.User, live)
	}
}

// live acts on user's live sessions now: forwards to the nodes where a
// session came back, and delivers here if a connection of the user
// subscribes here.
func (s *shard) live(user string, live []Session) {
	for _, f := range s.m.Live(user, live) {
		s.Stats.Returned.Add(1)
		s.forward(f.Node, f.Msg)
	}
	if s.m.Waiting(user) && s.o.Local.Subscribed(user, s.Topic(user)) {
		s.subscribed(user)
	}
}

// subscribed delivers what waits for user here.
func (s *shard) subscribed(user string) {
	if !s.o.Local.Subscribed(user, s.Topic(user)) {
		return
	}
	for _, m := range s.m.Take(user) {
		s.Stats.Returned.Add(1)
		s.deliver(m)
	}
}

// expire acts on the messages whose deadline passed: each user is read
// again (a return the node did not hear is not a push); an online user's
// returned sessions get them; an offline user's are pushed.
func (s *shard) expire() {
	now := s.o.Now()
	for _, user := range s.m.Due(now) {
		live, _, err := s.read(user)
		if err == nil {
			s.live(user, live)
		}
		for _, m := range s.m.Expire(user, now) {
			switch {
			case err != nil:
				// The store cannot say: a push may wake a user who is
				// online, which beats losing the message.
				s.push(m, ReasonGraceEnded)
			case len(live) > 0:
				s.Stats.Unreceived.Add(1)
			default:
				s.push(m, ReasonGraceEnded)
			}
		}
	}
}

// push hands m's push to the webhooks.
func (s *shard) push(m Message, reason string) {
	if s.o.Pusher == nil {
		s.Stats.NoPusher.Add(1)
		return
	}
	s.o.Pusher.SendHere(event(s.Topic(m.User), m, reason, s.o.Now()))
	s.Stats.Pushed.Add(1)
}

// tidy stops following the users nothing waits for any more.
func (s *shard) tidy() {
	s.Stats.Waiting.Add(int64(s.m.Len() - s.held))
	s.held = s.m.Len()
	for u := range s.followed {
		if !s.m.Waiting(u) {
			delete(s.followed, u)
			s.waiting.Delete(u)
			if s.o.Follow != nil {
				s.o.Follow.Unfollow(u)
			}
		}
	}
}
