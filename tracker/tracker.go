package node

import (
	"context"
	"errors"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/rs/zerolog"

	"github.com/presenced/presenced/hooks"
	"github.com/presenced/presenced/presence"
	"github.com/presenced/presenced/store"
)

// Tracker holds, for every connection of this node that has a user, what the
// store should say (want) and what the store was last told (have), and writes
// the difference from a few worker goroutines. A hook only changes want and
// marks the slot dirty, so nothing on the packet path waits on the store, and
// many changes of one connection coalesce into one write (latest wins).
//
// Slots are keyed by MQTT client id, which is also the session id: a takeover
// replaces want.conn, so the old connection's late events are recognised and
// ignored here, and the store ends the old session when it opens the new one.
type Tracker struct {
	store   Store
	node    string
	ttl     time.Duration
	log     zerolog.Logger
	seed    maphash.Seed
	shards  []*queue
	retryIn time.Duration

	mu    sync.Mutex
	slots map[string]*slot
	accts map[string]*acct

	stop chan struct{}
	wg   sync.WaitGroup

	Stats TrackerStats
}

// TrackerStats are counts read with atomic loads.
type TrackerStats struct {
	Depth       atomic.Int64 // items waiting in the queues or being written
	Retrying    atomic.Int64 // items waiting to be tried again after a store failure
	Stale       atomic.Int64 // writes the store refused as stale
	StaleEvents atomic.Int64 // hook events of a replaced connection, ignored
	Errors      atomic.Int64 // store failures (retried)
	Opened      atomic.Int64
	Ended       atomic.Int64
	Updated     atomic.Int64
	Lost        atomic.Int64 // sessions the store no longer had at renewal
}

type want struct {
	conn        *mqtt.Client
	user        string
	device      string
	status      presence.Status
	text        string
	established bool
	live        bool
	reason      presence.EndReason
	lastWords   *string
}

type have struct {
	conn   *mqtt.Client
	user   string
	epoch  uint64
	open   bool
	device string
	status presence.Status
	text   string
}

type slot struct {
	id     string
	mu     sync.Mutex
	want   want
	have   have
	queued bool
}

type acct struct {
	user    string
	mu      sync.Mutex
	pending presence.AccountUpdate
	queued  bool
}

// NewTracker returns a tracker writing to store as node, giving each session
// the store-side expiry ttl, with the given number of worker shards.
func NewTracker(store Store, node string, ttl time.Duration, shards int, log zerolog.Logger) *Tracker {
	t := &Tracker{
		store: store, node: node, ttl: ttl, log: log,
		seed:    maphash.MakeSeed(),
		retryIn: 200 * time.Millisecond,
		slots:   make(map[string]*slot),
		accts:   make(map[string]*acct),
		stop:    make(chan struct{}),
	}
	for range shards {
		t.shards = append(t.shards, newQueue(&t.Stats.Depth))
	}
	return t
}

var _ hooks.Tracker = (*Tracker)(nil)

// Start starts the workers.
func (t *Tracker) Start() {
	for _, q := range t.shards {
		t.wg.Add(1)
		go t.work(q)
	}
}

// Drain waits until every queue is empty or ctx ends.
func (t *Tracker) Drain(ctx context.Context) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for t.Stats.Depth.Load() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// Stop stops the workers and waits for them.
func (t *Tracker) Stop() {
	close(t.stop)
	t.wg.Wait()
}

func (t *Tracker) shard(key string) *queue {
	return t.shards[maphash.String(t.seed, key)%uint64(len(t.shards))]
}

func (t *Tracker) work(q *queue) {
	defer t.wg.Done()
	for {
		select {
		case <-t.stop:
			return
		case <-q.signal:
		}
		for _, it := range q.take() {
			if it.sync(t) {
				t.retry(it)
			}
			t.Stats.Depth.Add(-1) // after the write, so Drain means "written"
		}
	}
}

// retry puts an item back after a pause, unless the tracker is stopping.
func (t *Tracker) retry(it item) {
	t.wg.Add(1)
	t.Stats.Retrying.Add(1)
	go func() {
		defer t.wg.Done()
		defer t.Stats.Retrying.Add(-1)
		timer := time.NewTimer(t.retryIn)
		defer timer.Stop()
		select {
		case <-t.stop:
		case <-timer.C:
			t.enqueue(it)
		}
	}()
}

func (t *Tracker) enqueue(it item) {
	switch v := it.(type) {
	case *slot:
		v.mu.Lock()
		if v.queued {
			v.mu.Unlock()
			return
		}
		v.queued = true
		v.mu.Unlock()
		t.shard(v.id).push(v)
	case *acct:
		v.mu.Lock()
		if v.queued {
			v.mu.Unlock()
			return
		}
		v.queued = true
		v.mu.Unlock()
		t.shard(v.user).push(v)
	}
}

// change applies fn to the slot of cl if cl is still that slot's connection.
func (t *Tracker) change(cl *mqtt.Client, fn func(w *want)) {
	t.mu.Lock()
	s := t.slots[cl.ID]
	t.mu.Unlock()
	if s == nil {
		t.Stats.StaleEvents.Add(1)
		return
	}
	s.mu.Lock()
	if s.want.conn != cl {
		s.mu.Unlock()
		t.Stats.StaleEvents.Add(1)
		return
	}
	fn(&s.want)
	s.mu.Unlock()
	t.enqueue(s)
}

// Connect implements hooks.Tracker.
func (t *Tracker) Connect(cl *mqtt.Client, id hooks.Identity) {
	t.mu.Lock() // held while want is set, so that sync cannot drop the slot in between
	s := t.slots[cl.ID]
	if s == nil {
		s = &slot{id: cl.ID}
		t.slots[cl.ID] = s
	}
	s.mu.Lock()
	s.want = want{conn: cl, user: id.User, device: id.Device, status: presence.Online, live: true}
	s.mu.Unlock()
	t.mu.Unlock()
	t.enqueue(s)
}

// Established implements hooks.Tracker.
func (t *Tracker) Established(cl *mqtt.Client) {
	t.change(cl, func(w *want) { w.established = true })
}

// Set implements hooks.Tracker.
func (t *Tracker) Set(cl *mqtt.Client, user string, req presence.SetRequest) {
	if req.Scope == presence.ScopeAccount {
		t.setAccount(user, req.AccountUpdate())
		return
	}
	t.change(cl, func(w *want) {
		if req.Status != nil {
			w.status = *req.Status
		}
		if req.Text != nil {
			w.text = *req.Text
		}
		if req.Device != nil {
			w.device = *req.Device
		}
	})
}

func (t *Tracker) setAccount(user string, upd presence.AccountUpdate) {
	t.mu.Lock()
	a := t.accts[user]
	if a == nil {
		a = &acct{user: user}
		t.accts[user] = a
	}
	t.mu.Unlock()
	a.mu.Lock()
	a.pending = presence.AccountUpdate{
		Status: pick(upd.Status, a.pending.Status),
		Text:   pick(upd.Text, a.pending.Text),
	}
	a.mu.Unlock()
	t.enqueue(a)
}

func pick[T any](later, earlier *T) *T {
	if later != nil {
		return later
	}
	return earlier
}

// LastWords implements hooks.Tracker.
func (t *Tracker) LastWords(cl *mqtt.Client, text string) {
	t.change(cl, func(w *want) { w.lastWords = &text })
}

// Disconnect implements hooks.Tracker.
func (t *Tracker) Disconnect(cl *mqtt.Client, reason presence.EndReason) {
	t.change(cl, func(w *want) {
		w.live = false
		w.reason = reason
	})
}

// Len returns the number of connections tracked.
func (t *Tracker) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.slots)
}

// failed sorts a store error: stale writes are final and counted; anything
// else is a store failure and the item is retried.
func (t *Tracker) failed(op string, s *slot, err error) (retry bool) {
	if errors.Is(err, presence.ErrStaleEpoch) || errors.Is(err, presence.ErrNotLive) {
		t.Stats.Stale.Add(1)
		t.log.Debug().Str("op", op).Str("session", s.id).Err(err).Msg("stale write rejected")
		return false
	}
	if errors.Is(err, presence.ErrBadName) || errors.Is(err, presence.ErrBadStatus) || errors.Is(err, presence.ErrBadPayload) {
		t.log.Warn().Str("op", op).Str("session", s.id).Err(err).Msg("write refused")
		return false
	}
	t.Stats.Errors.Add(1)
	t.logFailure(err).Str("op", op).Str("session", s.id).Err(err).Msg("store write failed; will retry")
	return true
}

// logFailure picks the level of a store failure: an outage is logged once by
// the store itself, so each write that meets it is only a debug line.
func (t *Tracker) logFailure(err error) *zerolog.Event {
	if errors.Is(err, store.ErrUnavailable) {
		return t.log.Debug()
	}
	return t.log.Warn()
}

// sync writes the difference between a slot's want and have.
func (s *slot) sync(t *Tracker) bool {
	ctx := context.Background()
	s.mu.Lock()
	s.queued = false
	w, h := s.want, s.have
	s.mu.Unlock()

	retry := false
	// 1. End the committed session when it is no longer wanted.
	if h.open {
		replaced := w.conn != h.conn
		var end presence.EndArgs
		switch {
		case !replaced && !w.live:
			end = presence.EndArgs{Reason: w.reason, LastWords: w.lastWords}
		case replaced && w.live && !w.established:
			// A takeover in progress: keep the old session until the new
			// connection is established or fails.
		case replaced && (!w.live || w.user != h.user):
			end = presence.EndArgs{Reason: presence.EndTakeover}
		}
		if end.Reason != "" {
			end.User, end.ID, end.Epoch = h.user, s.id, h.epoch
			err := t.store.End(ctx, end)
			if err == nil || !t.failed("end", s, err) {
				if err == nil {
					t.Stats.Ended.Add(1)
				}
				h.open = false
			} else {
				retry = true
			}
		}
	}
	// 2. Open the wanted session (taking over the old one in the store).
	if !retry && w.live && w.established && (!h.open || h.conn != w.conn) {
		sess, err := t.store.Open(ctx, presence.OpenArgs{
			User: w.user, ID: s.id, Node: t.node, Device: w.device,
			Status: w.status, Text: w.text, TTL: t.ttl,
		})
		if err == nil {
			t.Stats.Opened.Add(1)
			h = have{conn: w.conn, user: w.user, epoch: sess.Epoch, open: true, device: w.device, status: w.status, text: w.text}
		} else {
			retry = t.failed("open", s, err)
		}
	}
	// 3. Bring the session's own fields up to date.
	if !retry && h.open && h.conn == w.conn && w.live {
		var upd presence.Update
		if w.status != h.status {
			upd.Status = &w.status
		}
		if w.text != h.text {
			upd.Text = &w.text
		}
		if w.device != h.device {
			upd.Device = &w.device
		}
		if !upd.Empty() {
			err := t.store.Update(ctx, presence.SessionRef{User: h.user, ID: s.id, Epoch: h.epoch}, upd)
			switch {
			case err == nil:
				t.Stats.Updated.Add(1)
				h.status, h.text, h.device = w.status, w.text, w.device
			case t.failed("update", s, err):
				retry = true
			default:
				h.open = false // the store ended it: open a new session
				t.enqueue(s)
			}
		}
	}

	s.mu.Lock()
	s.have = h
	done := !s.want.live && !h.open && !s.queued
	s.mu.Unlock()
	if done {
		t.mu.Lock()
		s.mu.Lock()
		if !s.want.live && !s.have.open && !s.queued && t.slots[s.id] == s {
			delete(t.slots, s.id)
		}
		s.mu.Unlock()
		t.mu.Unlock()
	}
	return retry
}

func (a *acct) sync(t *Tracker) bool {
	a.mu.Lock()
	upd := a.pending
	a.pending = presence.AccountUpdate{}
	a.queued = false
	a.mu.Unlock()
	if upd.Status == nil && upd.Text == nil {
		return false
	}
	err := t.store.SetAccount(context.Background(), a.user, upd)
	if err == nil {
		t.Stats.Updated.Add(1)
		return false
	}
	if errors.Is(err, presence.ErrBadStatus) || errors.Is(err, presence.ErrBadPayload) || errors.Is(err, presence.ErrBadName) {
		t.log.Warn().Str("user", a.user).Err(err).Msg("account write refused")
		return false
	}
	t.Stats.Errors.Add(1)
	t.logFailure(err).Str("user", a.user).Err(err).Msg("store write failed; will retry")
	a.mu.Lock() // put the update back under any newer one
	a.pending = presence.AccountUpdate{Status: pick(a.pending.Status, upd.Status), Text: pick(a.pending.Text, upd.Text)}
	a.mu.Unlock()
	return true
}

// Renew renews the store-side expiry of every session this node holds, in one
// bulk call, and re-opens any that the store no longer has.
func (t *Tracker) Renew(ctx context.Context) error {
	t.mu.Lock()
	all := make([]*slot, 0, len(t.slots))
	for _, s := range t.slots {
		all = append(all, s)
	}
	t.mu.Unlock()
	refs := make([]presence.SessionRef, 0, len(all))
	byID := make(map[string]*slot, len(all))
	for _, s := range all {
		s.mu.Lock()
		if s.have.open {
			refs = append(refs, presence.SessionRef{User: s.have.user, ID: s.id, Epoch: s.have.epoch})
			byID[s.id] = s
		}
		s.mu.Unlock()
	}
	if len(refs) == 0 {
		return nil
	}
	stale, err := t.store.Renew(ctx, t.node, refs, t.ttl)
	if err != nil {
		return err
	}
	for _, r := range stale {
		s := byID[r.ID]
		s.mu.Lock()
		lost := s.have.open && s.have.epoch == r.Epoch
		if lost {
			s.have.open = false
		}
		s.mu.Unlock()
		if lost {
			t.Stats.Lost.Add(1)
			t.log.Warn().Str("user", r.User).Str("session", r.ID).Uint64("epoch", r.Epoch).Msg("store no longer had a live session; opening it again")
			t.enqueue(s)
		}
	}
	return nil
}

// Reassert has every session this node holds opened again (with new
// epochs): the store lost them (Redis restarted empty, or this node was cut
// off and swept). Ends still pending for dead connections are dropped with
// them: there is nothing left to end.
func (t *Tracker) Reassert() {
	t.mu.Lock()
	all := make([]*slot, 0, len(t.slots))
	for _, s := range t.slots {
		all = append(all, s)
	}
	t.mu.Unlock()
	for _, s := range all {
		s.mu.Lock()
		s.have.open = false
		s.mu.Unlock()
		t.enqueue(s)
	}
}
